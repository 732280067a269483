"""One stdio child: started from a ``Launch``, its messages read, its stderr logged, stopped.

The child runs in a session of its own (its own process group), with only the environment
the launch names, in its working directory, under its limits (``launch.py`` sets them, then
becomes the program). Messages are newline-delimited JSON on stdin and stdout (MCP
2025-11-25, "Transports", stdio), the launch's secrets redacted from each as it is read
(an OAuth access token fetched for the child is known to the bridge alone). Its stderr goes
to the bridge's log line by line, with the launch's secrets redacted. ``stop`` closes stdin,
then signals the whole group (TERM, then KILL), so nothing the program started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from mcp_app.bridge.servers import Launch

logger = logging.getLogger(__name__)
LAUNCHER = Path(__file__).with_name("launch.py")
# Longest message line read from a child; a longer one ends the child.
MAX_LINE_BYTES = 16 * 1024 * 1024
# Longest stderr line logged (the rest is cut).
MAX_LOG_LINE = 2000
# Seconds a child has to exit after its stdin closed, then after SIGTERM.
STOP_SECONDS = (2.0, 3.0)
REDACTED = "[redacted]"


class Child:
    """A running child process and its message stream."""

    def __init__(self, launch: Launch, process: asyncio.subprocess.Process) -> None:
        self.launch = launch
        self.process = process
        self.pid = process.pid
        self._stderr = asyncio.get_running_loop().create_task(self._log_stderr())
        self.stderr_tail: list[str] = []

    @classmethod
    async def start(cls, launch: Launch) -> Child:
        """Start ``launch``'s program.

        Raises:
            OSError: the launcher itself could not start (the program's own failure to start
                shows as an early exit, with its reason on stderr).
        """
        limits = launch.limits
        argv = [
            sys.executable, "-I", str(LAUNCHER),
            *(str(v) if v is not None else "-"
              for v in (limits.memory_mb, limits.cpu_seconds, limits.open_files)),
            *launch.argv,
        ]  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(launch.env),
            cwd=launch.cwd,
            start_new_session=True,
            limit=MAX_LINE_BYTES,
        )
        logger.info("stdio %s: started child %s", launch.upstream, process.pid)
        return cls(launch, process)

    async def send(self, message: Any) -> None:
        """Write one message to the child's stdin.

        Raises:
            ConnectionError: the child has closed its stdin (it is ending).
        """
        stdin = self.process.stdin
        assert stdin is not None
        if stdin.is_closing():
            raise ConnectionResetError("the child's stdin is closed")
        stdin.write(orjson.dumps(message) + b"\n")
        await stdin.drain()

    async def messages(self) -> AsyncIterator[Any]:
        """Yield the child's messages until its stdout ends (a line not JSON is logged)."""
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                logger.warning("stdio %s: child %s sent an overlong line", self.name, self.pid)
                return
            if not line:
                return
            if not line.strip():
                continue
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                logger.warning(
                    "stdio %s: child %s wrote a line that is not JSON: %s",
                    self.name, self.pid, self._redact(line.decode("utf-8", "replace"))[:200],
                )  # fmt: skip
                continue
            yield self._scrub(message) if self.launch.secrets else message

    @property
    def name(self) -> str:
        return self.launch.upstream

    @property
    def exited(self) -> bool:
        return self.process.returncode is not None

    async def stop(self) -> int | None:
        """End the child and its process group; return its exit status."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        for seconds, sig in zip(STOP_SECONDS, (signal.SIGTERM, signal.SIGKILL), strict=True):
            try:
                async with asyncio.timeout(seconds):
                    await self.process.wait()
                    break
            except TimeoutError:
                self._signal_group(sig)
        else:
            await self.process.wait()
        # Whatever the program left running in its group goes with it.
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(asyncio.CancelledError):
            await self._stderr
        logger.info(
            "stdio %s: child %s ended (exit status %s)",
            self.name, self.pid, self.process.returncode,
        )  # fmt: skip
        return self.process.returncode

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def _redact(self, text: str) -> str:
        for secret in sorted(self.launch.secrets, key=len, reverse=True):
            if secret:
                text = text.replace(secret, REDACTED)
        return text

    def _scrub(self, value: Any) -> Any:
        """``value`` with the launch's secrets redacted from every string (keys too): an
        OAuth access token fetched for the child is known to the bridge alone."""
        if isinstance(value, str):
            return self._redact(value)
        if isinstance(value, list):
            return [self._scrub(item) for item in value]
        if isinstance(value, dict):
            return {self._redact(key): self._scrub(item) for key, item in value.items()}
        return value

    async def _log_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        while True:
            try:
                line = await stderr.readline()
            except (ValueError, asyncio.LimitOverrunError):
                continue
            if not line:
                return
            text = self._redact(line.decode("utf-8", "replace").rstrip())[:MAX_LOG_LINE]
            self.stderr_tail = [*self.stderr_tail[-4:], text]
            logger.info("stdio %s[%s]: %s", self.name, self.pid, text)
