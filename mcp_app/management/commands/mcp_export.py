"""``manage.py mcp_export``: write the catalog, or chosen endpoints, as YAML or JSON.

The file names rows by natural key and credentials by reference only (docs/api.md,
"Import/export"); ``mcp_import`` reads it back on this or another installation. It runs as
the shell operator, with no Django user: no model permission is checked (the API's export
and the admin's export actions check them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_app.services.catalog_io import CatalogFormatError, catalog_export_text


class Command(BaseCommand):
    help = (
        "Export the MCP catalog (or --endpoint SLUG ...) as YAML (default) or JSON. Runs as "
        "the shell operator: no Django permission is checked (the API's export checks them)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--endpoint",
            action="append",
            dest="endpoints",
            metavar="SLUG",
            help="export only this endpoint and what it publishes (repeatable)",
        )
        parser.add_argument("--format", choices=["yaml", "json"], default="yaml")
        parser.add_argument(
            "-o", "--output", metavar="FILE", help="write to FILE instead of standard output"
        )

    def handle(
        self, *args: Any, endpoints: list[str] | None, format: str, output: str | None,
        **options: Any,
    ) -> None:  # fmt: skip
        try:
            pieces = catalog_export_text(endpoint_slugs=endpoints, fmt=format)
        except CatalogFormatError as exc:
            raise CommandError(str(exc)) from None
        # Written as read: the command holds one chunk of rows, not the document.
        if output:
            with Path(output).open("w", encoding="utf-8") as file:
                file.writelines(pieces)
        else:
            for piece in pieces:
                self.stdout.write(piece, ending="")
