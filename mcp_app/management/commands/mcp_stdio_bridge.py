"""``manage.py mcp_stdio_bridge``: serve the allow-listed stdio MCP servers over HTTP.

The web and worker processes reach it at ``MCP_STDIO_BRIDGE_URL`` (mcp_app/bridge/app.py
says what it serves). It binds to the host and port of that URL unless ``--host``/``--port``
say otherwise (a container binds 0.0.0.0 while others call it by its service name). Run it
under a supervisor that restarts it (compose: ``restart: unless-stopped``); its children end
with it. ``dev.py run`` starts it with ``--exit-with-parent`` when stdio servers are allowed.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from urllib.parse import urlsplit

import uvicorn
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_app.bridge.app import Bridge
from mcp_app.bridge.protect import protect_process
from mcp_app.bridge.servers import AllowListError
from mcp_app.conf import get_conf
from mcp_app.services.stdio import stdio_bridge_secret, stdio_launch, stdio_servers

SHUTDOWN_GRACE_SECONDS = 3
# Seconds between two looks at whether the parent is still there (--exit-with-parent).
PARENT_CHECK_SECONDS = 1.0


class Command(BaseCommand):
    help = "Run the stdio bridge: each allow-listed stdio MCP server as an HTTP upstream."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", help="default: the host of MCP_STDIO_BRIDGE_URL")
        parser.add_argument("--port", type=int, help="default: the port of MCP_STDIO_BRIDGE_URL")
        parser.add_argument(
            "--exit-with-parent",
            action="store_true",
            help="stop (children too) once the process that started this one ends (dev.py run)",
        )

    def handle(self, *args: object, **options: object) -> None:
        try:
            servers = stdio_servers()
        except AllowListError as exc:
            raise CommandError(str(exc)) from None
        url = urlsplit(get_conf().MCP_STDIO_BRIDGE_URL.strip())
        host = options["host"] or url.hostname or "127.0.0.1"
        port = options["port"] or url.port or 8765
        assert isinstance(host, str) and isinstance(port, int)
        app = Bridge(secret=stdio_bridge_secret(), launcher=stdio_launch)
        if not protect_process():
            self.stderr.write(
                "warning: could not mark the bridge not dumpable: its children may read its "
                "environment (/proc/<pid>/environ); run it in a container of its own"
            )
        self.stdout.write(
            f"stdio bridge on http://{host}:{port}/<upstream>/mcp; "
            f"allowed servers: {', '.join(sorted(servers)) or 'none (MCP_STDIO_SERVERS)'}",
        )
        if options["exit_with_parent"]:
            _exit_with_parent()
        # log_config None: the records go through Django's LOGGING (redacted console).
        # Streams the web side keeps open never end by themselves: past the grace period they
        # are cut, and the lifespan shutdown stops every child.
        uvicorn.run(
            app, host=host, port=port, log_config=None, access_log=False, lifespan="on",
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        )  # fmt: skip


def _exit_with_parent() -> None:
    """Send this process SIGTERM (uvicorn's clean shutdown, which stops every child) once its
    parent has gone: an orphan is adopted by another process, so its parent id changes."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="mcp-stdio-bridge-parent", daemon=True).start()
