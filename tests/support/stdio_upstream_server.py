"""The test upstream of ``mcp_upstream_server`` over stdio: the official SDK's MCPServer,
run by the stdio bridge as an allow-listed program.

Run as ``python -m tests.support.stdio_upstream_server [ARGS...]`` (or by path). It serves every
tool of ``mcp_upstream_server`` (``progress``, ``ask_name``, ``ask_model``, ``die``,
``remember``: one process is one MCP session, so what ``remember`` keeps is this child's), and:

* ``environment()``: the names of the variables the process has, its working directory, its
  arguments, and a SHA-256 of ``UPSTREAM_TOKEN`` (proof of the injected credential without the
  secret itself in the result)
* ``leak_env()``: ``UPSTREAM_TOKEN`` itself, in a log notification, on stderr and in the
  result text (the redaction must catch it everywhere)
* ``limits()``: the soft address-space, CPU and open-files limits it runs under
* ``pid()``: its process id; ``spawn_sleeper()``: starts ``sleep 120`` (in its process group)
  and returns that process's id

With ``--fail-start`` it exits at once with status 4, before reading anything.
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
from pathlib import Path

# Run by path from any working directory: the repository must be importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcp.server.mcpserver import Context  # noqa: E402

from tests.support.mcp_upstream_server import server  # noqa: E402


@server.tool(description="The process's environment names, directory, arguments.")
def environment() -> dict[str, object]:
    token = os.environ.get("UPSTREAM_TOKEN", "")
    return {
        "names": sorted(os.environ),
        "cwd": os.getcwd(),
        "argv": sys.argv[1:],
        "token_sha256": hashlib.sha256(token.encode()).hexdigest() if token else "",
        "fixed": os.environ.get("FIXED_SETTING", ""),
    }


@server.tool(description="Echoes the credential of its environment, on stderr too.")
async def leak_env(ctx: Context) -> str:
    token = os.environ.get("UPSTREAM_TOKEN", "")
    sys.stderr.write(f"leaking token={token}\n")
    sys.stderr.flush()
    await ctx.info(f"log token={token}")
    return f"token={token}"


@server.tool(description="The resource limits the process runs under.")
def limits() -> dict[str, int]:
    return {
        "memory": resource.getrlimit(resource.RLIMIT_AS)[0],
        "cpu": resource.getrlimit(resource.RLIMIT_CPU)[0],
        "open_files": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    }


@server.tool(description="The process id.")
def pid() -> int:
    return os.getpid()


@server.tool(description="Starts a long sleep in the background; returns its process id.")
def spawn_sleeper() -> int:
    sleeper = subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL)
    return sleeper.pid


def main() -> None:
    if "--fail-start" in sys.argv:
        sys.stderr.write("failing at start as asked\n")
        sys.exit(4)
    server.run("stdio")


if __name__ == "__main__":
    main()
