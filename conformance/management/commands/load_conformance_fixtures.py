"""``manage.py load_conformance_fixtures``: the catalog the official conformance suite calls."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conformance.fixtures import NotConfigured, load


class Command(BaseCommand):
    help = "Create (or replace) the endpoint holding the MCP conformance suite's fixtures."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--slug", default="conformance", help="endpoint slug (conformance)")

    def handle(self, *args: Any, slug: str, **options: Any) -> None:
        try:
            endpoint = load(slug)
        except NotConfigured as exc:
            raise CommandError(str(exc)) from None
        tools = endpoint.tools.count()
        self.stdout.write(
            f"Loaded the conformance fixtures on {endpoint.mcp_path()} ({tools} tools)."
        )
