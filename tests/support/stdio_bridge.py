"""``manage.py mcp_stdio_bridge`` in a subprocess on 127.0.0.1, serving the test database.

The port is the caller's (``live.free_port``): the web side's MCP_STDIO_BRIDGE_URL must name
it before the bridge starts.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.live import ROOT, SECRET_KEY, database_url, wait_for_port


@dataclass
class RunningBridge:
    """The bridge's base URL, its log file (the children's stderr lands there), the process."""

    url: str
    log: Path
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def run_bridge(servers: str, log: Path, port: int) -> Iterator[RunningBridge]:
    """Run the bridge on ``port`` with the allow-list ``servers`` until the block ends.

    It gets the live servers' SECRET_KEY (so the bridge secret derived from it matches) and
    DATABASE_URL: what its children must never see.
    """
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "MCP_STDIO_SERVERS": servers,
        "MCP_STDIO_BRIDGE_URL": url,
        "DATABASE_URL": database_url(),
        "SECRET_KEY": SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
    }
    with open(log, "ab") as output:  # a restarted bridge goes on in the same file
        process = subprocess.Popen(
            [sys.executable, "manage.py", "mcp_stdio_bridge", "--port", str(port)],
            cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield RunningBridge(url=url, log=log, process=process)
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
