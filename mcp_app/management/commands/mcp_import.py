"""``manage.py mcp_import FILE``: make the catalog match a file written by ``mcp_export``.

Idempotent and transactional: the same file twice changes nothing, and an invalid file changes
nothing and names each wrong entry and field. ``--dry-run`` prints the changes without making
them; ``--prune`` also removes what the file does not list. ``--as-draft`` saves the file as
one draft instead (``services/draft_import.py``): nothing is live until it is published, and
the command names the draft and what it changes.

It runs as the shell operator, with no Django user: no model permission is checked (the API's
import checks them). The file is read within MCP_CATALOG_MAX_BYTES and MCP_CATALOG_MAX_VALUES
as the API reads it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_app.conf import get_conf
from mcp_app.services.catalog_io import (
    CatalogFormatError,
    CatalogImportError,
    catalog_import,
    catalog_parse,
)
from mcp_app.services.draft_import import catalog_import_as_draft, diff_summary
from mcp_app.services.drafts import DraftError, draft_diff


class Command(BaseCommand):
    help = (
        "Import an MCP catalog file (YAML or JSON); '-' reads standard input. Runs as the "
        "shell operator: no Django permission is checked (the API's import checks them)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE")
        parser.add_argument("--format", choices=["yaml", "json"], default=None)
        parser.add_argument(
            "--dry-run", action="store_true", help="print the changes, make none of them"
        )
        parser.add_argument(
            "--prune",
            action="store_true",
            help="delete rows the file does not list (for a file of chosen endpoints: "
            "detach them from those endpoints)",
        )
        parser.add_argument(
            "--as-draft",
            action="store_true",
            help="save the file as one draft (published later from the admin or the API); "
            "not with --prune or --dry-run",
        )
        parser.add_argument("--title", default="", help="the draft's title (with --as-draft)")

    def handle(
        self, *args: Any, file: str, format: str | None, dry_run: bool, prune: bool,
        as_draft: bool, title: str, **options: Any,
    ) -> None:  # fmt: skip
        # One byte past the limit is enough for catalog_parse to refuse the file.
        size = get_conf().MCP_CATALOG_MAX_BYTES + 1
        text: str | bytes
        try:
            if file == "-":
                # Bytes where standard input has them (a test may hand a text stream).
                text = getattr(sys.stdin, "buffer", sys.stdin).read(size)
            else:
                with Path(file).open("rb") as handle:
                    text = handle.read(size)
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc}") from None
        if title and not as_draft:
            raise CommandError("--title names a draft: use it with --as-draft.")
        try:
            document = catalog_parse(text, fmt=format)
            if as_draft:
                self._save_draft(document, file=file, title=title, prune=prune, dry_run=dry_run)
                return
            report = catalog_import(document=document, prune=prune, dry_run=dry_run)
        except CatalogFormatError as exc:
            raise CommandError(str(exc)) from None
        except CatalogImportError as exc:
            for error in exc.errors:
                self.stderr.write(str(error))
            raise CommandError(f"{len(exc.errors)} error(s); nothing was changed.") from None
        for change in report.changes:
            self.stdout.write(str(change))
        verb = "Would make" if dry_run else "Made"
        self.stdout.write(f"{verb} {len(report.changes)} change(s).")

    def _save_draft(
        self, document: dict[str, Any], *, file: str, title: str, prune: bool, dry_run: bool
    ) -> None:
        name = "standard input" if file == "-" else Path(file).name
        try:
            draft = catalog_import_as_draft(
                document=document,
                title=title or f"Import of {name}"[:200],
                actor=None,
                prune=prune,
                dry_run=dry_run,
            )
        except DraftError as exc:
            for message in exc.messages:
                self.stderr.write(message)
            raise CommandError(
                f"{len(exc.messages)} error(s); no draft was saved, nothing was changed."
            ) from None
        self.stdout.write(f"Saved draft #{draft.pk}: {draft.title}")
        for line in diff_summary(draft_diff(draft)):
            self.stdout.write(f"  {line}")
        self.stdout.write("Nothing is live until the draft is published (admin or API).")
