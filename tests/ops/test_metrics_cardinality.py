"""``/metrics`` of several web processes (issue #25): each process's ``process_*`` figures,
labelled by pid, which prometheus-client leaves out in multiprocess mode; and tool-call
latency whose series do not grow with the number of tools (a histogram per tool made 17 series
of each, 170,000 for an endpoint of 10,000 tools)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.ops.test_metrics import modern, scrape, uvicorn_workers, value, wait_until
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import flush_database

SLUG = "many-tools"
TOOLS = 30
PROCESS_FIGURES = (
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
)


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        endpoint.tools.add(*(make_python_tool(f"echo_{n}", "echo") for n in range(TOOLS)))
    with uvicorn_workers(2) as base_url:
        yield base_url
    flush_database(django_db_blocker)


def pids(samples: dict[Any, float], name: str) -> set[str]:
    return {dict(labels)["pid"] for (sample, labels) in samples if sample == name}


@pytest.mark.django_db
def test_each_web_process_has_its_process_figures_labelled_by_pid(server: str) -> None:
    # Both worker processes are up once both have written their metric files.
    wait_until(
        lambda: len(pids(scrape(server), "process_resident_memory_bytes")) == 2,
        "process figures of both worker processes",
    )
    samples = scrape(server)
    workers = pids(samples, "process_resident_memory_bytes")
    assert str(os.getpid()) not in workers
    for name in PROCESS_FIGURES:
        assert pids(samples, name) == workers, name
        for pid in workers:
            assert value(samples, name, pid=pid) > 0, (name, pid)
    # Every scrape, whichever process answers it, reports both.
    for _ in range(4):
        assert pids(scrape(server), "process_cpu_seconds_total") == workers


@pytest.mark.django_db
def test_latency_series_do_not_grow_with_the_number_of_tools(server: str) -> None:
    url = f"{server}/mcp/{SLUG}"
    for n in range(TOOLS):
        name = f"echo_{n}"
        arguments = {"name": name, "arguments": {"message": "hi"}}
        assert modern(url, "tools/call", arguments, name).status_code == 200

    def histogram_series(samples: dict[Any, float]) -> dict[Any, float]:
        return {
            (name, labels): sample
            for (name, labels), sample in samples.items()
            if name.startswith("mcphost_tool_call_duration_seconds")
            and dict(labels).get("endpoint") == SLUG
        }

    def observed() -> float:
        series = histogram_series(scrape(server))
        return sum(sample for (name, _), sample in series.items() if name.endswith("_count"))

    wait_until(lambda: observed() == TOOLS, "every call observed")
    samples = scrape(server)
    # 15 buckets (with +Inf), the sum and the count: for the endpoint, whatever its tools.
    histogram = list(histogram_series(samples))
    assert len(histogram) == 17, f"{len(histogram)} series: {histogram[:3]}"
    assert not [labels for _name, labels in histogram if "tool" in dict(labels)]
    # Per tool, two counters: calls, and their seconds (the mean duration).
    for n in range(TOOLS):
        tool = {"endpoint": SLUG, "tool": f"echo_{n}"}
        assert value(samples, "mcphost_tool_calls_total", **tool) == 1
        assert value(samples, "mcphost_tool_call_seconds_total", **tool) > 0
    per_tool = [labels for (_name, labels) in samples if dict(labels).get("tool")]
    assert len(per_tool) == 2 * TOOLS
