"""A web process freezes what it loaded and spaces out young collections (mcp_app/ops/collector.py).

Each case imports ``mcpsite.asgi`` in a fresh interpreter, as uvicorn and Daphne do, and reads
the collector's state there: the test process's own collector is left alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.live import ROOT

_PROBE = (
    "import gc, json, mcpsite.asgi; "
    "print(json.dumps({'threshold': gc.get_threshold(), 'frozen': gc.get_freeze_count()}))"
)


def _collector_of_a_web_process(**env: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "mcpsite.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_web_process_freezes_its_startup_objects_and_collects_young_ones_less_often():
    found = _collector_of_a_web_process(MCP_GC_YOUNG_THRESHOLD="40000")

    assert found["threshold"][0] == 40000
    # Django, the apps and their modules: far more than a bare interpreter holds.
    assert found["frozen"] > 50_000


def test_zero_leaves_the_collector_as_python_sets_it():
    found = _collector_of_a_web_process(MCP_GC_YOUNG_THRESHOLD="0")

    assert found["threshold"] == [700, 10, 10]
    assert found["frozen"] == 0
