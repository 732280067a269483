"""Drafts: save a catalog change, see it beside the live rows, approve it, publish it.

A draft (``models/draft.py``) holds a catalog document listing only the entries it changes,
in ``catalog_io``'s format, so every interface reads and writes the same thing: the admin
builds one from a row's form, the API and ``mcp_import --as-draft`` take a document. Nothing
in a draft reaches the catalog tables, so no client sees it until it is published.

- ``draft_create`` / ``draft_update``: the document is checked by the rules of a live save
  (a dry run of catalog import, as the user, with their permissions and teams), and the live
  entries it starts from are kept as its ``base``.
- ``draft_diff``: each entry beside the live row: the fields it changes, and those changed
  live since the draft was made.
- ``draft_check``: a dry run of the publish, by anyone who sees the draft, validating it as
  its author would save it (the author's permissions and teams).
- ``draft_approve``: a second user with ``mcp_app.approve_draft`` approves the document as
  it stands; an edit withdraws the approval. An endpoint with ``require_review`` takes only
  approved drafts (``services/review.py`` refuses its direct edits).
- ``drafts_publish``: one or more drafts in one transaction, through catalog import, so the
  history rows name the drafts and their approver and clients hear one list_changed per
  endpoint. Each entry is merged three ways: a field the draft changed takes the draft's
  value, one it did not takes the live value (an edit made since is kept), and a field
  changed both live and in the draft, differently, is a conflict that stops the publish.
- ``draft_discard``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.utils import timezone

from mcp_app.models import Draft, Endpoint
from mcp_app.services import history, review, teams
from mcp_app.services.catalog_io import (
    FORMAT,
    CatalogFormatError,
    CatalogImportError,
    CatalogPermissionError,
    ImportReport,
    catalog_document,
    catalog_entries,
    catalog_import,
)

APPROVE = "mcp_app.approve_draft"

# The sections a draft may hold, with each one's natural key.
SECTIONS = {
    "endpoints": "slug",
    "tools": "name",
    "resources": "uri",
    "resource_templates": "uri_template",
    "prompts": "name",
}
_ITEM_SECTIONS = ("tools", "resources", "resource_templates", "prompts")
# Entry keys merged as sets rather than values: the draft adds and removes members.
_SET_KEYS = ("endpoints", "allowed_groups")
_NOUNS = {
    "endpoints": "endpoint",
    "tools": "tool",
    "resources": "resource",
    "resource_templates": "resource template",
    "prompts": "prompt",
}


class DraftError(Exception):
    """The draft cannot be saved, approved or published as asked; nothing changed."""

    def __init__(self, messages: str | Sequence[str]) -> None:
        self.messages = [messages] if isinstance(messages, str) else list(messages)
        super().__init__(" ".join(self.messages))


class DraftConflict(DraftError):
    """The live rows changed since the draft was made, where the draft changes them too."""


@dataclass(frozen=True)
class FieldDiff:
    name: str
    live: Any  # None for a row the draft creates
    draft: Any
    # Changed live since the draft was made, to another value than the draft's.
    conflict: bool = False


@dataclass(frozen=True)
class EntryDiff:
    section: str
    key: str
    action: str  # "create", "update" or "unchanged"
    fields: tuple[FieldDiff, ...]
    # Fields the draft leaves alone that changed live since it was made (publish keeps them).
    changed_live: tuple[str, ...] = ()
    problem: str = ""  # the row was created or deleted live since the draft was made

    @property
    def label(self) -> str:
        return f"{_NOUNS[self.section]} {self.key}"

    @property
    def conflicts(self) -> bool:
        return bool(self.problem) or any(change.conflict for change in self.fields)


# --------------------------------------------------------------------------------- reading


def drafts_visible(user: Any) -> models.QuerySet[Draft]:
    """The drafts ``user`` sees (their teams'; None: every draft)."""
    return teams.visible(Draft.objects.all(), user)


def live_entry(section: str, key: str, *, user: Any = None) -> dict[str, Any] | None:
    """The live entry of the row ``section``/``key`` (a tool: the one of that name when it is
    unique), as a draft of it starts; None: no such row ``user`` sees."""
    entries = catalog_entries({section: [key]}, user=user).get(section, [])
    return entries[0] if len(entries) == 1 else None


def draft_merged_entry(
    draft: Draft, section: str, key: str, *, user: Any = None
) -> dict[str, Any] | None:
    """The entry ``section``/``key`` as publishing ``draft`` now would make it: the draft's
    changes over the live row (what a replay runs); None: the draft does not change it."""
    document, _conflicts = _merged([draft], user=user)
    return next(
        (entry for entry in document.get(section) or [] if entry[SECTIONS[section]] == key), None
    )


def draft_diff(draft: Draft, *, user: Any = None) -> list[EntryDiff]:
    """Each of the draft's own entries beside its live row (endpoint entries the draft only
    carries, unchanged, are left out)."""
    live = _live_for(draft.document, user=user)
    diffs = []
    for section, _index, entry in _entries(draft.document):
        key = str(entry[SECTIONS[section]])
        base = draft.base.get(_id(section, key))
        now = _match(section, entry, base, live)
        if section == "endpoints" and base is not None and entry == base:
            continue  # carried for its items' membership, not changed
        diffs.append(_entry_diff(section, key, entry, base, now))
    return diffs


def _entry_diff(
    section: str,
    key: str,
    entry: Mapping[str, Any],
    base: Mapping[str, Any] | None,
    live: Mapping[str, Any] | None,
) -> EntryDiff:
    if base is None:
        problem = f"A {_NOUNS[section]} {key} was created since the draft was made." if live else ""
        created = tuple(FieldDiff(name, None, value) for name, value in entry.items())
        return EntryDiff(section, key, "create", created, problem=problem)
    if live is None:
        return EntryDiff(
            section, key, "update", (), problem=f"The {_NOUNS[section]} was deleted since."
        )
    fields: list[FieldDiff] = []
    changed_live: list[str] = []
    for name in sorted(set(entry) | set(live), key=_field_order(entry, live)):
        drafted, was, now = entry.get(name), base.get(name), live.get(name)
        if drafted != was:
            conflict = now != was and now != drafted and name not in _SET_KEYS
            if drafted != now or conflict:
                fields.append(FieldDiff(name, now, drafted, conflict))
        elif now != was:
            changed_live.append(name)
    action = "update" if fields else "unchanged"
    return EntryDiff(section, key, action, tuple(fields), tuple(changed_live))


def _field_order(*entries: Mapping[str, Any]) -> Any:
    order = {name: i for entry in reversed(entries) for i, name in enumerate(entry)}
    return lambda name: order.get(name, len(order))


# --------------------------------------------------------------------------------- writing


def draft_create(*, title: str, document: Any, actor: Any) -> Draft:
    """Save ``document`` (the changed entries, catalog format) as a new draft by ``actor``.

    Raises:
        DraftError: the document is not a draft's shape, or fails a rule of a live save
            (each message names the entry and field); nothing was saved.
        PermissionDenied: ``actor`` may not make these changes (model permissions, teams).
    """
    draft = Draft(title=_title(title) or "Untitled change", author=_user(actor))
    return _save(draft, document, actor=actor)


def draft_update(
    draft: Draft, *, actor: Any, title: str | None = None, document: Any = None
) -> Draft:
    """Change an open draft's title or document; a new document withdraws an approval.

    Raises:
        DraftError, PermissionDenied: as ``draft_create``.
    """
    _check_open(draft)
    _check_sees(draft, actor)
    if title is not None:
        draft.title = _title(title) or draft.title
    if document is None:
        draft.save(update_fields=["title", "updated_at"])
        return draft
    return _save(draft, document, actor=actor)


def draft_approve(draft: Draft, *, actor: Any) -> None:
    """Approve ``draft`` as its document stands, as ``actor`` (not its author).

    Raises:
        PermissionDenied: ``actor`` lacks ``mcp_app.approve_draft`` or does not see the draft.
        DraftError: the draft is not open, or ``actor`` wrote it.
    """
    if actor is None or not actor.has_perm(APPROVE):
        raise PermissionDenied(
            "Approving a draft needs the permission “Can approve another user's draft”."
        )
    _check_sees(draft, actor)
    _check_open(draft)
    if draft.author_id is not None and draft.author_id == actor.pk:
        raise DraftError("A draft is approved by another user than its author.")
    draft.approved_by = actor
    draft.approved_at = timezone.now()
    draft.approved_document = draft.document
    draft.save(update_fields=["approved_by", "approved_at", "approved_document", "updated_at"])


def draft_discard(draft: Draft, *, actor: Any) -> None:
    """Close ``draft`` unpublished.

    Raises:
        DraftError: it is not open.
    """
    _check_sees(draft, actor)
    _check_open(draft)
    draft.status = Draft.Status.DISCARDED
    draft.save(update_fields=["status", "updated_at"])


def draft_check(draft: Draft, *, actor: Any) -> ImportReport:
    """What publishing ``draft`` now would change (a dry run; nothing is written).

    Whoever sees the draft may check it (an approver needs no catalog permission of its
    changes); the check validates the draft as its author would save it: the rows the
    author's teams see, the rules of a live save, and the author's catalog permissions (a
    draft with no author, made by a management command, as the machine would import it).
    The one who publishes still needs the permissions themselves (``drafts_publish``).

    Raises:
        PermissionDenied: ``actor`` does not see the draft, or its author may no longer make
            these changes (the message names the author and the permissions).
        DraftConflict, DraftError: as ``drafts_publish`` would.
    """
    _check_sees(draft, actor)
    author = draft.author
    document, conflicts = _merged([draft], user=author)
    if conflicts:
        raise DraftConflict(conflicts)
    try:
        return _import(document, actor=author, dry_run=True, source="")
    except PermissionDenied as exc:
        name = author.get_username() if author is not None else "nobody"
        raise PermissionDenied(f"The draft's author {name} may not make it: {exc}") from exc


def drafts_publish(drafts: Sequence[Draft], *, actor: Any) -> ImportReport:
    """Make ``drafts`` live together, in one transaction; return what changed.

    Each must be open and seen by ``actor``, and approved when it touches an endpoint that
    requires review; no two may change the same row. ``actor`` needs the model permissions of
    the changes, as for an import.

    Raises:
        DraftConflict: a row changed live where a draft changes it too; nothing changed.
        DraftError: a draft is not open, not approved where it must be, or two drafts change
            one row; or a rule of a live save fails now (each message names the entry).
        PermissionDenied: ``actor`` may not make these changes.
    """
    if not drafts:
        raise DraftError("Choose the drafts to publish.")
    with transaction.atomic():
        ids = sorted({draft.pk for draft in drafts})
        locked = list(Draft.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
        for draft in locked:
            _check_sees(draft, actor)
            _check_open(draft)
        document, conflicts = _merged(locked, user=actor)
        if conflicts:
            raise DraftConflict(conflicts)
        _check_reviews(locked, document)
        report = _import(document, actor=actor, dry_run=False, source=_source(locked))
        change_set = uuid.uuid4()
        now = timezone.now()
        for draft in locked:
            draft.status = Draft.Status.PUBLISHED
            draft.published_by = _user(actor)
            draft.published_at = now
            draft.change_set = change_set
            draft.save(
                update_fields=["status", "published_by", "published_at", "change_set", "updated_at"]
            )
    for draft in drafts:  # the caller's objects tell the truth too
        draft.refresh_from_db()
    return report


# ------------------------------------------------------------------------------- internals


def _save(draft: Draft, document: Any, *, actor: Any) -> Draft:
    document = _normalized(document, user=actor)
    own = {_id(section, str(entry[SECTIONS[section]])) for section, _i, entry in _entries(document)}
    live = _live_for(document, user=actor)
    base = {name: entry for name, entry in draft.base.items() if name in own}
    for section, _index, entry in _entries(document):
        name = _id(section, str(entry[SECTIONS[section]]))
        if name not in base:
            base[name] = _match(section, entry, None, live)
    draft.document = _with_endpoints(document, base, user=actor)
    for entry in draft.document.get("endpoints") or []:  # carried endpoint entries
        base.setdefault(_id("endpoints", str(entry["slug"])), entry)
    draft.base = base
    merged, _conflicts = _merged([draft], user=actor)
    _import(merged, actor=actor, dry_run=True, source="")
    draft.team = _team(merged)
    with transaction.atomic():
        draft.save()
        slugs = [str(entry["slug"]) for entry in draft.document.get("endpoints", [])]
        draft.endpoints.set(Endpoint.objects.filter(slug__in=slugs))
    return draft


def _normalized(document: Any, *, user: Any) -> dict[str, Any]:
    """``document`` checked to be a draft's: a catalog document of catalog sections only,
    each entry a mapping with its key, no key twice."""
    try:
        document = catalog_document(document)
    except CatalogFormatError as exc:
        raise DraftError(str(exc)) from exc
    problems = []
    for name in document:
        if name != "format" and name not in SECTIONS:
            problems.append(
                f"{name}: a draft holds endpoints, tools, resources, resource templates and "
                "prompts only."
            )
    normalized: dict[str, Any] = {"format": FORMAT}
    for section, key in SECTIONS.items():
        entries = document.get(section) or []
        if not isinstance(entries, list):
            problems.append(f"{section}: expected a list of entries.")
            continue
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get(key), str) or not entry[key]:
                problems.append(f"{section}[{index}]: expected an entry with its {key}.")
            elif entry[key] in seen:
                problems.append(f"{section}[{index}]: {entry[key]} is listed twice.")
            else:
                seen.add(entry[key])
        if entries:
            normalized[section] = entries
    if len(normalized) == 1 and not problems:
        problems.append("The draft changes nothing: it lists no entry.")
    if problems:
        raise DraftError(problems)
    return normalized


def _entries(document: Mapping[str, Any]) -> Iterable[tuple[str, int, dict[str, Any]]]:
    for section in SECTIONS:
        for index, entry in enumerate(document.get(section) or []):
            yield section, index, entry


def _id(section: str, key: str) -> str:
    return f"{section}/{key}"


def _live_for(document: Mapping[str, Any], *, user: Any) -> dict[str, list[dict[str, Any]]]:
    keys = {
        section: [str(entry[SECTIONS[section]]) for entry in document.get(section) or []]
        for section in SECTIONS
    }
    return catalog_entries({section: names for section, names in keys.items() if names}, user=user)


def _match(
    section: str,
    entry: Mapping[str, Any],
    base: Mapping[str, Any] | None,
    live: Mapping[str, list[dict[str, Any]]],
) -> dict[str, Any] | None:
    """The live entry ``entry`` is a draft of: by key; a tool name that several tools share,
    the one on an endpoint the draft (or its base) names, as import matches tools."""
    key = SECTIONS[section]
    candidates = [row for row in live.get(section, []) if row[key] == entry[key]]
    if len(candidates) <= 1 or section != "tools":
        return candidates[0] if candidates else None
    slugs = set(entry.get("endpoints") or ()) | set((base or {}).get("endpoints") or ())
    sharing = [row for row in candidates if slugs & set(row["endpoints"])]
    return sharing[0] if len(sharing) == 1 else None


def _with_endpoints(
    document: dict[str, Any], base: Mapping[str, Any], *, user: Any
) -> dict[str, Any]:
    """``document`` with an entry (the live one) for every endpoint its items are on or
    leave, as an import sets membership only for the endpoints its document lists."""
    listed = {str(entry["slug"]) for entry in document.get("endpoints") or []}
    wanted: set[str] = set()
    for section, _index, entry in _entries(document):
        if section in _ITEM_SECTIONS:
            before = base.get(_id(section, str(entry[SECTIONS[section]]))) or {}
            for slugs in (entry.get("endpoints"), before.get("endpoints")):
                if isinstance(slugs, list):
                    wanted |= {slug for slug in slugs if isinstance(slug, str)}
    missing = sorted(wanted - listed)
    if not missing:
        return document
    found = {
        entry["slug"]: entry
        for entry in catalog_entries({"endpoints": missing}, user=user)["endpoints"]
    }
    unknown = [slug for slug in missing if slug not in found]
    if unknown:
        raise DraftError(f"No endpoint {', '.join(unknown)} here.")
    return {**document, "endpoints": [*document.get("endpoints", []), *(found[s] for s in missing)]}


def _merged(drafts: Sequence[Draft], *, user: Any) -> tuple[dict[str, Any], list[str]]:
    """The document publishing ``drafts`` now imports, each entry merged three ways with
    the live rows, and the conflicts that stop it (one message each)."""
    merged: dict[str, Any] = {"format": FORMAT}
    owner: dict[str, Draft] = {}
    conflicts: list[str] = []
    carried: dict[str, dict[str, Any]] = {}
    for draft in drafts:
        live = _live_for(draft.document, user=user)
        for section, _index, entry in _entries(draft.document):
            key = str(entry[SECTIONS[section]])
            name = _id(section, key)
            base = draft.base.get(name)
            now = _match(section, entry, base, live)
            if section == "endpoints" and base is not None and entry == base:
                if now is not None:
                    carried.setdefault(name, now)  # only carried: the live entry stands
                continue
            if name in owner:
                raise DraftError(
                    f"Drafts #{owner[name].pk} and #{draft.pk} both change the "
                    f"{_NOUNS[section]} {key}: publish one, then update the other."
                )
            owner[name] = draft
            diff = _entry_diff(section, key, entry, base, now)
            if diff.problem:
                conflicts.append(f"Draft #{draft.pk}, {diff.label}: {diff.problem}")
            for change in diff.fields:
                if change.conflict:
                    conflicts.append(
                        f"Draft #{draft.pk}, {diff.label}: {change.name} was changed live "
                        "since the draft was made; update the draft from the live row."
                    )
            merged.setdefault(section, []).append(_merge_entry(entry, base, now))
    for name, entry in carried.items():
        if name not in owner:
            merged.setdefault("endpoints", []).append(entry)
    return merged, conflicts


def _merge_entry(
    entry: Mapping[str, Any], base: Mapping[str, Any] | None, live: Mapping[str, Any] | None
) -> dict[str, Any]:
    if base is None or live is None:
        return dict(entry)
    merged = dict(live)
    for name, value in entry.items():
        was = base.get(name)
        if name in _SET_KEYS and isinstance(value, list) and isinstance(was, list):
            current = live.get(name)
            now = current if isinstance(current, list) else []
            added = [item for item in value if item not in was]
            removed = {item for item in was if item not in value}
            merged[name] = sorted({*(item for item in now if item not in removed), *added})
        elif value != was:
            merged[name] = value
    return merged


def _check_reviews(drafts: Sequence[Draft], document: Mapping[str, Any]) -> None:
    slugs = {str(entry["slug"]) for entry in document.get("endpoints") or []}
    for draft in drafts:
        slugs |= {str(entry["slug"]) for entry in draft.document.get("endpoints") or []}
    reviewed = set(
        Endpoint.objects.filter(slug__in=slugs, require_review=True).values_list("slug", flat=True)
    )
    problems = []
    for draft in drafts:
        touched = {str(entry["slug"]) for entry in draft.document.get("endpoints") or []}
        needs = sorted(touched & reviewed)
        if needs and not draft.approved:
            problems.append(
                f"Draft #{draft.pk} changes endpoint {', '.join(needs)}, which requires review: "
                "another user with the approve permission must approve it as it stands."
            )
    if problems:
        raise DraftError(problems)


def _import(document: Mapping[str, Any], *, actor: Any, dry_run: bool, source: str) -> ImportReport:
    try:
        with review.publishing_draft(), history.catalog_change(source=None, actor=_user(actor)):
            return catalog_import(
                document=document,
                dry_run=dry_run,
                user=actor,
                source=source or history.DRAFT,
            )
    except CatalogImportError as exc:
        raise DraftError([str(error) for error in exc.errors]) from exc
    except CatalogPermissionError as exc:
        raise PermissionDenied(
            f"This change needs the permissions {', '.join(exc.missing)}."
        ) from exc


def _source(drafts: Sequence[Draft]) -> str:
    """How the history rows name a publish: the drafts, and who approved them."""
    names = ", ".join(f"#{draft.pk}" for draft in drafts)
    approvers = sorted(
        {
            draft.approved_by.get_username()
            for draft in drafts
            if draft.approved_by and draft.approved
        }
    )
    text = f"{history.DRAFT} {names}"
    if approvers:
        text += f" approved by {', '.join(approvers)}"
    return text[:100]


def _team(document: Mapping[str, Any]) -> Group | None:
    """The team of the draft's rows when they share one (else None: a site-wide draft)."""
    names = {entry.get("team") for _section, _index, entry in _entries(document)}
    if len(names) != 1 or None in names:
        return None
    return Group.objects.filter(name=next(iter(names))).first()


def _title(title: str) -> str:
    title = title.strip()
    limit = Draft._meta.get_field("title").max_length or 200
    if len(title) > limit:
        raise DraftError(f"A draft's title has at most {limit} characters.")
    return title


def _check_open(draft: Draft) -> None:
    if draft.status != Draft.Status.OPEN:
        raise DraftError(f"Draft #{draft.pk} is {draft.get_status_display()}: it cannot change.")


def _check_sees(draft: Draft, actor: Any) -> None:
    if not drafts_visible(actor).filter(pk=draft.pk).exists():
        raise PermissionDenied(teams.NOT_YOURS)


def _user(actor: Any) -> Any:
    return actor if actor is not None and getattr(actor, "is_authenticated", False) else None
