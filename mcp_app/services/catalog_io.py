"""Catalog export and import: a whole catalog, or chosen endpoints, as a YAML or JSON document.

The document names everything by natural key (endpoint slug, tool name, resource URI, URI
template, prompt name, upstream name, group name, credential name), never by database id, so
it moves between installations. Upstream MCP servers travel with what uses them, without their
health. Credentials appear as references (name and kind), never with their secret: the target
must already hold them. An endpoint carries its rate limits and policies (neither holds a
secret), and every row names its team by group name, which must exist on the target.

Import writes through the ORM like the admin does, so the model signals (``signals.py``) bump
catalog versions and send list_changed; rows are saved only when a value differs, so importing
the same document twice changes nothing and notifies no one. Every entry is checked with the
model's own validation (``full_clean``, which runs the executor's config check the admin form
runs too) before anything is written, and the whole import is one transaction.

An export's text ends with ``end``, counting each section's entries (``ENDED_FORMAT``), so a
stream broken off half-way is refused on import instead of read as a smaller catalog.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
from collections.abc import (
    AsyncIterator,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Field, ManyToManyField, Model, Q

from mcp_app.conf import get_conf
from mcp_app.models import (
    Credential,
    Endpoint,
    Policy,
    Prompt,
    PromptArgument,
    PromptMessage,
    RateLimit,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.models.fields import schema_checks_remembered
from mcp_app.protocol import apps
from mcp_app.services import catalog_yaml, history, teams
from mcp_app.services.catalog_changes import catalog_changes_coalesced
from mcp_app.services.catalog_writes import (
    NewItem,
    RowsInvalid,
    catalog_row_attach,
    catalog_row_check,
    catalog_row_detach,
    catalog_row_relations_set,
    catalog_row_save,
    catalog_rows_create,
    config_references,
    prompt_messages_check,
    prompt_parts_set,
    row_checks_remembered,
    tool_values,
)
from mcp_app.services.icons import (
    UploadedIcon,
    icon_check,
    icon_for_path,
    icon_store,
    uploaded_paths,
)
from mcp_app.services.policies.writes import policy_delete, policy_save
from mcp_app.services.references import in_use_message, references_to
from mcp_app.services.row_writes import row_delete, setting_row_save

FORMAT = "mcphost-catalog/1"
# What exports write: format 1's document with an "end" mapping after its last section,
# counting each section's entries. A document saying so and lacking it, or whose counts
# differ, was cut short (an export stream broken off) and is refused; format 1 (older
# exports, hand-written files) has no end to check.
ENDED_FORMAT = "mcphost-catalog/2"
END = "end"
# New tools an import writes per ``catalog_rows_create`` call: bounds the memory of a batch.
BULK_CHUNK = 1000

ENDPOINT_FIELDS = (
    "title", "description", "instructions", "enabled", "listed", "icons", "allowed_origins",
    "auth_mode", "scopes", "base_scope", "require_review",
)  # fmt: skip
TOOL_FIELDS = (
    "title", "description", "enabled", "kind", "config", "input_schema", "output_schema",
    "read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint", "icons", "meta",
    "capture_mode", "capture_max_bytes", "capture_redact", "execution_mode", "task_support",
    "soft_time_limit", "hard_time_limit", "required_scope", "ui_resource_uri",
)  # fmt: skip
RESOURCE_FIELDS = (
    "name", "title", "description", "mime_type", "text", "icons", "enabled", "required_scope",
    "remote_uri", "ui_meta",
)  # fmt: skip
TEMPLATE_FIELDS = (
    "name", "title", "description", "mime_type", "kind", "config", "completions", "icons",
    "enabled", "required_scope", "remote_uri_template",
)  # fmt: skip
PROMPT_FIELDS = ("title", "description", "icons", "enabled", "required_scope", "remote_name")
# An upstream's definition; never its health or breaker state, which belong to each site.
UPSTREAM_FIELDS = (
    "description", "url", "connect_timeout", "call_timeout", "allow_networks", "enabled",
    "failure_threshold", "cooldown_seconds", "stateless", "session_idle_seconds", "max_sessions",
    "probe_interval_seconds", "probe_timeout", "unhealthy_threshold",
    "sync_policy",
    # A stdio upstream: its allow-listed server and what the operator added (credentials by
    # name, as everywhere in a document).
    "transport", "stdio_server", "stdio_args", "stdio_cwd", "stdio_env",
    # How callers are authorized there: never the OAuth client secret, nor users' connections.
    "auth_mode", "oauth_client_id", "oauth_scopes", "forward_headers",
)  # fmt: skip
# An endpoint's governance: its rate limits (matched by position, in id order: they have no
# name) and its policies (by name, unique per endpoint). Neither holds a secret.
LIMIT_FIELDS = (
    "description", "enabled", "scope", "target_kind", "target_name", "rate", "window", "burst",
    "max_concurrent", "quota", "quota_period", "on_redis_down",
)  # fmt: skip
POLICY_FIELDS = ("name", "kind", "mode", "position", "target", "config")
# Section of an endpoint entry -> (model, its fields).
_GOVERNANCE: dict[str, tuple[type[RateLimit | Policy], tuple[str, ...]]] = {
    "rate_limits": (RateLimit, LIMIT_FIELDS),
    "policies": (Policy, POLICY_FIELDS),
}
ARGUMENT_FIELDS = ("name", "title", "description", "required", "completion_values")
MESSAGE_FIELDS = ("role", "kind", "text", "mime_type", "uri", "name")

# Section of the document -> (model, natural key field, plain fields).
_SECTIONS: dict[str, tuple[type[Model], str, tuple[str, ...]]] = {
    # First: tools name them, resources and prompts point at them.
    "upstreams": (Upstream, "name", UPSTREAM_FIELDS),
    "endpoints": (Endpoint, "slug", ENDPOINT_FIELDS),
    "tools": (Tool, "name", TOOL_FIELDS),
    "resources": (Resource, "uri", RESOURCE_FIELDS),
    "resource_templates": (ResourceTemplate, "uri_template", TEMPLATE_FIELDS),
    "prompts": (Prompt, "name", PROMPT_FIELDS),
}
# The order prune deletes in: each row after the rows that use it.
_PRUNE_ORDER = ("prompts", "resource_templates", "tools", "resources", "endpoints", "upstreams")
# Extra keys an entry of each section may carry besides its key and plain fields. "team"
# names the row's team by group name (null or absent: site-wide); a credential's is shown
# only, as credentials are references.
_EXTRA_KEYS: dict[str, tuple[str, ...]] = {
    "upstreams": ("credential", "team"),
    "endpoints": ("team", *_GOVERNANCE),
    "tools": ("allowed_groups", "endpoints", "team"),
    "resources": ("allowed_groups", "endpoints", "file", "upstream", "team"),
    "resource_templates": ("allowed_groups", "endpoints", "upstream", "team"),
    "prompts": ("allowed_groups", "endpoints", "arguments", "messages", "upstream", "team"),
    "credentials": ("team",),
}
# Foreign keys an entry names by natural key: section -> (entry key, referenced section or
# "credentials").
_REFERENCES: dict[str, tuple[str, str]] = {
    "upstreams": ("credential", "credentials"),
    "resources": ("upstream", "upstreams"),
    "resource_templates": ("upstream", "upstreams"),
    "prompts": ("upstream", "upstreams"),
}
# Endpoint many-to-many relation of each item section.
_RELATION = {
    "tools": "tools",
    "resources": "resources",
    "resource_templates": "resource_templates",
    "prompts": "prompts",
}
# The same, by the item's model.
_MODEL_RELATION: dict[type[Model], str] = {
    Tool: "tools", Resource: "resources", ResourceTemplate: "resource_templates",
    Prompt: "prompts",
}  # fmt: skip


def _field_default(model: type[PromptArgument | PromptMessage], name: str) -> Any:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)  # the parts' own columns, never relations
    return field.get_default()


class CatalogFormatError(Exception):
    """The document cannot be read (not YAML/JSON, not a catalog, wrong format version)."""


@dataclass(frozen=True)
class EntryError:
    path: str  # e.g. "tools[2].config"
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class CatalogImportError(Exception):
    """The document is invalid; nothing was changed. ``errors`` name each entry and field."""

    def __init__(self, errors: Sequence[EntryError]) -> None:
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = list(errors)


@dataclass(frozen=True)
class Change:
    action: str  # create, update, delete, attach, detach
    section: str
    key: str
    fields: tuple[str, ...] = ()
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.action} {self.section} {self.key}"
        if self.fields:
            text += f" ({', '.join(self.fields)})"
        if self.detail:
            text += f": {self.detail}"
        return text


@dataclass
class ImportReport:
    dry_run: bool
    changes: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "changes": [
                {
                    "action": change.action,
                    "section": change.section,
                    "key": change.key,
                    "fields": list(change.fields),
                    "detail": change.detail,
                }
                for change in self.changes
            ],
        }


# ----------------------------------------------------------------------------- permissions

# What each change of an import report does to its model, as a Django permission codename.
_CHANGE_PERMISSION = {
    "create": "add", "update": "change", "attach": "change", "detach": "change",
    "delete": "delete",
}  # fmt: skip


class CatalogPermissionError(Exception):
    """The user lacks model permissions the export or import needs; nothing was changed."""

    def __init__(self, missing: Sequence[str]) -> None:
        super().__init__(", ".join(missing))
        self.missing = list(missing)


def catalog_permissions(
    *,
    document: Mapping[str, Any] | None = None,
    prune: bool = False,
    changes: Iterable[Change] = (),
) -> list[str]:
    """The Django model permissions an export, or an import of ``document``, needs (sorted).

    Export (no ``document``): view on every model a document holds (endpoints with their
    rate limits and policies, tools, resources, templates, prompts, upstreams, credentials).
    Every document has every section, empty or not, so the answer never depends on what the
    catalog holds today, and a user either gets the whole file (one that re-imports) or a
    refusal naming what is missing; a file with sections left out would, imported with
    prune, delete what they held.

    Import of ``document``: view on the model of each section listing entries (the import
    compares them with the rows here and answers the difference), on rate limits and
    policies when an endpoint entry lists them (even empty), and on credentials and
    upstreams when it names any; with ``prune``, view on every model prune compares; and per
    ``changes`` (the import's report, dry run or not) add, change or delete on the model
    changed, an item's membership and groups being a change of the item, a created group
    ``auth.add_group``.
    """
    sections = {section: model for section, (model, _key, _names) in _SECTIONS.items()}
    if document is None:
        models: list[type[Model]] = [*sections.values(), Credential, RateLimit, Policy]
        return sorted(_permission(model, "view") for model in models)
    needed = {_permission(sections[name], "view") for name in sections if document.get(name)}
    endpoints = document.get("endpoints")
    for name, (governed, _fields) in _GOVERNANCE.items():
        if isinstance(endpoints, list) and any(
            isinstance(entry, dict) and name in entry for entry in endpoints
        ):
            needed.add(_permission(governed, "view"))
    needed |= {_permission(model, "view") for model in _referenced(document)}
    if prune:
        pruned = _RELATION if document.get("scope") else sections
        needed |= {_permission(sections[name], "view") for name in pruned}
    for change in changes:
        model = (
            Group
            if change.section == "groups"
            else _GOVERNANCE[change.section][0]
            if change.section in _GOVERNANCE
            else sections[change.section]
        )
        needed.add(_permission(model, _CHANGE_PERMISSION[change.action]))
    return sorted(needed)


def catalog_permissions_missing(user: Any, permissions: Iterable[str]) -> list[str]:
    """Those of ``permissions`` that ``user`` lacks."""
    return [name for name in permissions if not user.has_perm(name)]


def _permission(model: type[Model], action: str) -> str:
    return f"{model._meta.app_label}.{action}_{model._meta.model_name}"


def _referenced(document: Mapping[str, Any]) -> set[type[Model]]:
    """Credentials and upstreams the document names: the import tells whether each exists."""
    found: set[type[Model]] = {Credential} if document.get("credentials") else set()
    for section, entries in document.items():
        if section not in _SECTIONS or not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            config = entry["config"] if isinstance(entry.get("config"), dict) else {}
            if entry.get("credential") or config.get("credential"):
                found.add(Credential)
            if (section != "upstreams" and entry.get("upstream")) or config.get("upstream"):
                found.add(Upstream)
    return found


# ---------------------------------------------------------------------------------- export

# Rows an export reads per query: what it holds at once, whatever the catalog's size.
EXPORT_CHUNK = 500
# Characters of text an ASGI response takes from the export per thread hop.
EXPORT_BATCH_CHARS = 64 * 1024

Section = tuple[str, Iterator[dict[str, Any]]]


def catalog_export(
    *, endpoint_slugs: Sequence[str] | None = None, user: Any = None
) -> dict[str, Any]:
    """Return the catalog (or the rows published on ``endpoint_slugs``) as a document.

    With ``user`` (the admin, the API), only the rows their teams see (``services.teams``):
    another team's endpoint slug is reported as no endpoint. None: the shell's, every row.
    The whole document at once, without the end an export's text carries:
    ``catalog_export_text`` streams ``catalog_with_end`` of it.

    Raises:
        CatalogFormatError: an endpoint slug names no endpoint.
    """
    header, sections = catalog_export_sections(endpoint_slugs=endpoint_slugs, user=user)
    document = dict(header)
    for section, entries in sections:
        document[section] = list(entries)
    return document


def catalog_export_sections(
    *, endpoint_slugs: Sequence[str] | None = None, user: Any = None
) -> tuple[dict[str, Any], Iterator[Section]]:
    """The document ``catalog_export`` returns, as its header (format and scope) and its
    sections in order, each entry read when asked for: the rows are read ``EXPORT_CHUNK``
    per query, so the export holds one chunk, never the catalog. Read each section's entries
    before asking for the next section (the upstreams, credentials and icons sections list
    what the entries before them name).

    Raises:
        CatalogFormatError: an endpoint slug names no endpoint (at once, before any entry).
    """
    endpoints = teams.visible(Endpoint.objects.all(), user)
    header: dict[str, Any] = {"format": FORMAT}
    slugs: set[str] | None = None
    if endpoint_slugs is not None:
        endpoints = endpoints.filter(slug__in=endpoint_slugs)
        slugs = set(endpoints.values_list("slug", flat=True))
        missing = sorted(set(endpoint_slugs) - slugs)
        if missing:
            raise CatalogFormatError(f"No endpoint with slug {', '.join(missing)}.")
        header["scope"] = {"endpoints": sorted(slugs)}
    return header, _export_sections(endpoints, slugs, user)


@dataclass
class _Named:
    """What the entries exported so far name: the upstreams, credentials and uploaded icons
    the sections after them list (as many as those rows, never as many as the tools)."""

    upstreams: set[str] = field(default_factory=set)
    credentials: set[str] = field(default_factory=set)
    icons: set[str] = field(default_factory=set)

    def note(self, entry: dict[str, Any]) -> dict[str, Any]:
        self.icons.update(uploaded_paths(entry.get("icons")))
        if entry.get("upstream"):
            self.upstreams.add(entry["upstream"])
        return entry

    def note_tool(self, tool: Tool) -> None:
        for reference in config_references(tool):
            if reference.target == "upstream":
                self.upstreams.add(reference.name)
            elif reference.target == "credential":
                self.credentials.add(reference.name)


def _export_sections(endpoints: Any, slugs: set[str] | None, user: Any) -> Iterator[Section]:
    named = _Named()
    endpoints = endpoints.select_related("team").prefetch_related("rate_limits", "policies")
    yield "endpoints", (named.note(_endpoint_entry(row)) for row in _pages(endpoints, "slug"))
    for section in _RELATION:
        yield section, _item_entries(section, named, slugs, user)
    upstreams = teams.visible(Upstream.objects.select_related("credential", "team"), user)
    if slugs is not None:
        upstreams = upstreams.filter(name__in=named.upstreams)
    yield "upstreams", _upstream_entries(upstreams, named)
    credentials = teams.visible(Credential.objects.select_related("team"), user)
    if slugs is not None:
        credentials = credentials.filter(name__in=named.credentials)
    # Never the secret: not even read.
    credentials = credentials.only("name", "kind", "team__name")
    yield (
        "credentials",
        (
            {"name": row.name, "kind": row.kind, "team": _team_out(row)}
            for row in _pages(credentials, "name")
        ),
    )
    images = _icon_images_out(sorted(named.icons))
    first = next(images, None)
    if first is not None:
        yield "icon_images", itertools.chain([first], images)


def _item_entries(
    section: str, named: _Named, slugs: set[str] | None, user: Any
) -> Iterator[dict[str, Any]]:
    """The entries of an item section the export lists: the rows ``user`` sees, on ``slugs``,
    with each chunk's endpoints and groups read in one query each (``_item_links``)."""
    model, key, _fields = _SECTIONS[section]
    queryset = _item_rows(model._default_manager.all(), user)
    if slugs is not None:
        queryset = queryset.filter(endpoints__slug__in=slugs).distinct()
    for rows in _chunks(queryset, key):
        links = _item_links(model, [row.pk for row in rows], user)
        for row in rows:
            if section == "tools":
                named.note_tool(row)
            yield named.note(_item_entry(section, row, slugs, links))


def _upstream_entries(upstreams: Any, named: _Named) -> Iterator[dict[str, Any]]:
    for upstream in _pages(upstreams, "name"):
        entry = {
            "name": upstream.name,
            **_values(upstream, UPSTREAM_FIELDS),
            "credential": upstream.credential.name if upstream.credential else None,
            "team": _team_out(upstream),
        }
        if entry["credential"]:
            named.credentials.add(entry["credential"])
        yield entry


def _pages(queryset: Any, key: str) -> Iterator[Any]:
    """Every row of ``queryset`` in ``key`` order (then id), ``EXPORT_CHUNK`` per query."""
    for rows in _chunks(queryset, key):
        yield from rows


def _chunks(queryset: Any, key: str) -> Iterator[list[Any]]:
    """Every row of ``queryset`` in ``key`` order (then id), as lists of ``EXPORT_CHUNK``
    rows, one query each.

    Each query is read whole and the next starts after the last row read (keyset, no
    OFFSET), so no server-side cursor or transaction stays open between them: a reader that
    stops half-way (an HTTP client that goes away) leaves nothing open in the database. Its
    prefetches cover one chunk.
    """
    queryset = queryset.order_by(key, "pk")
    page = list(queryset[:EXPORT_CHUNK])
    while page:
        yield page
        # A row's prefetched relations hold it in a reference cycle (their querysets name the
        # row they hang from), which only a full garbage collection frees: the rows are
        # written by now, so they go as the next chunk is read, not at some later collection.
        for row in page:
            row.__dict__.pop("_prefetched_objects_cache", None)
        if len(page) < EXPORT_CHUNK:
            return
        last = getattr(page[-1], key), page[-1].pk
        page = []  # the chunk read is let go before the next is read
        after = Q(**{f"{key}__gt": last[0]}) | Q(**{key: last[0], "pk__gt": last[1]})
        page = list(queryset.filter(after)[:EXPORT_CHUNK])


def catalog_entries(
    keys: Mapping[str, Collection[str]], *, user: Any = None
) -> dict[str, list[dict[str, Any]]]:
    """The entries of the rows ``keys`` names (section -> natural keys), as ``catalog_export``
    writes them, each item listing every endpoint it is on. A key naming no row (or one
    ``user``'s teams do not see) has no entry; a tool name may have several (names are
    unique per endpoint only).

    Only the catalog sections: endpoints, tools, resources, resource templates, prompts.
    """
    found: dict[str, list[dict[str, Any]]] = {}
    for section, names in keys.items():
        model, key, _fields = _SECTIONS[section]
        queryset = model._default_manager.filter(**{f"{key}__in": list(names)})
        if section == "endpoints":
            queryset = teams.visible(queryset, user).select_related("team")
            endpoints = queryset.prefetch_related("rate_limits", "policies")
            found[section] = [
                _endpoint_entry(row) for row in endpoints if isinstance(row, Endpoint)
            ]
            continue
        rows = list(_item_rows(queryset, user))
        links = _item_links(model, [row.pk for row in rows], user)
        found[section] = [_item_entry(section, row, None, links) for row in rows]
    return found


def _item_rows(queryset: Any, user: Any) -> Any:
    """``queryset`` of items narrowed to ``user``'s teams, with what their entries name
    (their endpoints and groups: ``_item_links``)."""
    queryset = teams.visible(queryset, user).select_related("team")
    if queryset.model in (Resource, ResourceTemplate, Prompt):
        queryset = queryset.select_related("upstream")
    if queryset.model is Prompt:
        queryset = queryset.prefetch_related("arguments", "messages")
    return queryset


@dataclass(frozen=True)
class _Links:
    """Items' endpoint slugs (those the user sees) and allowed groups' names, by item id."""

    endpoints: Mapping[int, list[str]]
    groups: Mapping[int, list[str]]


def _item_links(model: type[Model], ids: Sequence[int], user: Any) -> _Links:
    """The endpoints and groups of the items ``ids``: two queries on the through tables,
    where a prefetch per relation built a related manager and a row per item and link."""
    relation = Endpoint._meta.get_field(_MODEL_RELATION[model])
    assert isinstance(relation, ManyToManyField)  # Endpoint's item relations
    item = relation.m2m_reverse_field_name()
    through = relation.remote_field.through
    assert through is not None  # a relation's through table, Django's own
    on_endpoints = through._default_manager.filter(**{f"{item}__in": ids})
    if teams.scope_of(user) is not None:
        on_endpoints = on_endpoints.filter(endpoint_id__in=teams.visible_endpoint_ids(user))
    endpoints: dict[int, list[str]] = {}
    for pk, slug in on_endpoints.values_list(f"{item}_id", "endpoint__slug"):
        endpoints.setdefault(pk, []).append(slug)
    allowed = model._meta.get_field("allowed_groups")
    assert isinstance(allowed, ManyToManyField)  # every item's (AccessRules)
    owner = allowed.m2m_field_name()
    through = allowed.remote_field.through
    assert through is not None
    in_groups = through._default_manager.filter(**{f"{owner}__in": ids})
    groups: dict[int, list[str]] = {}
    for pk, name in in_groups.values_list(f"{owner}_id", "group__name"):
        groups.setdefault(pk, []).append(name)
    return _Links(endpoints, groups)


def _endpoint_entry(endpoint: Endpoint) -> dict[str, Any]:
    return {
        "slug": endpoint.slug,
        **_values(endpoint, ENDPOINT_FIELDS),
        "team": _team_out(endpoint),
        "rate_limits": [_values(limit, LIMIT_FIELDS) for limit in endpoint.rate_limits.all()],
        "policies": [_values(policy, POLICY_FIELDS) for policy in endpoint.policies.all()],
    }


def _item_entry(
    section: str, row: Any, slugs: Collection[str] | None, links: _Links
) -> dict[str, Any]:
    """An item's entry; its endpoints those of ``slugs`` it is on (None: all of them)."""
    _model, key, fields = _SECTIONS[section]
    entry: dict[str, Any] = {key: getattr(row, key), **_values(row, fields)}
    if section == "resources":
        entry["file"] = file_entry(row.file)
    if section == "prompts":
        entry["arguments"] = _arguments_out(row)
        entry["messages"] = _messages_out(row)
    if section != "tools":
        entry["upstream"] = row.upstream.name if row.upstream else None
    entry["allowed_groups"] = sorted(links.groups.get(row.pk, ()))
    entry["endpoints"] = sorted(
        slug for slug in links.endpoints.get(row.pk, ()) if slugs is None or slug in slugs
    )
    entry["team"] = _team_out(row)
    return entry


def _icon_images_out(paths: Iterable[str]) -> Iterator[dict[str, str]]:
    """The uploaded icons at ``paths`` (those the document's rows name), with their bytes:
    the paths are the same on every site (they name the bytes), so the rows move as they are."""
    for path in paths:
        image = icon_for_path(path)
        if image is not None:  # a path naming no stored icon was never served either
            yield {"path": path, "base64": base64.b64encode(bytes(image.data)).decode("ascii")}


def _values(row: Any, names: Iterable[str]) -> dict[str, Any]:
    return {name: getattr(row, name) for name in names}


def _team_out(row: Any) -> str | None:
    return row.team.name if row.team is not None else None


def file_entry(file: Any) -> dict[str, str] | None:
    """A stored file as a document carries it: its name and its bytes in base64."""
    if not file:
        return None
    with file.open("rb") as handle:
        content = handle.read()
    return {
        "name": file.name.rsplit("/", 1)[-1],
        "base64": base64.b64encode(content).decode("ascii"),
    }


def _arguments_out(prompt: Prompt) -> list[dict[str, Any]]:
    return [_values(argument, ARGUMENT_FIELDS) for argument in prompt.arguments.all()]


def _messages_out(prompt: Prompt) -> list[dict[str, Any]]:
    return [
        {**_values(message, MESSAGE_FIELDS), "file": file_entry(message.file)}
        for message in prompt.messages.all()
    ]


# Deepest nesting a document may have: real catalogs (JSON schemas included) stay far below,
# and the checks, validators and encoders that walk values recursively stay far from Python's
# recursion limit.
MAX_DEPTH = 100


class _Loader(yaml.SafeLoader):
    """Reads dates as the strings they were written as: catalog values are JSON values.

    Composing counts every value as it is read, an alias as many values as its anchor holds,
    and refuses the document past ``MCP_CATALOG_MAX_VALUES`` or ``MAX_DEPTH``, and an alias
    inside its own anchor, before anything is built: a few hundred bytes of nested aliases
    ("billion laughs") stand for billions of values, which every later walk would expand.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.values_limit = get_conf().MCP_CATALOG_MAX_VALUES
        self.values = 0
        self.depth = 0
        self.anchor_values: dict[str, int] = {}  # anchor -> values it holds, once composed

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # unannotated in types-PyYAML
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            held = self.anchor_values.get(event.anchor or "")
            if held is None and event.anchor in self.anchors:
                raise CatalogFormatError(f"Line {line}: an alias is used inside its own anchor.")
            self._count(held or 0, line)
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise CatalogFormatError(f"Line {line}: values nest deeper than {MAX_DEPTH} levels.")
        before = self.values
        self._count(1, line)
        node = super().compose_node(parent, index)
        self.depth -= 1
        if event.anchor is not None:
            self.anchor_values[event.anchor] = self.values - before
        return node

    def _count(self, values: int, line: int) -> None:
        self.values += values
        if self.values > self.values_limit:
            raise _too_many_values(self.values_limit, line)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

# libyaml's loader when PyYAML has it. Typed as the pure-Python class: both are a SafeLoader.
if TYPE_CHECKING:
    _CSafeLoader = yaml.SafeLoader
else:
    _CSafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _LibyamlLoader(_CSafeLoader):
    """``_Loader``'s values (dates read as strings) on libyaml's parser and composer, which
    take no per-node hook: ``_read_events`` bounds the text first."""


_LibyamlLoader.yaml_implicit_resolvers = dict(_Loader.yaml_implicit_resolvers)

# The values ``_read_events`` builds itself; any other tag (a merge key, a set, binary, an
# explicit timestamp, an unknown one) makes it leave the document to ``_LibyamlLoader``.
_STR_TAG = "tag:yaml.org,2002:str"
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "null"))
_COLLECTION_TAGS = {
    yaml.SequenceStartEvent: "tag:yaml.org,2002:seq",
    yaml.MappingStartEvent: "tag:yaml.org,2002:map",
}
_LOADED = object()  # what _read_events returns when it leaves the document to the load


def catalog_yaml_load(text: str, *, libyaml: bool = yaml.__with_libyaml__) -> Any:
    """Return the value of the YAML document ``text``, its values bounded as ``_Loader``
    bounds them (``MCP_CATALOG_MAX_VALUES`` with aliases expanded, ``MAX_DEPTH``, no alias
    inside its own anchor) before more than that many are built.

    With libyaml, ``_read_events`` builds the value from libyaml's events as it counts
    them: 10,000 tools are read in a fraction of the pure-Python loader's time
    (docs/performance.md). Without libyaml (or ``libyaml=False``), ``_Loader`` counts while
    composing. Both give the same values and the same refusals.

    Raises:
        CatalogFormatError: a bound is broken.
        yaml.YAMLError: the text is not YAML, or not one document.
    """
    if not libyaml:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader)
    value = _read_events(text)
    if value is _LOADED:
        return yaml.load(text, Loader=_LibyamlLoader)  # noqa: S506 (a SafeLoader)
    return value


def _too_many_values(limit: int, line: int) -> CatalogFormatError:
    return CatalogFormatError(
        f"Line {line}: the document holds more than {limit} values (an alias counts every "
        "value of its anchor again); MCP_CATALOG_MAX_VALUES sets the limit."
    )


def _read_events(text: str) -> Any:  # noqa: C901 (one loop over the events, kept together)
    """Build the value of ``text`` from libyaml's events, refusing it where
    ``_Loader.compose_node`` would, with its messages; or return ``_LOADED``.

    Strings, numbers, booleans and nulls (resolved and constructed by
    ``_LibyamlLoader``'s own resolver and constructors), lists, and mappings with such keys
    are built here; an alias is its anchor's value (the same object, as PyYAML gives). At
    anything else building stops and counting goes on to the end: ``_LOADED`` then says
    that ``_LibyamlLoader`` is to load the text, now known to be within the bounds. What
    only composing finds (an undefined alias, a duplicate anchor, a second document)
    returns ``_LOADED`` at once: the load refuses it there, before building anything.
    """
    limit = get_conf().MCP_CATALOG_MAX_VALUES
    values = depth = documents = 0
    held: dict[str, int] = {}  # anchor -> values it holds, once read
    built: dict[str, Any] = {}  # anchor -> its value, once read
    started: set[str] = set()  # anchors read or being read
    # Each open list or mapping: its anchor, the values before it, its value.
    open_nodes: list[tuple[str | None, int, Any]] = []
    building = True
    root: Any = None
    key: Any = _LOADED  # the key read of the innermost mapping, its value not yet
    keys: dict[str, str] = {}
    opened: tuple[str | None, int] | None = None  # a list or mapping begun: anchor, values before
    loader = _LibyamlLoader(text)
    resolve: Callable[[type[yaml.Node], str, tuple[bool, bool]], str] = loader.resolve
    constructors = loader.yaml_constructors
    get_event: Callable[[], yaml.Event] = loader.get_event
    try:
        while True:
            event: Any = get_event()
            kind = type(event)
            value: Any
            if kind is yaml.AliasEvent:
                line = event.start_mark.line + 1
                count = held.get(event.anchor)
                if count is None:
                    if event.anchor in started:
                        raise CatalogFormatError(
                            f"Line {line}: an alias is used inside its own anchor."
                        )
                    return _LOADED  # an undefined alias
                values += count
                if values > limit:
                    raise _too_many_values(limit, line)
                if not building:
                    continue
                value = built[event.anchor]
            elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                anchor, before, value = open_nodes.pop()
                depth -= 1
                if anchor is not None:
                    held[anchor] = values - before
                    built[anchor] = value
                continue
            elif kind is yaml.ScalarEvent or kind in _COLLECTION_TAGS:
                line = event.start_mark.line + 1
                if depth >= MAX_DEPTH:
                    raise CatalogFormatError(
                        f"Line {line}: values nest deeper than {MAX_DEPTH} levels."
                    )
                values += 1
                if values > limit:
                    raise _too_many_values(limit, line)
                anchor = event.anchor
                if anchor is not None:
                    if anchor in started:
                        return _LOADED  # a duplicate anchor
                    started.add(anchor)
                tag = event.tag
                if kind is yaml.ScalarEvent:
                    if anchor is not None:
                        held[anchor] = 1
                    if not building:
                        continue
                    if tag is None or tag == "!":
                        tag = resolve(yaml.ScalarNode, event.value, event.implicit)
                    if tag == _STR_TAG:
                        value = event.value
                    elif tag in _SCALAR_TAGS:
                        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark)
                        value = constructors[tag](loader, node)
                    else:
                        building = False
                        continue
                    if anchor is not None:
                        built[anchor] = value
                else:
                    depth += 1
                    if tag is not None and tag != "!" and tag != _COLLECTION_TAGS[kind]:
                        building = False
                    value = ([] if kind is yaml.SequenceStartEvent else {}) if building else None
                    opened = anchor, values - 1
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    return _LOADED  # a second document
                continue
            elif kind is yaml.StreamEndEvent:
                return root if building else _LOADED
            else:
                continue
            if building:
                # The value read goes into its list or mapping (as a key when none is
                # pending), or is the document's.
                if not open_nodes:
                    root = value
                elif type(parent := open_nodes[-1][2]) is list:
                    parent.append(value)
                elif key is not _LOADED:
                    parent[key] = value
                    key = _LOADED
                elif type(value) is list or type(value) is dict:
                    building = False  # a key PyYAML refuses as unhashable
                elif type(value) is str:
                    # Each key's text once, however many mappings repeat it, as json does.
                    key = keys.setdefault(value, value)
                else:
                    key = value
            if opened is not None:
                open_nodes.append((*opened, value if building else None))
                opened = None
    finally:
        loader.dispose()


def catalog_dump(document: Mapping[str, Any], *, fmt: str = "yaml") -> str:
    """Return ``document`` as YAML or JSON text."""
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return catalog_yaml.document_text(dict(document))


def catalog_export_text(
    *, endpoint_slugs: Sequence[str] | None = None, user: Any = None, fmt: str = "yaml"
) -> Iterator[str]:
    """``catalog_dump(catalog_with_end(catalog_export(...)), fmt=fmt)`` in pieces, the same
    text to the byte: the header, then each section's opening and each of its entries as it
    is read and written, so the first bytes leave at once and the export holds one chunk of
    rows; last, the end, which counts them (a stream broken off never imports).

    Raises:
        CatalogFormatError: an endpoint slug names no endpoint (at once, before any text).
    """
    header, sections = catalog_export_sections(endpoint_slugs=endpoint_slugs, user=user)
    header = {**header, "format": ENDED_FORMAT}
    write = _json_pieces if fmt == "json" else _yaml_pieces
    return write(header, sections)


class _Counted:
    """A section's entries, counted as they are read: the end says how many there were."""

    def __init__(self, entries: Iterator[dict[str, Any]]) -> None:
        self.entries = entries
        self.count = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for entry in self.entries:
            self.count += 1
            yield entry


async def catalog_text_async(pieces: Iterator[str]) -> AsyncIterator[str]:
    """``pieces`` (of ``catalog_export_text``) for an ASGI response, about
    ``EXPORT_BATCH_CHARS`` per piece: each is read in a thread, as the ORM must be, and the
    next only once it is sent. Django would otherwise read a synchronous iterator whole
    before the first byte. Dropped half-way (the client went away), nothing is left open:
    the pieces hold no cursor or transaction between queries (``_pages``).
    """

    def batch() -> str:
        taken: list[str] = []
        size = 0
        for piece in pieces:
            taken.append(piece)
            size += len(piece)
            if size >= EXPORT_BATCH_CHARS:
                break
        return "".join(taken)

    while text := await sync_to_async(batch)():
        yield text


def _yaml_pieces(header: dict[str, Any], sections: Iterator[Section]) -> Iterator[str]:
    # The writer catalog_dump writes a whole document with (catalog_yaml.document_text).
    writer = catalog_yaml.Writer()
    yield "".join(writer.item(key, value) for key, value in header.items())
    end: dict[str, int] = {}
    for section, entries in sections:
        counted = _Counted(entries)
        yield from writer.section(section, counted)
        end[section] = counted.count
    yield writer.item(END, end) + writer.end()


def _json(value: Any, indent: int) -> str:
    """``value`` as ``json.dumps(..., indent=2)`` writes it nested ``indent`` spaces deep
    (strings never hold a raw newline: JSON escapes it)."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return text.replace("\n", "\n" + " " * indent)


def _json_pieces(header: dict[str, Any], sections: Iterator[Section]) -> Iterator[str]:
    yield "{\n" + ",\n".join(
        f"  {_json(key, 0)}: {_json(value, 2)}" for key, value in header.items()
    )
    end: dict[str, int] = {}
    for section, entries in sections:
        yield f",\n  {_json(section, 0)}: ["
        counted = _Counted(entries)
        for entry in counted:
            yield ("\n    " if counted.count == 1 else ",\n    ") + _json(entry, 4)
        yield "\n  ]" if counted.count else "]"
        end[section] = counted.count
    yield f",\n  {_json(END, 0)}: {_json(end, 2)}\n}}\n"


def catalog_parse(text: str | bytes, *, fmt: str | None = None) -> dict[str, Any]:
    """Read a YAML or JSON document (JSON is tried first unless ``fmt`` says).

    The text may be at most ``MCP_CATALOG_MAX_BYTES`` long (a reader may pass that many bytes
    plus one, and never more need be read); its values are bounded as ``catalog_check_bounds``
    says, YAML's counted as they are read (``catalog_yaml_load``: aliases expanded), so no
    more than the bound is ever built. Refusals name the rule broken and never echo the
    document.

    Raises:
        CatalogFormatError: the text is neither, too large, or not a catalog document.
    """
    limit = get_conf().MCP_CATALOG_MAX_BYTES
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise CatalogFormatError(
            f"The document is larger than {limit} bytes; MCP_CATALOG_MAX_BYTES sets the limit."
        )
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CatalogFormatError(f"The file is not UTF-8 text: {exc}") from None
    document: Any
    try:
        if fmt == "json" or (fmt is None and text.lstrip().startswith("{")):
            document = json.loads(text)
        else:
            document = catalog_yaml_load(text)
    except RecursionError:
        raise CatalogFormatError(f"Values nest deeper than {MAX_DEPTH} levels.") from None
    except (ValueError, yaml.YAMLError) as exc:
        # ValueError: JSON's own, and an integer of more digits than Python converts.
        raise CatalogFormatError(f"The file is not valid {fmt or 'YAML or JSON'}: {exc}") from None
    return catalog_document(document)


def catalog_document(value: Any) -> dict[str, Any]:
    """Return ``value`` (parsed YAML or JSON) if it is a catalog document within bounds, as
    a format 1 document: one of ``ENDED_FORMAT`` is returned without its end, once its
    counts are those of its sections.

    Raises:
        CatalogFormatError: it is not a mapping with a known format, breaks a bound
            (``catalog_check_bounds``), or says it ends and is cut short.
    """
    catalog_check_bounds(value)
    if not isinstance(value, dict):
        raise CatalogFormatError("The file must hold a mapping with a 'format' key.")
    found = value.get("format")
    if found == ENDED_FORMAT:
        _check_end(value)
        return {
            key: FORMAT if key == "format" else item for key, item in value.items() if key != END
        }
    if found != FORMAT:
        # Quoted only when short: the value is the sender's, possibly huge.
        shown = repr(found) if isinstance(found, str | int | float | None) else ""
        shown = shown if 0 < len(shown) <= 80 else f"a value of type {type(found).__name__}"
        raise CatalogFormatError(f"format: expected {ENDED_FORMAT!r} or {FORMAT!r}, got {shown}.")
    return value


# How a refusal of a cut document ends: what to do about it.
_CUT_HINT = (
    "Nothing was imported. Export it again; if you edited the file, correct the counts "
    f"under {END!r}, or remove {END!r} and give format {FORMAT!r}."
)


def _check_end(document: Mapping[str, Any]) -> None:
    """Refuse a document of ``ENDED_FORMAT`` whose end is missing or counts other sections
    or entries than it holds."""
    end = document.get(END)
    if END not in document:
        raise CatalogFormatError(
            f"The document is cut short: its format {ENDED_FORMAT!r} promises {END!r} "
            "after its last section, counting each section's entries, and it has none. " + _CUT_HINT
        )
    if not (
        isinstance(end, dict)
        and all(isinstance(count, int) and not isinstance(count, bool) for count in end.values())
    ):
        raise CatalogFormatError(
            f"The document is cut short or was edited: {END!r} must give each section's "
            "number of entries (tools: 3, ...). " + _CUT_HINT
        )
    held = {
        key: len(item) if isinstance(item, list) else None
        for key, item in document.items()
        if key not in ("format", "scope", END)
    }
    for section in {**held, **end}:
        counted, found = end.get(section), held.get(section)
        if counted == found:
            continue
        # Named only when short: the keys and counts are the sender's.
        name = repr(section) if isinstance(section, str) and len(section) <= 40 else "a section"
        holds = "no such section" if section not in held else f"{found} entries"
        if section in held and found is None:
            holds = "a section that is not a list"
        counts = "does not count" if section not in end else "counts"
        if section in end and isinstance(counted, int) and abs(counted) < 10**12:
            counts += f" {counted} entries in"
        raise CatalogFormatError(
            f"The document is cut short or was edited: {END!r} {counts} {name}, the document "
            f"holds {holds}. " + _CUT_HINT
        )


def catalog_with_end(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` (format 1) as an export writes it: in ``ENDED_FORMAT``, its end counting
    each section's entries after the last one."""
    return {
        **{key: ENDED_FORMAT if key == "format" else item for key, item in document.items()},
        END: {
            key: len(item)
            for key, item in document.items()
            if key not in ("format", "scope") and isinstance(item, list)
        },
    }


def catalog_check_bounds(value: Any) -> None:
    """Refuse ``value`` if it holds more than ``MCP_CATALOG_MAX_VALUES`` values (one shared
    by several places counted at each) or nests deeper than ``MAX_DEPTH``.

    The walk is iterative and stops at the first value past a bound, so neither a huge nor a
    self-containing value is ever expanded. It holds one iterator per level it is in, not
    the values still to visit (a million-item list would otherwise take about 70 MB more
    while it is checked).

    Raises:
        CatalogFormatError: a bound is broken.
    """
    limit = get_conf().MCP_CATALOG_MAX_VALUES
    count = 0
    end = object()
    levels: list[Iterator[Any]] = [iter((value,))]  # the stack's length is the depth
    while levels:
        item = next(levels[-1], end)
        if item is end:
            levels.pop()
            continue
        count += 1
        if count > limit:
            raise CatalogFormatError(
                f"The document holds more than {limit} values; MCP_CATALOG_MAX_VALUES sets "
                "the limit."
            )
        if len(levels) > MAX_DEPTH:
            raise CatalogFormatError(f"Values nest deeper than {MAX_DEPTH} levels.")
        if isinstance(item, dict):
            levels.append(itertools.chain.from_iterable(item.items()))
        elif isinstance(item, list):
            levels.append(iter(item))


# ---------------------------------------------------------------------------------- import


@dataclass
class _Plan:
    """One entry of the document matched to its row (``row.pk`` None: to be created)."""

    section: str
    index: int
    key: str
    entry: Mapping[str, Any]
    row: Any
    changed: list[str] = field(default_factory=list)
    endpoint_slugs: list[str] = field(default_factory=list)
    group_names: list[str] = field(default_factory=list)
    created: bool = False
    file: tuple[str, bytes] | None = None
    file_changed: bool = False
    current_file: str = ""
    parts_changed: bool = False
    parts: list[tuple[PromptArgument | PromptMessage, tuple[str, bytes] | None]] = field(
        default_factory=list
    )

    @property
    def path(self) -> str:
        return f"{self.section}[{self.index}]"


def catalog_import(
    *,
    document: Mapping[str, Any],
    prune: bool = False,
    dry_run: bool = False,
    user: Any = None,
    source: str = history.IMPORT,
) -> ImportReport:
    """Make the database match ``document``; return what changed (or would, on a dry run).

    Entries are matched by natural key and saved only where a value differs. Item membership
    is set for the endpoints the document lists; rows on other endpoints keep theirs. With
    ``prune``, rows the document does not list are deleted (a whole-catalog document) or
    detached from the document's endpoints (a document with ``scope.endpoints``).

    With ``user`` (the API; the commands run as the shell operator and pass none), the import,
    dry run or not, needs what ``catalog_permissions`` names: the part the document decides is
    checked before it is read against the catalog, the part the changes decide once they are
    known, inside the transaction and before any file is stored, so a refusal, like a dry run,
    changes nothing.

    ``source``: how the history rows name where the change came from (a draft's publish
    names the draft).

    Raises:
        CatalogPermissionError: ``user`` lacks permissions the import needs.
        CatalogImportError: an entry is invalid; nothing was changed.
        CatalogFormatError: the document's shape is wrong.
    """
    if user is not None:
        missing = catalog_permissions_missing(
            user, catalog_permissions(document=document, prune=prune)
        )
        if missing:
            raise CatalogPermissionError(missing)
    report = ImportReport(dry_run=dry_run)
    # Each new tool is checked while planning and again as it is written: its schema's
    # metaschema check and its model's own rules run once for the same values.
    with (
        transaction.atomic(),
        history.catalog_change_source(source),
        schema_checks_remembered(),
        row_checks_remembered(),
    ):
        importer = _Importer(document, report, prune=prune, user=user)
        with catalog_changes_coalesced():  # one version bump per endpoint, not per row
            importer.run()
        if user is not None:
            changes = catalog_permissions(document=document, prune=prune, changes=report.changes)
            missing = catalog_permissions_missing(user, changes)
            if missing:
                raise CatalogPermissionError(missing)  # rolls the transaction back
        if dry_run:
            transaction.set_rollback(True)
        else:
            importer.store_files()
    return report


class _Importer:
    def __init__(
        self, document: Mapping[str, Any], report: ImportReport, *, prune: bool, user: Any
    ) -> None:
        self.document = document
        self.user = user
        self.report = report
        self.prune = prune
        self.errors: list[EntryError] = []
        self.plans: dict[str, list[_Plan]] = {}
        # Files the rows now name, stored once the import is known to go ahead.
        self.files: dict[str, bytes] = {}
        # Uploaded icons the document carries, by path; stored with the files.
        self.icons: dict[str, UploadedIcon] = {}
        # What _planned_upstreams and _planned_views return, once made.
        self._upstream_names: tuple[list[_Plan], frozenset[str]] | None = None
        self._views: frozenset[str] | None = None

    def run(self) -> None:
        self._check_shape()
        self._raise_errors()
        self._check_icon_images()
        self._raise_errors()
        self._check_credentials()
        for section in _SECTIONS:
            self.plans[section] = self._plan_section(section)
        endpoint_slugs = {plan.key for plan in self.plans["endpoints"]}
        for plans in self.plans.values():
            for plan in plans:
                for slug in plan.endpoint_slugs:
                    if slug not in endpoint_slugs:
                        self._error(plan, "endpoints", f"Endpoint {slug!r} is not in the file.")
        self._raise_errors()
        self._write()
        self._raise_errors()

    # -- shape

    def _check_shape(self) -> None:
        known = {"format", "scope", "credentials", "icon_images", *_SECTIONS}
        for key in self.document:
            if key not in known:
                self.errors.append(EntryError(str(key), "Unknown section."))
        scope = self.document.get("scope")
        if scope is not None and not (
            isinstance(scope, dict)
            and set(scope) == {"endpoints"}
            and _is_str_list(scope["endpoints"])
        ):
            self.errors.append(EntryError("scope", "Expected {endpoints: [slug, ...]}."))
        for section in ("credentials", *_SECTIONS):
            entries = self.document.get(section, [])
            if not isinstance(entries, list):
                self.errors.append(EntryError(section, "Expected a list."))
                continue
            model, key_name, names = _SECTIONS.get(section, (Credential, "name", ("kind",)))
            allowed = {key_name, *names, *_EXTRA_KEYS.get(section, ())}
            seen: set[Any] = set()
            for index, entry in enumerate(entries):
                path = f"{section}[{index}]"
                if not isinstance(entry, dict):
                    self.errors.append(EntryError(path, "Expected a mapping."))
                    continue
                for key in entry:
                    if key not in allowed:
                        self.errors.append(EntryError(f"{path}.{key}", "Unknown field."))
                if not isinstance(entry.get(key_name), str) or not entry[key_name]:
                    self.errors.append(EntryError(f"{path}.{key_name}", "Required (a string)."))
                    continue
                for list_key in ("endpoints", "allowed_groups"):
                    if list_key in entry and not _is_str_list(entry[list_key]):
                        self.errors.append(
                            EntryError(f"{path}.{list_key}", "Expected a list of strings.")
                        )
                if entry.get("team") is not None and not isinstance(entry["team"], str):
                    self.errors.append(EntryError(f"{path}.team", "Expected a group name or null."))
                if section == "endpoints":
                    self._check_governance_shape(path, entry)
                # Tool names repeat only on different endpoints; the database check finds
                # real clashes.
                identity = (
                    (entry[key_name], tuple(sorted(entry.get("endpoints") or ())))
                    if section == "tools"
                    else entry[key_name]
                )
                if identity in seen:
                    self.errors.append(
                        EntryError(f"{path}.{key_name}", f"{entry[key_name]!r} is listed twice.")
                    )
                seen.add(identity)

    def _check_governance_shape(self, path: str, entry: Mapping[str, Any]) -> None:
        for name, (_model, names) in _GOVERNANCE.items():
            if name not in entry:
                continue
            items = entry[name]
            if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
                self.errors.append(EntryError(f"{path}.{name}", "Expected a list of mappings."))
                continue
            seen: set[Any] = set()
            for index, item in enumerate(items):
                where = f"{path}.{name}[{index}]"
                for key in item:
                    if key not in names:
                        self.errors.append(EntryError(f"{where}.{key}", "Unknown field."))
                if name != "policies":
                    continue
                if not isinstance(item.get("name"), str) or not item["name"]:
                    self.errors.append(EntryError(f"{where}.name", "Required (a string)."))
                elif item["name"] in seen:
                    self.errors.append(
                        EntryError(f"{where}.name", f"{item['name']!r} is listed twice.")
                    )
                else:
                    seen.add(item["name"])

    def _check_icon_images(self) -> None:
        """Read ``icon_images`` as uploads are read (``icon_check``), and make sure every
        uploaded icon a row names is either on this site already or in the document."""
        images = self.document.get("icon_images", [])
        if not isinstance(images, list):
            self.errors.append(EntryError("icon_images", "Expected a list."))
            return
        for index, item in enumerate(images):
            path = f"icon_images[{index}]"
            if not (
                isinstance(item, dict)
                and set(item) == {"path", "base64"}
                and all(isinstance(value, str) for value in item.values())
            ):
                self.errors.append(EntryError(path, "Expected {path, base64}."))
                continue
            try:
                icon = icon_check(base64.b64decode(item["base64"], validate=True))
            except (ValueError, binascii.Error):
                self.errors.append(EntryError(f"{path}.base64", "Not valid base64."))
                continue
            except ValidationError as exc:
                self.errors.append(EntryError(f"{path}.base64", " ".join(exc.messages)))
                continue
            if icon.path != item["path"]:
                self.errors.append(
                    EntryError(f"{path}.path", f"The bytes are those of {icon.path}.")
                )
                continue
            self.icons[icon.path] = icon
        for section in _SECTIONS:
            for index, entry in enumerate(self.document.get(section, [])):
                icons = entry.get("icons") if isinstance(entry, dict) else None
                for icon_path in uploaded_paths(icons if isinstance(icons, list) else None):
                    if icon_path not in self.icons and icon_for_path(icon_path) is None:
                        self.errors.append(
                            EntryError(
                                f"{section}[{index}].icons",
                                f"{icon_path} is neither on this site nor in icon_images.",
                            )
                        )

    def _check_credentials(self) -> None:
        credentials = teams.visible(Credential.objects.all(), self.user)
        existing = dict(credentials.values_list("name", "kind"))
        for index, entry in enumerate(self.document.get("credentials", [])):
            name, kind = entry["name"], entry.get("kind")
            if name not in existing:
                self.errors.append(
                    EntryError(
                        f"credentials[{index}].name",
                        f"No credential named {name!r} here: create it (with its secret) first.",
                    )
                )
            elif kind is not None and kind != existing[name]:
                self.errors.append(
                    EntryError(
                        f"credentials[{index}].kind",
                        f"The credential {name!r} here is of kind {existing[name]!r}.",
                    )
                )

    # -- planning: match, assign, validate

    def _plan_section(self, section: str) -> list[_Plan]:
        model, key_name, names = _SECTIONS[section]
        entries = self.document.get(section, [])
        rows = self._match(section, entries)
        plans = []
        for index, (entry, row) in enumerate(zip(entries, rows, strict=True)):
            plan = _Plan(section, index, entry[key_name], entry, row, created=row.pk is None)
            if row.pk is None:
                setattr(row, key_name, entry[key_name])
            values = {name: entry[name] for name in names if name in entry}
            if section == "tools":
                values = tool_values(tool=row, data=values)
            for name, value in values.items():
                if row.pk is not None and getattr(row, name) != value:
                    plan.changed.append(name)
                setattr(row, name, value)
            if section != "endpoints":
                plan.endpoint_slugs = list(entry.get("endpoints") or [])
                plan.group_names = sorted(entry.get("allowed_groups") or [])
            if section in _REFERENCES:
                self._plan_reference(plan)
            if "team" in entry:
                self._plan_team(plan)
            if section == "resources":
                self._plan_file(plan, "file", row.file)
            if section == "prompts":
                self._plan_prompt_parts(plan)
            if plan.created or plan.changed:
                # A row the document leaves as it is stays as it is: not checked again, so a
                # re-import costs what it changes, not what the catalog holds.
                self._validate(plan)
            plans.append(plan)
        return plans

    def _match(self, section: str, entries: Sequence[Mapping[str, Any]]) -> list[Any]:
        model, key_name, _names = _SECTIONS[section]
        keys = [entry[key_name] for entry in entries]
        if section != "tools":
            # What the plan and the write compare: an item's groups and endpoints.
            related = ("endpoints", "allowed_groups") if section in _RELATION else ()
            rows = model._default_manager.prefetch_related(*related)
            existing = rows.in_bulk(keys, field_name=key_name)
            seen = set(teams.visible(model._default_manager.filter(
                pk__in=[row.pk for row in existing.values()]
            ), self.user).values_list("pk", flat=True))  # fmt: skip
            for index, key in enumerate(keys):
                if key in existing and existing[key].pk not in seen:
                    # Keys are unique site-wide: say so, and nothing of the row.
                    self.errors.append(
                        EntryError(
                            f"{section}[{index}].{key_name}",
                            f"{key!r} is taken by another team's row: choose another.",
                        )
                    )
            return [existing.get(key) or model() for key in keys]
        # Tool names are unique per endpoint only: an entry is the tool of that name on one of
        # its endpoints, else the only tool of that name not claimed by another entry.
        candidates: dict[str, list[Tool]] = {}
        tools = teams.visible(Tool.objects.filter(name__in=keys), self.user)  # names repeat
        for tool in tools.prefetch_related("endpoints", "allowed_groups"):
            candidates.setdefault(tool.name, []).append(tool)
        matched: list[Tool | None] = [None] * len(entries)
        claimed: set[int] = set()
        for index, entry in enumerate(entries):
            slugs = set(entry.get("endpoints") or ())
            sharing = [
                tool
                for tool in candidates.get(entry["name"], [])
                if slugs & {endpoint.slug for endpoint in tool.endpoints.all()}
            ]
            if len(sharing) > 1:
                self.errors.append(
                    EntryError(f"tools[{index}].endpoints", "Matches more than one tool here.")
                )
            elif sharing and sharing[0].pk not in claimed:
                matched[index] = sharing[0]
                claimed.add(sharing[0].pk)
        for index, entry in enumerate(entries):
            if matched[index] is None:
                free = [t for t in candidates.get(entry["name"], []) if t.pk not in claimed]
                if len(free) == 1:
                    matched[index] = free[0]
                    claimed.add(free[0].pk)
        return [tool or Tool() for tool in matched]

    def _plan_reference(self, plan: _Plan) -> None:
        """Point the row at the credential or upstream its entry names (None: at none).

        An upstream may be one this document creates: it is planned before the rows naming
        it, and saved before them.
        """
        key, target = _REFERENCES[plan.section]
        if key not in plan.entry:
            return
        name = plan.entry[key]
        current = getattr(plan.row, key)
        found: Model | None
        if name is None:
            found = None
        elif not isinstance(name, str):
            self._error(plan, key, "Expected a name or null.")
            return
        elif target == "credentials":
            found = teams.visible(Credential.objects.filter(name=name), self.user).first()
        else:
            planned = {p.key: p.row for p in self.plans.get(target, [])}
            upstreams = teams.visible(Upstream.objects.filter(name=name), self.user)
            found = planned.get(name) or upstreams.first()
        if name is not None and found is None:
            what = "credential" if target == "credentials" else "upstream"
            self._error(plan, key, f"No {what} named {name!r} here or in the file.")
            return
        if (current.name if current is not None else None) != name:
            if plan.row.pk is not None:
                plan.changed.append(key)
            setattr(plan.row, key, found)

    def _plan_team(self, plan: _Plan) -> None:
        """Put the row in the team its entry names (null: site-wide). The group must exist,
        and be one of a team-scoped importer's teams; without the key the row keeps its team
        (a new one gets the write path's default)."""
        name = plan.entry["team"]
        group = None if name is None else Group.objects.filter(name=name).first()
        if name is not None and group is None:
            self._error(plan, "team", f"No group named {name!r} here: create it first.")
            return
        scope = teams.scope_of(self.user)
        if scope is not None and (group is None or group.pk not in scope):
            shown = "site-wide" if name is None else repr(name)
            self._error(plan, "team", f"{shown} is not one of your teams.")
            return
        if plan.row.team_id != (group.pk if group else None):
            if not plan.created:
                plan.changed.append("team")
            plan.row.team = group

    def _plan_file(self, plan: _Plan, key: str, current: Any) -> None:
        plan.current_file = current.name if current else ""
        if key not in plan.entry:
            return
        decoded = _decode_file(plan.entry[key])
        if isinstance(decoded, str):
            self._error(plan, key, decoded)
            return
        plan.file = decoded
        plan.file_changed = file_entry(current) != plan.entry[key]
        if plan.file_changed and not plan.created:
            plan.changed.append(key)
        # The model's clean() reads the size of whatever file is set.
        plan.row.file = ContentFile(decoded[1], name=decoded[0]) if decoded else None

    def _plan_prompt_parts(self, plan: _Plan) -> None:
        prompt: Prompt = plan.row
        for key, names in (("arguments", ARGUMENT_FIELDS), ("messages", MESSAGE_FIELDS)):
            wanted = plan.entry.get(key, [])
            if not isinstance(wanted, list) or not all(isinstance(x, dict) for x in wanted):
                self._error(plan, key, "Expected a list of mappings.")
                continue
            allowed = set(names) | ({"file"} if key == "messages" else set())
            for position, item in enumerate(wanted):
                unknown = [name for name in item if name not in allowed]
                for name in unknown:
                    self._error(plan, f"{key}[{position}].{name}", "Unknown field.")
                if not unknown:
                    self._plan_part(plan, key, position, item)
            if key == "messages":
                try:
                    prompt_messages_check(prompt, wanted)
                except ValidationError as exc:
                    self._error(plan, key, exc.messages[0])
            if prompt.pk is None:
                current: list[dict[str, Any]] = []
            else:
                current = _arguments_out(prompt) if key == "arguments" else _messages_out(prompt)
            if current != [self._part(key, item) for item in wanted]:
                plan.parts_changed = True
                if not plan.created:
                    plan.changed.append(key)

    def _plan_part(self, plan: _Plan, key: str, position: int, item: Mapping[str, Any]) -> None:
        values = self._part(key, item)
        path = f"{key}[{position}]"
        part: PromptArgument | PromptMessage
        file: tuple[str, bytes] | None = None
        if key == "arguments":
            part = PromptArgument(position=position, **values)
        else:
            decoded = _decode_file(values.pop("file"))
            if isinstance(decoded, str):
                self._error(plan, f"{path}.file", decoded)
                return
            part = PromptMessage(position=position, **values)
            if decoded is not None:
                file = decoded
                part.file = ContentFile(decoded[1], name=decoded[0])
        try:
            part.full_clean(exclude=["prompt"])
        except ValidationError as exc:
            for name, messages in _message_dict(exc).items():
                for message in messages:
                    self._error(plan, path if name == "__all__" else f"{path}.{name}", message)
            return
        plan.parts.append((part, file))

    def _part(self, key: str, item: Mapping[str, Any]) -> dict[str, Any]:
        names = ARGUMENT_FIELDS if key == "arguments" else MESSAGE_FIELDS
        model = PromptArgument if key == "arguments" else PromptMessage
        defaults = {name: _field_default(model, name) for name in names}
        result = {**defaults, **{name: item[name] for name in names if name in item}}
        if key == "messages":
            result["file"] = item.get("file")
        return result

    def _validate(self, plan: _Plan) -> None:
        row = plan.row
        # Membership and groups are checked separately; file content was checked above.
        try:
            if plan.section in _WRITE_PATH:
                catalog_row_check(
                    row, upstreams=self._planned_upstreams(), views=self._planned_views()
                )
            else:
                row.full_clean(validate_unique=row.pk is None)
        except ValidationError as exc:
            for name, messages in _message_dict(exc).items():
                for message in messages:
                    self._error(plan, name, message)

    def _planned_upstreams(self) -> frozenset[str]:
        # Read for every row checked, so made once the upstreams (the first section) are
        # planned, not once a row.
        plans = self.plans.get("upstreams", [])
        if self._upstream_names is None or self._upstream_names[0] is not plans:
            self._upstream_names = (plans, frozenset(plan.key for plan in plans))
        return self._upstream_names[1]

    def _planned_views(self) -> frozenset[str]:
        # MCP Apps views the document writes, which its tools (planned first) may link: each
        # is checked as a resource in its own right. Read for every row checked; made once.
        if self._views is None:
            self._views = frozenset(
                entry["uri"]
                for entry in self.document.get("resources", [])
                if isinstance(entry.get("uri"), str)
                and entry["uri"].startswith(apps.URI_SCHEME)
                and entry.get("mime_type") == apps.MIME_TYPE
            )
        return self._views

    def _error(self, plan: _Plan, name: str, message: str) -> None:
        path = plan.path if name == "__all__" else f"{plan.path}.{name}"
        self.errors.append(EntryError(f"{path} ({plan.key})", message))

    def _raise_errors(self) -> None:
        if self.errors:
            raise CatalogImportError(self.errors)

    # -- writing

    def _write(self) -> None:
        groups = self._groups()
        for plan in self.plans["upstreams"]:
            self._save(plan)
        endpoints: dict[str, Endpoint] = {}
        for plan in self.plans["endpoints"]:
            self._save(plan)
            endpoints[plan.key] = plan.row
            self._write_governance(plan)
        scope = self._scope_endpoint_ids(endpoints)
        attach: list[tuple[_Plan, set[int]]] = []
        # New tools are written in bulk, with their endpoints, after every detach.
        new_tools: list[_Plan] = []
        for section in _RELATION:
            for plan in self.plans[section]:
                if section == "tools" and plan.created:
                    new_tools.append(plan)
                    self.report.changes.append(Change("create", section, plan.key))
                    attach.append((plan, {endpoints[slug].pk for slug in plan.endpoint_slugs}))
                    continue
                self._save(plan)
                self._set_groups(plan, groups)
                if section == "prompts" and plan.parts_changed:
                    self._write_prompt_parts(plan)
                wanted = {endpoints[slug].pk for slug in plan.endpoint_slugs}
                current = (
                    set()
                    if plan.created
                    else {endpoint.pk for endpoint in plan.row.endpoints.all()}
                )
                # Only the document's endpoints are managed; others keep the row.
                removed = (current & scope) - wanted
                if removed:
                    catalog_row_detach(plan.row, endpoint_ids=removed, actor=self.user, source=None)
                    self._record(plan, "detach", _slugs(endpoints, removed))
                attach.append((plan, wanted - current))
        # Attached after every detach, so a tool moving between endpoints never clashes with
        # the one taking its place.
        written = self._create_in_bulk(new_tools, endpoints, groups)
        for plan, added in attach:
            if added and plan.created and plan.section == "tools":
                if id(plan) in written:
                    self._record(plan, "attach", _slugs(endpoints, added))
            elif added:
                try:
                    catalog_row_attach(plan.row, endpoint_ids=added, actor=self.user, source=None)
                except ValidationError as exc:
                    for message in exc.messages:
                        self._error(plan, "endpoints", message)
                    continue
                self._record(plan, "attach", _slugs(endpoints, added))
        if self.prune:
            self._prune(endpoints, scope)

    def _create_in_bulk(
        self, plans: Sequence[_Plan], endpoints: Mapping[str, Endpoint], groups: Mapping[str, Group]
    ) -> set[int]:
        """Create the new rows of ``plans`` with their endpoints and groups, ``BULK_CHUNK`` at
        a time (``catalog_rows_create``: a few statements per chunk, not per row); return the
        ``id`` of each plan written (a refused chunk writes nothing and reports each row)."""
        written: set[int] = set()
        for start in range(0, len(plans), BULK_CHUNK):
            chunk = plans[start : start + BULK_CHUNK]
            items = [
                NewItem(
                    row=plan.row,
                    endpoints=[endpoints[slug] for slug in dict.fromkeys(plan.endpoint_slugs)],
                    groups=[groups[name] for name in plan.group_names],
                )
                for plan in chunk
            ]
            try:
                catalog_rows_create(
                    items,
                    actor=self.user,
                    source=None,
                    upstreams=self._planned_upstreams(),
                    views=self._planned_views(),
                )
            except RowsInvalid as exc:
                for index, found in sorted(exc.by_row.items()):
                    for name, messages in found.items():
                        for message in messages:
                            self._error(chunk[index], name, message)
                continue
            written.update(id(plan) for plan in chunk)
        return written

    def _write_governance(self, plan: _Plan) -> None:
        """Make the endpoint's rate limits and policies those its entry lists (when it lists
        them: without the key they stay), through their own write paths, so their checks and
        the team rule apply; a row is saved only where a value differs."""
        endpoint: Endpoint = plan.row
        if "rate_limits" in plan.entry:
            entries = plan.entry["rate_limits"]
            limits = [] if plan.created else list(endpoint.rate_limits.order_by("id"))
            for index, item in enumerate(entries):
                limit = limits[index] if index < len(limits) else RateLimit(endpoint=endpoint)
                self._save_governed(plan, "rate_limits", index, f"{plan.key}[{index}]", limit, item)
            for index, limit in enumerate(limits[len(entries) :], start=len(entries)):
                row_delete(limit, actor=self.user, source=None)
                self.report.changes.append(Change("delete", "rate_limits", f"{plan.key}[{index}]"))
        if "policies" in plan.entry:
            entries = plan.entry["policies"]
            policies = {} if plan.created else {p.name: p for p in endpoint.policies.all()}
            wanted = {item["name"] for item in entries}
            for name in sorted(set(policies) - wanted):
                policy_delete(policies[name], actor=self.user, source=None)
                self.report.changes.append(Change("delete", "policies", f"{plan.key}/{name}"))
            for index, item in enumerate(entries):
                policy = policies.get(item["name"]) or Policy(endpoint=endpoint)
                key = f"{plan.key}/{item['name']}"
                self._save_governed(plan, "policies", index, key, policy, item)

    def _save_governed(
        self,
        plan: _Plan,
        section: str,
        index: int,
        key: str,
        row: RateLimit | Policy,
        item: Mapping[str, Any],
    ) -> None:
        _model, names = _GOVERNANCE[section]
        created = row.pk is None
        changed = [name for name in names if name in item and getattr(row, name) != item[name]]
        for name in changed:
            setattr(row, name, item[name])
        if not created and not changed:
            return
        try:
            if isinstance(row, Policy):
                policy_save(row, actor=self.user, source=None)
            else:
                setting_row_save(row, actor=self.user, source=None)
        except (ValidationError, PermissionDenied) as exc:
            where = f"{section}[{index}]"
            if isinstance(exc, PermissionDenied):
                self._error(plan, where, str(exc))
                return
            for name, messages in _message_dict(exc).items():
                for message in messages:
                    self._error(plan, where if name == "__all__" else f"{where}.{name}", message)
            return
        fields = () if created else tuple(changed)
        self.report.changes.append(Change("create" if created else "update", section, key, fields))

    def _groups(self) -> dict[str, Group]:
        names = {
            name for plans in self.plans.values() for plan in plans for name in plan.group_names
        }
        groups = Group.objects.in_bulk(names, field_name="name")
        for name in sorted(names - set(groups)):
            groups[name] = Group.objects.create(name=name)
            self.report.changes.append(Change("create", "groups", name))
        return groups

    def _scope_endpoint_ids(self, endpoints: Mapping[str, Endpoint]) -> set[int]:
        scope = self.document.get("scope")
        slugs = scope["endpoints"] if scope else list(endpoints)
        return set(Endpoint.objects.filter(slug__in=slugs).values_list("pk", flat=True))

    def _save(self, plan: _Plan) -> None:
        row = plan.row
        stored: dict[str, str] = {}
        if plan.section == "resources":
            # The file checked from the document is saved naming the stored one (stored once
            # the import goes ahead), or the row keeps its current one.
            if plan.file_changed:
                stored["file"] = self._stored_file("resources", plan.file)
            else:
                row.file = plan.current_file
        if plan.created or plan.changed:
            if plan.section in _WRITE_PATH:
                catalog_row_save(
                    row,
                    actor=self.user,
                    source=None,
                    upstreams=self._planned_upstreams(),
                    views=self._planned_views(),
                    stored_files=stored,
                )
            else:
                setting_row_save(row, actor=self.user, source=None)
            fields = () if plan.created else tuple(plan.changed)
            action = "create" if plan.created else "update"
            self.report.changes.append(Change(action, plan.section, plan.key, fields))

    def _stored_file(self, folder: str, file: tuple[str, bytes] | None) -> str:
        # Content-addressed, so the same content is stored once and keeps its file name.
        if file is None:
            return ""
        name, content = file
        path = f"{folder}/{hashlib.sha256(content).hexdigest()[:16]}/{name}"
        self.files[path] = content
        return path

    def store_files(self) -> None:
        for path, content in self.files.items():
            if not default_storage.exists(path):
                default_storage.save(path, ContentFile(content))
        for icon in self.icons.values():
            icon_store(icon=icon)

    def _set_groups(self, plan: _Plan, groups: Mapping[str, Group]) -> None:
        if "allowed_groups" not in plan.entry:
            return
        current = (
            [] if plan.created else sorted(group.name for group in plan.row.allowed_groups.all())
        )
        if current != plan.group_names:
            catalog_row_relations_set(
                plan.row,
                relations={"allowed_groups": [groups[name] for name in plan.group_names]},
                actor=self.user,
                source=None,
            )
            if not plan.created:
                self.report.changes.append(
                    Change("update", plan.section, plan.key, ("allowed_groups",))
                )

    def _write_prompt_parts(self, plan: _Plan) -> None:
        arguments = [part for part, _file in plan.parts if isinstance(part, PromptArgument)]
        messages = [(part, file) for part, file in plan.parts if isinstance(part, PromptMessage)]
        prompt_parts_set(
            plan.row,
            arguments=arguments,
            messages=[part for part, _file in messages],
            message_files=[
                self._stored_file("prompts", file) if file is not None else None
                for _part, file in messages
            ],
            actor=self.user,
            source=None,
        )

    def _record(self, plan: _Plan, action: str, slugs: Sequence[str]) -> None:
        self.report.changes.append(
            Change(action, plan.section, plan.key, detail=f"endpoints {', '.join(slugs)}")
        )

    def _prune(self, endpoints: Mapping[str, Endpoint], scope: set[int]) -> None:
        listed = {section: {plan.row.pk for plan in plans} for section, plans in self.plans.items()}
        if self.document.get("scope"):
            # A partial document manages only its endpoints' membership.
            for endpoint in Endpoint.objects.filter(pk__in=scope):
                for section, relation in _RELATION.items():
                    manager = getattr(endpoint, relation)
                    # What another team published there stays (and stays unseen).
                    extra = list(teams.visible(manager.exclude(pk__in=listed[section]), self.user))
                    if extra:
                        for row in extra:
                            catalog_row_detach(
                                row,
                                endpoint_ids=[endpoint.pk],
                                actor=self.user,
                                source=None,
                            )
                            self.report.changes.append(
                                Change("detach", section, _key(section, row), detail=endpoint.slug)
                            )
            return
        # Items first: an upstream is then still in use only by rows the document keeps; tools
        # before resources, so a view is in use only by tools the document keeps.
        for section in _PRUNE_ORDER:
            model = _SECTIONS[section][0]
            unlisted = model._default_manager.exclude(pk__in=listed[section])
            for row in teams.visible(unlisted, self.user):  # another team's rows stay
                references = references_to(row)
                if references:
                    # As the API and the admin: never delete what kept rows still use.
                    self.errors.append(
                        EntryError(
                            f"{section} ({_key(section, row)})",
                            f"{in_use_message(row, references)} List it in the file, or "
                            "import without prune.",
                        )
                    )
                    continue
                self.report.changes.append(Change("delete", section, _key(section, row)))
                row_delete(row, actor=self.user, source=None)


# Sections whose rows are written through services.catalog_writes (upstreams: row_writes).
_WRITE_PATH = frozenset({"endpoints", "tools", "resources", "resource_templates", "prompts"})


def _key(section: str, row: Any) -> str:
    return str(getattr(row, _SECTIONS[section][1]))


def _slugs(endpoints: Mapping[str, Endpoint], ids: Iterable[int]) -> list[str]:
    by_id = {endpoint.pk: slug for slug, endpoint in endpoints.items()}
    return sorted(by_id.get(pk, str(pk)) for pk in ids)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _decode_file(value: Any) -> tuple[str, bytes] | None | str:
    """Return ``(name, content)`` of a file entry, None for null, or an error message."""
    if value is None:
        return None
    if not (
        isinstance(value, dict)
        and set(value) == {"name", "base64"}
        and isinstance(value["name"], str)
        and value["name"]
        and "/" not in value["name"]
        and isinstance(value["base64"], str)
    ):
        return "Expected null or {name, base64} (a file name without folders)."
    try:
        return value["name"], base64.b64decode(value["base64"], validate=True)
    except ValueError:
        return "base64 is not valid base64."


def _message_dict(exc: ValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return {
            name: [m for e in errors for m in e.messages] for name, errors in exc.error_dict.items()
        }
    return {"__all__": list(exc.messages)}
