"""The official MCP conformance suite against a real server holding the fixtures as rows.

The harness is an independent client nobody here wrote. A dead server still "passes" many
checks, so the gate is zero failures, zero warnings and the full scenario count, plus a floor
on passed checks so that a regression cannot hide behind checks that turned into INFO.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import mcp.types as types
import pytest
from django.test import override_settings
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from conformance import fixtures
from conformance.runner import expected_failures, inspector_cli, run_suite
from tests.support.balancer import round_robin
from tests.support.live import asgi_server, flush_database
from tests.support.worker import BACKGROUND_ENV, celery_worker

pytestmark = pytest.mark.django_db

MODULES = "mcp_app.builtin_tools,conformance.tools"


@pytest.fixture(scope="module")
def conformance_url(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock(), override_settings(MCP_PYTHON_TOOL_MODULES=MODULES):
        fixtures.load("conformance")
    # Streams of 2025-11-25 sessions are closed after 0.5 s for the client to poll, so the
    # reconnection scenario exercises priming, retry and GET + Last-Event-ID.
    env = {
        "MCP_PYTHON_TOOL_MODULES": MODULES,
        "MCP_SSE_POLL_AFTER_SECONDS": "0.5",
        "MCP_SSE_RETRY_MS": "100",
        **BACKGROUND_ENV,
    }
    # Production shape: two web processes (Daphne and uvicorn) on one PostgreSQL and Redis,
    # behind a balancer without sticky sessions, so a session's requests, its GET stream,
    # its answers to questions and its resumed streams land on different processes; the
    # task scenarios' tools run on a Celery worker process.
    with (
        celery_worker(extra_env=env),
        asgi_server("daphne", env) as first,
        asgi_server("uvicorn", env) as second,
        round_robin([first, second]) as base,
    ):
        # The harness's DNS-rebinding check needs a loopback URL (127.0.0.1 or localhost).
        yield f"{base}/mcp/conformance"
    flush_database(django_db_blocker)


def test_conformance_0_1_16_suite_all(conformance_url: str) -> None:
    result = run_suite(conformance_url, version="0.1.16", args=["--suite", "all"])
    print(result.summary_line())
    print("\n".join(result.problems))
    allowed = set(expected_failures("0.1.16"))
    assert len(result.scenarios) == 32, result.log
    assert result.failed_scenarios() <= allowed, result.problems
    assert result.warned_scenarios() <= allowed, result.problems
    # Every check: sse-multiple-streams lists text/event-stream first, so its tools/list
    # answers come as SSE (the client's preference), and its second check passes.
    assert result.passed >= 47, result.summary_line()


# Scenarios that fail because a feature is not built yet (not spec contradictions: those would
# go in conformance/expected-failures-*.json). Each names the missing feature.
NOT_BUILT_YET: set[str] = set()
# Checks the bare `--suite all` run of alpha.12 passes (all 65 scenarios, tasks-* included).
BARE_PASSED_FLOOR = 234


@pytest.mark.parametrize(
    ("spec_version", "scenario_count", "passed_floor"),
    [("2025-11-25", 33, 84), ("2026-07-28", 40, 153)],
)
def test_conformance_0_2_0_alpha_12_in_each_era(
    conformance_url: str, spec_version: str, scenario_count: int, passed_floor: int
) -> None:
    version = "0.2.0-alpha.12"
    result = run_suite(
        conformance_url, version=version, args=["--suite", "all", "--spec-version", spec_version]
    )
    print(spec_version, result.summary_line())
    print("\n".join(result.problems))
    allowed = set(expected_failures(version)) | NOT_BUILT_YET
    assert len(result.scenarios) == scenario_count, result.log
    assert result.failed_scenarios() <= allowed, result.problems
    assert result.warned_scenarios() <= allowed, result.problems
    assert result.passed >= passed_floor, result.summary_line()


def test_conformance_0_2_0_alpha_12_bare_suite_all(conformance_url: str) -> None:
    """Every scenario at its own wire: the only run that reaches extensions (tasks-*).

    Skills scenarios are all SKIPPED (the extension is not offered) and
    ``tasks-status-notifications`` is always SKIPPED in alpha.12, so neither can fail.
    """
    version = "0.2.0-alpha.12"
    result = run_suite(conformance_url, version=version, args=["--suite", "all"])
    print("bare", result.summary_line())
    print("\n".join(result.problems))
    allowed = set(expected_failures(version)) | NOT_BUILT_YET
    assert len(result.scenarios) == 65, result.log
    assert result.failed_scenarios() <= allowed, result.problems
    assert result.warned_scenarios() <= allowed, result.problems
    assert result.failed == 0, result.problems
    assert result.passed >= BARE_PASSED_FLOOR, result.summary_line()


async def test_the_fixtures_behave_as_the_scenarios_describe(conformance_url: str) -> None:
    """Our own, stricter checks of the fixtures the suite only samples."""
    logs: list[str] = []
    progress: list[float] = []
    schemas: list[dict[str, Any]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        schemas.append(params.requested_schema)
        return types.ElicitResult(action="decline")

    async with (
        asyncio.timeout(30),
        Client(
            conformance_url, mode="legacy", logging_callback=on_log, elicitation_callback=elicit
        ) as client,
    ):
        text = await client.call_tool("test_simple_text", None)
        image = await client.call_tool("test_image_content", {})
        audio = await client.call_tool("test_audio_content", {})
        mixed = await client.call_tool("test_multiple_content_types", {})
        error = await client.call_tool("test_error_handling", {})
        with pytest.warns(MCPDeprecationWarning):  # logging is deprecated in 2026-07-28
            await client.set_logging_level("debug")
        await client.call_tool("test_tool_with_logging", {})
        await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        await client.call_tool("test_elicitation_sep1034_defaults", {})
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        template = await client.read_resource("test://template/123/data")
        prompt = await client.get_prompt(
            "test_prompt_with_embedded_resource", {"resourceUri": "test://example-resource"}
        )
    assert text.content[0].text == "This is a simple text response for testing."
    assert (image.content[0].type, image.content[0].mime_type) == ("image", "image/png")
    assert (audio.content[0].type, audio.content[0].mime_type) == ("audio", "audio/wav")
    assert [block.type for block in mixed.content] == ["text", "image", "resource"]
    assert error.is_error and "intentionally" in error.content[0].text
    assert logs == ["Tool execution started", "Tool processing data", "Tool execution completed"]
    assert progress == [0, 50, 100]
    assert schemas[0]["properties"]["status"]["default"] == "active"
    assert tools["json_schema_2020_12_tool"].input_schema == fixtures.JSON_SCHEMA_2020_12
    assert '"id":"123"' in template.contents[0].text
    assert prompt.messages[0].content.resource.uri == "test://example-resource"


def test_mcp_inspector_cli_lists_calls_reads_and_gets_prompts(conformance_url: str) -> None:
    """A second client nobody here wrote: the official Inspector, in its CLI mode."""
    listed = inspector_cli(conformance_url, "--method", "tools/list")
    called = inspector_cli(
        conformance_url, "--method", "tools/call", "--tool-name", "test_simple_text"
    )
    read = inspector_cli(
        conformance_url, "--method", "resources/read", "--uri", "test://static-text"
    )
    prompt = inspector_cli(
        conformance_url,
        "--method",
        "prompts/get",
        "--prompt-name",
        "test_prompt_with_arguments",
        "--prompt-args",
        "arg1=one",
        "arg2=two",
    )
    assert "test_simple_text" in {tool["name"] for tool in listed["tools"]}
    assert called["content"] == [
        {"type": "text", "text": "This is a simple text response for testing."}
    ]
    assert read["contents"][0]["text"] == "This is the content of the static text resource."
    assert prompt["messages"][0]["content"]["text"] == (
        "Prompt with arguments: arg1='one', arg2='two'"
    )
