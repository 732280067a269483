"""The bridge marks itself not dumpable, so its children cannot read its environment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.live import ROOT

PROBE = """
import ctypes, ctypes.util, os, subprocess, sys
from mcp_app.bridge.protect import PR_GET_DUMPABLE, protect_process
libc = ctypes.CDLL(ctypes.util.find_library("c"))
before = libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
done = protect_process()
after = libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
# A child that execs is dumpable again: a stdio server keeps working as before.
child = subprocess.run(
    [sys.executable, "-c",
     "import ctypes, ctypes.util; print(ctypes.CDLL(ctypes.util.find_library('c'))"
     ".prctl(3, 0, 0, 0, 0))"],
    capture_output=True, text=True, check=True,
).stdout.strip()
print(before, done, after, child)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_the_bridge_process_is_not_dumpable_and_its_children_are() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["1", "True", "0", "1"]


def test_the_bridge_command_protects_itself() -> None:
    # The management command is what the compose service and dev.py run start.
    source = (ROOT / "mcp_app/management/commands/mcp_stdio_bridge.py").read_text()
    assert "protect_process()" in source
