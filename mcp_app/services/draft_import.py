"""Catalog import as a draft: a catalog document saved as one draft instead of made live.

``mcp_import --as-draft`` and the API's import with ``"as_draft": true`` share this. The
document is a catalog file as export writes it; what a draft cannot hold is taken out or
refused here, so an exported file (of the whole catalog or of chosen endpoints) is accepted
as it is:

- ``scope``: it only says which endpoints a prune compares, and a draft never prunes, so
  ``prune`` is refused rather than ignored (a draft only creates and updates rows);
- ``credentials``: references only (name and kind): the tools naming a credential are
  checked against it as a live import checks them;
- empty sections (an export writes every section).

Anything else (an upstream, an icon image) is the draft's to refuse, naming the section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcp_app.models import Draft
from mcp_app.services.drafts import DraftError, EntryDiff, draft_create

# Sections of an exported file a draft does without (the module docstring says why).
_DROPPED = ("scope", "credentials")

PRUNE_REFUSED = (
    "A draft only creates and updates rows: import with prune makes the catalog match the "
    "file at once, so it cannot be saved as a draft. Import without prune, or without as-draft."
)
DRY_RUN_REFUSED = (
    "A draft changes nothing live already: save it, then check it (a dry run of its publish)."
)


def catalog_import_as_draft(
    *, document: Mapping[str, Any], title: str, actor: Any, prune: bool = False,
    dry_run: bool = False,
) -> Draft:  # fmt: skip
    """Save ``document`` (a catalog document) as one new draft by ``actor`` (None: the shell).

    Raises:
        DraftError: ``prune`` or ``dry_run`` was asked, the document holds something a draft
            cannot, or it fails a rule of a live save; nothing was saved.
        PermissionDenied: ``actor`` may not make these changes.
    """
    if prune:
        raise DraftError(PRUNE_REFUSED)
    if dry_run:
        raise DraftError(DRY_RUN_REFUSED)
    limit = Draft._meta.get_field("title").max_length or 0
    if len(title.strip()) > limit:
        raise DraftError(f"title: at most {limit} characters.")
    kept = {
        name: value
        for name, value in document.items()
        if name not in _DROPPED and not (name != "format" and value == [])
    }
    return draft_create(title=title, document=kept, actor=actor)


def diff_summary(diffs: Sequence[EntryDiff]) -> list[str]:
    """One line per entry of a draft's diff: ``update tool echo: description, input_schema``."""
    lines = []
    for diff in diffs:
        line = f"{diff.action} {diff.label}"
        if diff.action != "create" and diff.fields:
            line += f": {', '.join(change.name for change in diff.fields)}"
        if diff.problem:
            line += f" ({diff.problem})"
        lines.append(line)
    return lines
