"""``manage.py probe_upstreams``: probe every upstream MCP server whose probe is due.

Run by the upkeep job of the same name (every ``UPKEEP_PROBE_UPSTREAMS_SECONDS``); each
upstream says how often it wants probing (its probe interval), so running this more often
than that probes nothing extra.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand

from mcp_app.services.upstream_health import upstreams_probe_due


class Command(BaseCommand):
    help = "Probe the upstream MCP servers whose probe interval has passed; record their state."

    def handle(self, *args: Any, **options: Any) -> None:
        states = async_to_sync(upstreams_probe_due)()
        found = ", ".join(f"{name}: {state}" for name, state in sorted(states.items()))
        self.stdout.write(f"Probed {len(states)} upstream(s){'; ' + found if found else ''}.")
