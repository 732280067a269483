"""The one write path of catalog rows: endpoints, tools, resources, resource templates, prompts.

Every interface writes these rows through here: the admin forms, the API serializers, catalog
import, OpenAPI import and the demo seed. They parse their input and may check it early, to
put errors beside their own fields, but the rules live only here, in three steps:

- ``tool_values``: a field a tool write leaves empty takes the value its config declares (the
  kind's executor says which: ``Executor.tool_defaults``).
- ``catalog_row_check``: the model's own validation, what a tool's config names (credentials,
  upstreams: ``Executor.config_references``) and ties to its input schema
  (``Executor.config_problems``), and tool names unique per endpoint. Errors come as one
  ``ValidationError`` keyed by field (``config.<key>`` for a config's).
- ``catalog_row_save``: checks again (no interface can skip a rule), saves, sets the row's
  relations (endpoints, groups, an endpoint's items), and stamps the history rows with who
  acts and from where (``history.catalog_change``). The model signals then bump catalog
  versions and send list_changed.

Inside ``row_checks_remembered`` (a catalog import, which checks each row while planning and
its write path checks it again), a row checked again with the values it passed with is held
again only to the rules that read the database.

Many rows at once (the admin's bulk actions): ``catalog_rows_enable``,
``catalog_rows_publish`` and ``catalog_rows_unpublish``, each in one transaction (one
list_changed per endpoint) and all or nothing; switching a row on runs ``catalog_row_check``
on it first.

Every write function here takes ``actor``, the user acting (None: the request's, or nobody),
and runs inside ``writing``: the rule about who may change which rows (teams:
``services/teams.py``) has that one place, and no interface can go around it. Upstreams and
credentials, reverts and deletes are written by ``services/row_writes.py``, inside the same
``writing``; nothing here names a tool kind.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, Group
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.dispatch import Signal
from django.utils import timezone
from simple_history.utils import get_change_reason_from_object

from mcp_app.executors import get_executors
from mcp_app.executors.base import ConfigError, ConfigReference
from mcp_app.models import (
    Credential,
    Endpoint,
    MembershipChange,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.models.fields import default_input_schema
from mcp_app.protocol import apps
from mcp_app.services import history, review, teams

CatalogRow = Endpoint | Tool | Resource | ResourceTemplate | Prompt
# Who acts: a signed-in user; None (or an anonymous user): the request's user, if any.
Actor = AbstractBaseUser | AnonymousUser | None

# The many-to-many fields ``catalog_row_save`` sets: an item's, then an endpoint's.
RELATIONS = ("endpoints", "allowed_groups", "tools", "resources", "resource_templates", "prompts")

# The rows a config reference may name, by ``ConfigReference.target``.
_REFERENCE_MODELS: dict[str, type[models.Model]] = {
    "credential": Credential,
    "upstream": Upstream,
}


def tool_values(*, tool: Tool | None, data: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``data`` (Tool field values) with what it leaves empty filled from the config.

    A field the config declares (a python function's title, description, schemas and hints)
    takes the declared value when ``data`` holds it empty (None or blank text) or, for a new
    tool (``tool`` None or unsaved), does not hold it; a saved tool keeps what ``data`` omits.
    A tool left without an input schema takes the no-argument one.
    """
    current = tool if tool is not None and not tool._state.adding else None
    kind = data.get("kind", current.kind if current is not None else "")
    config = data.get("config", current.config if current is not None else {})
    executor = get_executors().get(kind) if isinstance(kind, str) else None
    declared = (
        executor.tool_defaults(config)
        if executor is not None and isinstance(config, Mapping)
        else {}
    )
    values = dict(data)
    for name, value in declared.items():
        if name in data:
            given = data[name]
            if given is None or (isinstance(given, str) and not given.strip()):
                values[name] = value
        elif current is None:
            values[name] = value
    if values.get("input_schema", ...) is None or ("input_schema" not in values and not current):
        values["input_schema"] = default_input_schema()
    return values


@contextlib.contextmanager
def writing(row: models.Model, *, actor: Actor, source: str | None) -> Iterator[None]:
    """Run one write of ``row`` (or of its parts) by ``actor``: in a transaction, with every
    history row and membership change written stamped with ``actor`` and ``source``.

    Every write of this module goes through here, so the rule about who may write which rows
    (``teams.check_may_write``: a team's rows, by its members) has this one place.

    Raises:
        PermissionDenied: ``row`` is another team's.
        ValidationError: "team": the row would leave the actor's teams.
    """
    with transaction.atomic(), history.catalog_change(source=source, actor=actor):
        teams.check_may_write(row, history.acting_user())
        review.check_may_change(row, history.acting_user())
        yield


def catalog_row_check(
    row: CatalogRow,
    *,
    relations: Mapping[str, Sequence[models.Model]] | None = None,
    upstreams: Collection[str] = (),
    views: Collection[str] = (),
) -> None:
    """Check that ``row``, with its values set and ``relations`` (None: those it has), may be
    saved.

    ``upstreams``: names of upstreams being created in the same write (catalog import), which
    a tool's config may name before they exist; ``views``: likewise, URIs of MCP Apps views
    (``Resource.is_view``) a tool may link.

    Raises:
        ValidationError: by field name; nothing was written.
    """
    errors: dict[str, list[str]] = {}
    # Passed before with these values (``row_checks_remembered``): what reads them alone
    # holds still.
    unchanged = _checked_unchanged(row)
    try:
        if unchanged:
            _database_clean(row)
        else:
            row.full_clean()
    except ValidationError as exc:
        errors.update(_by_field(exc))
    if isinstance(row, Tool) and not {"kind", "config", "input_schema"} & set(errors):
        problems = _tool_config_problems(row, upstreams, references_only=unchanged)
        for key, message in problems.items():
            errors.setdefault(key, []).append(message)
    if isinstance(row, Tool) and "name" not in errors:
        endpoints = (relations or {}).get("endpoints")
        try:
            if endpoints is not None or row.pk is None:
                endpoint_ids = [endpoint.pk for endpoint in endpoints or ()]
                check_unique_tool_names(endpoint_ids=endpoint_ids, tools=[(row.pk, row.name)])
            else:
                _check_name_on_current_endpoints(row)
        except ValidationError as exc:
            errors.setdefault("name", []).extend(exc.messages)
    if isinstance(row, Tool) and row.ui_resource_uri and "ui_resource_uri" not in errors:
        problem = _view_link_problem(row.ui_resource_uri, views)
        if problem:
            errors.setdefault("ui_resource_uri", []).append(problem)
    if isinstance(row, Resource) and row.pk is not None and not errors:
        for key, message in _linked_view_problems(row).items():
            errors.setdefault(key, []).append(message)
    if isinstance(row, Endpoint) and (tools := (relations or {}).get("tools")) is not None:
        # The endpoint's whole new set: only names repeated within it can clash.
        try:
            check_unique_tool_names(
                endpoint_ids=(),
                tools=[(tool.pk, tool.name) for tool in tools if isinstance(tool, Tool)],
            )
        except ValidationError as exc:
            errors.setdefault("tools", []).extend(exc.messages)
    if errors:
        raise ValidationError(errors)
    if not unchanged:
        _remember_checked(row)


# The rows that passed ``catalog_row_check`` inside ``row_checks_remembered``, by id: each
# with the values it passed with (``_values_key``); None outside.
_checked_rows: ContextVar[dict[int, tuple[models.Model, str]] | None] = ContextVar(
    "mcp_checked_rows", default=None
)


@contextlib.contextmanager
def row_checks_remembered() -> Iterator[None]:
    """Inside the block, a row ``catalog_row_check`` passed is not held again to the rules
    that read its values alone while those values stay as they were.

    A catalog import checks each new tool while planning, so that every entry's errors are
    reported before anything is written, and ``catalog_rows_create`` checks it again, as it
    checks every row it writes: the second check was about a fifth of a fresh import's time.
    Its model's own rules (``full_clean``'s field checks, the config's and the schemas'
    included, and ``clean()``) and its config's ties to its input schema
    (``Executor.config_problems``) read the row's values alone, so the same row with the
    same values passes them again. What reads the database runs each time: ``full_clean``'s
    unique and constraint checks, the rows a config names, tool names per endpoint, view
    links. A row that failed, whose values changed since, or holding a value that is not
    plain JSON (a file, a date: any saved row) is checked in full each time. (Not again:
    whether a foreign key's row still exists, which ``full_clean`` reads too; the database's
    foreign key refuses a row that lost it.)
    """
    if _checked_rows.get() is not None:
        yield
        return
    token = _checked_rows.set({})
    try:
        yield
    finally:
        _checked_rows.reset(token)


def _checked_unchanged(row: models.Model) -> bool:
    """Whether ``row`` passed ``catalog_row_check`` in this ``row_checks_remembered`` block
    with the values it holds now."""
    checked = _checked_rows.get()
    found = checked.get(id(row)) if checked is not None else None
    return found is not None and found[0] is row and found[1] == _values_key(row)


def _remember_checked(row: models.Model) -> None:
    checked = _checked_rows.get()
    if checked is not None and (key := _values_key(row)) is not None:
        checked[id(row)] = (row, key)


def _database_clean(row: models.Model) -> None:
    """The parts of ``row.full_clean()`` that read the database besides foreign keys: unique
    fields and constraints (no field failed, so none is left out)."""
    errors: dict[str, Any] = {}
    for check in (row.validate_unique, row.validate_constraints):
        try:
            check()
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
    if errors:
        raise ValidationError(errors)


def _values_key(row: models.Model) -> str | None:
    """The row's field values as canonical JSON; None if one is not plain JSON, or names a
    related row the row holds unsaved (a check may read that row, not the id)."""
    fields = row._meta.concrete_fields
    for field in fields:
        if field.is_relation and field.is_cached(row):  # type: ignore[attr-defined]
            related = field.get_cached_value(row)  # type: ignore[attr-defined]
            if related is not None and (
                related.pk is None or related.pk != getattr(row, field.attname)
            ):
                return None
    try:
        return json.dumps(
            [getattr(row, field.attname) for field in fields],
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=False,
        )
    except (TypeError, ValueError):
        return None


def _view_link_problem(uri: str, views: Collection[str]) -> str:
    """Why a tool may not link the view at ``uri`` (empty: it may)."""
    if not uri.startswith(apps.URI_SCHEME):
        return f"An MCP Apps view has a {apps.URI_SCHEME} URI."
    if uri in views:
        return ""
    resource = Resource.objects.filter(uri=uri).first()
    if resource is None:
        return f"No resource {uri!r} here: create the view first."
    if not resource.is_view:
        return (
            f"Resource {uri!r} has MIME type {resource.mime_type!r}, not {apps.MIME_TYPE!r}: "
            "it is not an MCP Apps view."
        )
    return ""


def _linked_view_problems(resource: Resource) -> dict[str, str]:
    """Why an edit of ``resource`` would break the links of tools to it (empty: none)."""
    before = Resource.objects.filter(pk=resource.pk).values_list("uri", flat=True).first()
    if before is None:
        return {}
    names = sorted(
        Tool.objects.filter(ui_resource_uri=before).values_list("name", flat=True).distinct()
    )
    if not names:
        return {}
    linked = f"Tools link this view ({', '.join(names)}): unlink them first."
    if resource.uri != before:
        return {"uri": linked}
    if not resource.is_view:
        return {"mime_type": linked}
    return {}


def catalog_row_save(
    row: CatalogRow,
    *,
    actor: Actor,
    source: str | None,
    relations: Mapping[str, Sequence[models.Model]] | None = None,
    upstreams: Collection[str] = (),
    views: Collection[str] = (),
    stored_files: Mapping[str, str] | None = None,
) -> None:
    """Check ``row`` (``catalog_row_check``), save it and set the ``relations`` given.

    ``relations``: many-to-many fields by name (an item's ``endpoints`` and
    ``allowed_groups``, an endpoint's ``tools``, ``resources``, ...) to set to exactly these
    rows; a field not given keeps its rows. History rows written name ``actor`` (a user, or
    None: the request's) and ``source`` (``history.ADMIN``, ...; None: the surrounding one).
    ``stored_files``: file fields checked from content in hand (an import's) that are saved
    naming these storage paths instead; the caller stores the content once the write stands.

    Raises:
        ValidationError: by field name; nothing was written.
    """
    with writing(row, actor=actor, source=source):
        relations = teams.relations_for(row, relations, history.acting_user())
        _check_review_on(row, relations)
        catalog_row_check(row, relations=relations, upstreams=upstreams, views=views)
        for name, path in (stored_files or {}).items():
            setattr(row, name, path)
        row.save()
        _relations_set(row, relations)


def catalog_row_relations_set(
    row: CatalogRow,
    *,
    relations: Mapping[str, Sequence[models.Model]],
    actor: Actor,
    source: str | None,
) -> None:
    """Set the many-to-many fields ``relations`` of the saved ``row`` alone (its values stay).

    Raises:
        ValidationError: a tool's name is taken on an endpoint it would join; nothing changed.
    """
    with writing(row, actor=actor, source=source):
        relations = teams.relations_for(row, relations, history.acting_user()) or {}
        _check_review_on(row, relations)
        if isinstance(row, Tool) and (endpoints := relations.get("endpoints")) is not None:
            _check_name_on(row, [endpoint.pk for endpoint in endpoints], "endpoints")
        _relations_set(row, relations)


def _check_review_on(
    row: CatalogRow, relations: Mapping[str, Sequence[models.Model]] | None
) -> None:
    """The review rule for the endpoints an item is being published on."""
    endpoints = (relations or {}).get("endpoints")
    if endpoints:
        review.check_may_change(
            row, history.acting_user(), endpoint_ids=[endpoint.pk for endpoint in endpoints]
        )


def _relations_set(row: CatalogRow, relations: Mapping[str, Sequence[models.Model]] | None) -> None:
    for name, rows in (relations or {}).items():
        getattr(row, name).set(rows)


def catalog_row_enable(row: CatalogRow, *, enabled: bool, actor: Actor, source: str | None) -> None:
    """Switch ``row`` on or off (saving that flag only).

    Switching on checks the row as it would go live (``catalog_row_check``), as the bulk
    ``catalog_rows_enable`` does: a synced tool whose config names a credential gone since
    stays off. Switching off is never refused: a row whose config stopped preparing (a
    python function removed) must still be switched off.

    Raises:
        ValidationError: the row cannot go live, by field name; nothing changed.
    """
    if row.enabled == enabled:
        return
    if enabled:
        row.enabled = True
        try:
            catalog_row_check(row)
        finally:
            row.enabled = False
    with writing(row, actor=actor, source=source):
        row.enabled = enabled
        row.save(update_fields=["enabled", "updated_at"])


def catalog_row_attach(
    row: Tool | Resource | ResourceTemplate | Prompt,
    *,
    endpoint_ids: Collection[int],
    actor: Actor,
    source: str | None,
) -> None:
    """Publish ``row`` on the endpoints ``endpoint_ids`` too (it keeps its others).

    Raises:
        ValidationError: a tool's name is taken on one of them ("endpoints"); nothing changed.
    """
    if not endpoint_ids:
        return
    with writing(row, actor=actor, source=source):
        teams.check_may_use(Endpoint.objects.filter(pk__in=endpoint_ids), history.acting_user())
        review.check_may_change(row, history.acting_user(), endpoint_ids=endpoint_ids)
        if isinstance(row, Tool):
            _check_name_on(row, endpoint_ids, "endpoints")
        row.endpoints.add(*endpoint_ids)


def catalog_row_detach(
    row: Tool | Resource | ResourceTemplate | Prompt,
    *,
    endpoint_ids: Collection[int],
    actor: Actor,
    source: str | None,
) -> None:
    """Stop publishing ``row`` on the endpoints ``endpoint_ids``."""
    if not endpoint_ids:
        return
    with writing(row, actor=actor, source=source):
        teams.check_may_use(Endpoint.objects.filter(pk__in=endpoint_ids), history.acting_user())
        review.check_may_change(row, history.acting_user(), endpoint_ids=endpoint_ids)
        row.endpoints.remove(*endpoint_ids)


# -- many rows at once (the admin's bulk actions): one transaction, so clients hear of the
# change once (``notify.list_changed_on_commit`` merges a transaction's announcements).

ItemRow = Tool | Resource | ResourceTemplate | Prompt

# The endpoint's many-to-many field publishing each kind of item.
_ENDPOINT_FIELD: dict[type[models.Model], str] = {
    Tool: "tools",
    Resource: "resources",
    ResourceTemplate: "resource_templates",
    Prompt: "prompts",
}
# Sent by ``catalog_rows_create`` once its rows are attached (sender: their model; keyword
# ``endpoint_ids``), as ``m2m_changed`` is for an ``add()``: signals.py bumps the catalog.
rows_attached = Signal()


def catalog_rows_enable(
    rows: Sequence[ItemRow], *, enabled: bool, actor: Actor, source: str | None
) -> list[ItemRow]:
    """Switch ``rows`` on or off, all or none; return those whose flag changed.

    A row being switched on passes ``catalog_row_check`` first (a synced tool whose config
    names a credential that is gone cannot go live); switching off is never refused, as for one
    row with ``catalog_row_enable``. Each row's history row names ``actor`` and ``source``.

    Raises:
        ValidationError: one message per row refused, naming it and why; nothing changed.
    """
    with transaction.atomic(), history.catalog_change(source=source, actor=actor):
        changing = _rows_flagged(rows, enabled=not enabled)
        if enabled:
            problems = []
            for row in changing:
                row.enabled = True
                try:
                    catalog_row_check(row)
                except ValidationError as exc:
                    problems.append(f"{_label(row)}: {' '.join(_messages(exc))}")
                finally:
                    row.enabled = False
            if problems:
                raise ValidationError(problems)
        with review.rows_checked(changing, history.acting_user()):
            for row in changing:
                with writing(row, actor=actor, source=source):
                    row.enabled = enabled
                    row.save(update_fields=["enabled", "updated_at"])
    return changing


def catalog_rows_publish(
    rows: Sequence[ItemRow],
    *,
    endpoints: Sequence[Endpoint],
    enable: bool = False,
    actor: Actor,
    source: str | None,
) -> None:
    """Publish ``rows`` (all of one model) on each of ``endpoints`` too and, with ``enable``,
    switch them on (``catalog_rows_enable``), all or none.

    Raises:
        ValidationError: tool names would clash on an endpoint, or a row cannot be enabled;
            nothing changed.
    """
    if not rows:
        return
    field = _ENDPOINT_FIELD[type(rows[0])]
    with transaction.atomic(), history.catalog_change(source=source, actor=actor):
        teams.check_may_use(rows, history.acting_user())
        if isinstance(rows[0], Tool):
            check_unique_tool_names(
                endpoint_ids=[endpoint.pk for endpoint in endpoints],
                tools=[(row.pk, row.name) for row in rows],
            )
        for endpoint in endpoints:
            with writing(endpoint, actor=actor, source=source):
                getattr(endpoint, field).add(*rows)
        if enable:
            catalog_rows_enable(rows, enabled=True, actor=actor, source=source)


def catalog_rows_unpublish(
    rows: Sequence[ItemRow], *, endpoints: Sequence[Endpoint], actor: Actor, source: str | None
) -> None:
    """Stop publishing ``rows`` (all of one model) on each of ``endpoints``."""
    if not rows:
        return
    field = _ENDPOINT_FIELD[type(rows[0])]
    with transaction.atomic(), history.catalog_change(source=source, actor=actor):
        teams.check_may_use(rows, history.acting_user())
        for endpoint in endpoints:
            with writing(endpoint, actor=actor, source=source):
                getattr(endpoint, field).remove(*rows)


@dataclass
class NewItem:
    """An unsaved item row for ``catalog_rows_create``, with what it is published on and who
    may see it."""

    row: ItemRow
    endpoints: Sequence[Endpoint] = ()
    groups: Sequence[Group] = ()


class RowsInvalid(ValidationError):
    """``catalog_rows_create`` refused: ``by_row`` holds each refused row's errors (its
    position in the rows given -> field -> messages); the messages name each row."""

    def __init__(self, by_row: Mapping[int, Mapping[str, Sequence[str]]], labels: Sequence[str]):
        self.by_row = {index: dict(errors) for index, errors in by_row.items()}
        super().__init__(
            [
                f"{labels[index]}: {message if name == '__all__' else f'{name}: {message}'}"
                for index, errors in sorted(self.by_row.items())
                for name, messages in errors.items()
                for message in messages
            ]
        )


def catalog_rows_create(
    items: Sequence[NewItem],
    *,
    actor: Actor,
    source: str | None,
    upstreams: Collection[str] = (),
    views: Collection[str] = (),
) -> None:
    """Create many new item rows of one model, each published on its ``endpoints`` with its
    ``groups`` allowed, in one transaction and a number of statements that does not grow with
    the rows (catalog import: ``services/catalog_io.py``).

    The same rules as ``catalog_row_save`` then ``catalog_row_attach`` of each row, so the
    result is the one row-by-row writes leave (rows, history rows stamped with ``actor`` and
    ``source``, membership history, one catalog change per endpoint), checked for the whole
    batch: ``teams.check_may_write`` and ``catalog_row_check`` per row, the endpoints used
    (``teams.check_may_use``) and their review rule (``review.check_may_change``) once, and
    tool names unique per endpoint against the database (one query) and within the batch.
    Rows are inserted with ``bulk_create`` (no model signals), so what the signals would do
    is done here: the history rows (with the groups' many-to-many history), the membership
    changes, and the catalog change (``rows_attached``: signals.py calls ``catalog_changed``).

    Prompt arguments and messages, and resource files, are not written here.

    Raises:
        RowsInvalid: a ValidationError naming each refused row; nothing was written.
        PermissionDenied: an endpoint or a row is another team's; nothing was written.
    """
    if not items:
        return
    model = type(items[0].row)
    if any(type(item.row) is not model or item.row.pk is not None for item in items):
        raise ValueError("catalog_rows_create takes new rows of one model.")
    errors: dict[int, dict[str, list[str]]] = {}
    with transaction.atomic(), history.catalog_change(source=source, actor=actor):
        user = history.acting_user()
        endpoint_ids = sorted({endpoint.pk for item in items for endpoint in item.endpoints})
        teams.check_may_use(Endpoint.objects.filter(pk__in=endpoint_ids), user)
        for index, item in enumerate(items):
            try:
                teams.check_may_write(item.row, user)
                teams.relations_for(
                    item.row,
                    {"endpoints": list(item.endpoints), "allowed_groups": list(item.groups)},
                    user,
                )
                # Names on the endpoints are checked below, for the batch at once.
                catalog_row_check(
                    item.row, relations={"endpoints": []}, upstreams=upstreams, views=views
                )
            except ValidationError as exc:
                _add_errors(errors, index, _by_field(exc))
        _check_review_of_new(items, endpoint_ids, user, errors)
        if model is Tool:
            _check_new_tool_names(items, endpoint_ids, errors)
        if errors:
            raise RowsInvalid(errors, [_label(item.row) for item in items])
        _rows_insert(model, items)
        rows_attached.send(sender=model, endpoint_ids=endpoint_ids)


def _add_errors(
    errors: dict[int, dict[str, list[str]]], index: int, found: Mapping[str, Sequence[str]]
) -> None:
    for name, messages in found.items():
        errors.setdefault(index, {}).setdefault(name, []).extend(messages)


def _check_review_of_new(
    items: Sequence[NewItem],
    endpoint_ids: Collection[int],
    user: Any,
    errors: dict[int, dict[str, list[str]]],
) -> None:
    """The review rule for the endpoints new rows are published on (one query)."""
    try:
        review.check_may_change(items[0].row, user, endpoint_ids=endpoint_ids)
    except ValidationError:
        reviewed = set(review.reviewed_slugs(items[0].row, endpoint_ids))
        for index, item in enumerate(items):
            if slugs := reviewed & {endpoint.slug for endpoint in item.endpoints}:
                _add_errors(errors, index, {"__all__": [review.review_message(slugs)]})


def _check_new_tool_names(
    items: Sequence[NewItem],
    endpoint_ids: Collection[int],
    errors: dict[int, dict[str, list[str]]],
) -> None:
    """Tool names unique per endpoint: against the endpoints' tools (one query) and within
    the batch, where the later rows are refused, as row-by-row attaches would refuse them."""
    names = {item.row.name for item in items if isinstance(item.row, Tool)}
    taken: set[tuple[int, str]] = set(
        Endpoint.tools.through.objects.filter(endpoint_id__in=endpoint_ids, tool__name__in=names)
        .values_list("endpoint_id", "tool__name")
        .distinct()
    )
    for index, item in enumerate(items):
        assert isinstance(item.row, Tool)
        problems = [
            f"Endpoint {endpoint.slug!r} already has another tool named {item.row.name!r}."
            for endpoint in sorted(item.endpoints, key=lambda endpoint: endpoint.slug)
            if (endpoint.pk, item.row.name) in taken
        ]
        if problems:
            _add_errors(errors, index, {"endpoints": problems})
        taken.update((endpoint.pk, item.row.name) for endpoint in item.endpoints)


def _rows_insert(model: Any, items: Sequence[NewItem]) -> None:
    """Insert the checked rows, their relations and every history row their save and
    ``set``/``add`` calls would write, with the same values and in the same order, in a few
    statements whatever the number of rows."""
    model._default_manager.bulk_create([item.row for item in items])
    group_through = model.allowed_groups.through
    group_column = _item_column(group_through)
    links = group_through._default_manager.bulk_create(
        group_through(**{group_column: item.row.pk, "group_id": group.pk})
        for item in items
        for group in sorted(item.groups, key=lambda group: group.pk)
    )
    _history_insert(model, items, links, group_column)
    through = history.through_of(model)
    column = _item_column(through)
    pairs = [
        (endpoint_id, item.row.pk)
        for item in items
        for endpoint_id in sorted({endpoint.pk for endpoint in item.endpoints})
    ]
    through._default_manager.bulk_create(
        through(endpoint_id=endpoint_id, **{column: item_id}) for endpoint_id, item_id in pairs
    )
    history.record_membership(through, pairs, MembershipChange.Action.ADDED)


def _item_column(through: type[models.Model]) -> str:
    """The column of a through table naming the item (not the endpoint, not the group)."""
    return next(
        field.attname
        for field in through._meta.concrete_fields
        if field.many_to_one and field.attname not in ("endpoint_id", "group_id")
    )


def _history_insert(
    model: Any, items: Sequence[NewItem], links: Sequence[Any], column: str
) -> None:
    """Write the history rows simple-history writes for each row's save ("+", no groups yet)
    and, when it has groups, for ``allowed_groups.set()`` ("~", with its groups' rows: the
    ``links`` whose ``column`` names it), stamped as ``history.stamp_history_row`` stamps
    them. ``allowed_groups`` is the one many-to-many field the item models' history keeps."""
    history_model = model.history.model
    user, now = history.acting_user(), timezone.now()
    by_row: dict[int, list[Any]] = {}
    for link in links:
        by_row.setdefault(getattr(link, column), []).append(link)
    records = []
    for item in items:
        for kind in ("+", "~") if item.row.pk in by_row else ("+",):
            record = history_model(
                history_date=now,
                history_type=kind,
                history_user=user,
                history_change_reason=get_change_reason_from_object(item.row),
                **{field.attname: getattr(item.row, field.attname) for field in
                   history_model.tracked_fields},
            )  # fmt: skip
            history.stamp_history_row(record)
            records.append(record)
    history_model._default_manager.bulk_create(records)
    m2m_model = next(
        relation.related_model
        for relation in history_model._meta.related_objects
        if relation.field.name == "history"
        and relation.related_model.__name__.endswith("_allowed_groups")
    )
    names = [field.attname for field in model.allowed_groups.through._meta.concrete_fields]
    m2m_model._default_manager.bulk_create(
        m2m_model(history=record, **{name: getattr(link, name) for name in names})
        for record in records
        if record.history_type == "~"
        for link in by_row[record.id]
    )


def _rows_flagged(rows: Sequence[ItemRow], *, enabled: bool) -> list[ItemRow]:
    """Those of ``rows`` whose stored flag is ``enabled``, locked until the transaction ends
    (what a form set in memory does not count)."""
    if not rows:
        return []
    model = type(rows[0])
    stored = set(
        model._default_manager.select_for_update()
        .filter(pk__in=[row.pk for row in rows], enabled=enabled)
        .values_list("pk", flat=True)
    )
    return [row for row in rows if row.pk in stored]


def _label(row: models.Model) -> str:
    return f"{row._meta.verbose_name} {row}"


def _messages(exc: ValidationError) -> list[str]:
    return [
        message if name == "__all__" else f"{name}: {message}"
        for name, found in _by_field(exc).items()
        for message in found
    ]


def _check_name_on_current_endpoints(tool: Tool) -> None:
    """``check_unique_tool_names`` for a saved tool staying on its endpoints, in one query.

    Raises:
        ValidationError: another tool of its endpoints has its name.
    """
    through = Endpoint.tools.through
    clashes = (
        through.objects.filter(
            endpoint_id__in=through.objects.filter(tool_id=tool.pk).values("endpoint_id"),
            tool__name=tool.name,
        )
        .exclude(tool_id=tool.pk)
        .values_list("endpoint__slug", flat=True)
        .order_by("endpoint__slug")
        .distinct()
    )
    if problems := [
        f"Endpoint {slug!r} already has another tool named {tool.name!r}." for slug in clashes
    ]:
        raise ValidationError(problems)


def _check_name_on(tool: Tool, endpoint_ids: Collection[int], field: str) -> None:
    try:
        check_unique_tool_names(endpoint_ids=endpoint_ids, tools=[(tool.pk, tool.name)])
    except ValidationError as exc:
        raise ValidationError({field: exc.messages}) from None


def config_references(tool: Tool) -> Sequence[ConfigReference]:
    """The rows ``tool``'s config names (its kind's executor says; none for an unknown kind)."""
    executor = get_executors().get(tool.kind)
    try:
        return executor.config_references(tool.config or {}) if executor is not None else ()
    except ConfigError:
        return ()


def _tool_config_problems(
    tool: Tool, upstreams: Collection[str], *, references_only: bool = False
) -> dict[str, str]:
    """What the tool's (valid) config names that does not exist, or ties wrongly to its
    input schema, by ``config.<key>``; with ``references_only``, only what it names (the
    ties read the config and the schema alone: ``row_checks_remembered``)."""
    executor = get_executors().get(tool.kind)
    if executor is None:
        return {}
    config = tool.config or {}
    problems: dict[str, str] = {}
    for reference in executor.config_references(config):
        model = _REFERENCE_MODELS[reference.target]
        if reference.target == "upstream" and reference.name in upstreams:
            continue
        # Inside a write, only rows the acting user sees count (another team's are "no ...").
        named = model._default_manager.filter(name=reference.name)
        if not teams.visible(named, history.acting_user()).exists():
            problems[f"config.{reference.key}"] = (
                f"No {reference.target} named {reference.name!r} here."
            )
    if references_only:
        return problems
    try:
        found = executor.config_problems(config, tool.input_schema)
    except ConfigError as exc:  # prepare() refuses such a config first; kept for safety
        found = {"": exc.message}
    problems.update(
        (f"config.{key}" if key else "config", message) for key, message in found.items()
    )
    return problems


def _by_field(exc: ValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return {
            name: [message for error in errors for message in error.messages]
            for name, errors in exc.error_dict.items()
        }
    return {"__all__": list(exc.messages)}


def check_unique_tool_names(
    *, endpoint_ids: Iterable[int], tools: Sequence[tuple[int | None, str]]
) -> None:
    """Check that ``tools`` can join ``endpoint_ids`` without two tools sharing a name.

    ``tools`` are ``(pk or None for an unsaved tool, name)`` pairs being attached (or renamed);
    the endpoints' other tools are looked up in one query. A name must be unique per endpoint
    (2025-11-25 server/tools "Tool names"), so ``tools/call`` always knows which row to run.

    Raises:
        ValidationError: the messages name each clash.
    """
    counts: dict[str, int] = {}
    for _pk, name in tools:
        counts[name] = counts.get(name, 0) + 1
    problems = [
        f"Two of the selected tools are named {name!r}."
        for name, count in sorted(counts.items())
        if count > 1
    ]
    ids = sorted(set(endpoint_ids))
    if ids and tools:
        clashes = (
            Endpoint.tools.through.objects.filter(
                endpoint_id__in=ids, tool__name__in={name for _pk, name in tools}
            )
            .exclude(tool_id__in=[pk for pk, _name in tools if pk is not None])
            .values_list("endpoint__slug", "tool__name")
            .order_by("endpoint__slug", "tool__name")
            .distinct()
        )
        problems.extend(
            f"Endpoint {slug!r} already has another tool named {name!r}." for slug, name in clashes
        )
    if problems:
        raise ValidationError(problems)


def check_tools_attachable(*, endpoint_id: int, tool_ids: Iterable[int]) -> None:
    """Check that the tools ``tool_ids`` can be added to endpoint ``endpoint_id``.

    Raises:
        ValidationError: a name would appear twice on the endpoint.
    """
    tools = list(Tool.objects.filter(pk__in=list(tool_ids)).values_list("pk", "name"))
    check_unique_tool_names(endpoint_ids=[endpoint_id], tools=tools)


# -- one call per row, for code holding plain values (the seed, OpenAPI import, the shell)


def endpoint_create(
    *, slug: str, actor: Actor = None, source: str | None = None, **fields: Any
) -> Endpoint:
    """Create an endpoint (OAuth-protected unless ``auth_mode`` says) from its field values.

    Raises:
        ValidationError: a field is invalid (e.g. the slug is taken).
    """
    endpoint = Endpoint(slug=slug, **fields)
    catalog_row_save(endpoint, actor=actor, source=source)
    return endpoint


def tool_create(
    *, endpoints: Iterable[Endpoint] = (), actor: Actor = None, source: str | None = None,
    **data: Any,
) -> Tool:  # fmt: skip
    """Create a tool from its field values (``name``, ``kind``, ``config``, ...) and publish it
    on ``endpoints``; what ``data`` omits comes from what the config declares (``tool_values``).

    Raises:
        ValidationError: a field is invalid, the config names a missing row, or the name is
            taken on one of the endpoints.
    """
    tool = Tool(**tool_values(tool=None, data=data))
    catalog_row_save(tool, actor=actor, source=source, relations={"endpoints": list(endpoints)})
    return tool


def tool_update(
    *, tool: Tool, data: Mapping[str, Any], endpoints: Iterable[Endpoint] | None = None,
    actor: Actor = None, source: str | None = None,
) -> Tool:  # fmt: skip
    """Change the fields ``data`` gives (and, given, the endpoints) of ``tool``.

    Raises:
        ValidationError: as ``tool_create``; nothing was written.
    """
    for name, value in tool_values(tool=tool, data=data).items():
        setattr(tool, name, value)
    relations = {"endpoints": list(endpoints)} if endpoints is not None else None
    catalog_row_save(tool, actor=actor, source=source, relations=relations)
    return tool


def resource_create(
    *, uri: str, name: str, endpoints: Iterable[Endpoint] = (), actor: Actor = None,
    source: str | None = None, **fields: Any,
) -> Resource:  # fmt: skip
    """Create a resource and publish it on ``endpoints``.

    Raises:
        ValidationError: a field is invalid (e.g. the URI is taken).
    """
    resource = Resource(uri=uri, name=name, **fields)
    catalog_row_save(resource, actor=actor, source=source, relations={"endpoints": list(endpoints)})
    return resource


def resource_template_create(
    *, uri_template: str, name: str, kind: str, config: Mapping[str, Any],
    endpoints: Iterable[Endpoint] = (), actor: Actor = None, source: str | None = None,
    **fields: Any,
) -> ResourceTemplate:  # fmt: skip
    """Create a resource template and publish it on ``endpoints``.

    Raises:
        ValidationError: a field is invalid.
    """
    template = ResourceTemplate(
        uri_template=uri_template, name=name, kind=kind, config=dict(config), **fields
    )
    catalog_row_save(template, actor=actor, source=source, relations={"endpoints": list(endpoints)})
    return template


def prompt_create(
    *, name: str, description: str, arguments: Sequence[Mapping[str, Any]] = (),
    messages: Sequence[Mapping[str, Any]] = (), endpoints: Iterable[Endpoint] = (),
    actor: Actor = None, source: str | None = None, **fields: Any,
) -> Prompt:  # fmt: skip
    """Create a prompt with its ordered arguments and messages, published on ``endpoints``.

    ``arguments`` and ``messages`` hold PromptArgument / PromptMessage field values; their
    order becomes ``position``.

    Raises:
        ValidationError: a field is invalid.
    """
    prompt = Prompt(name=name, description=description, **fields)
    with writing(prompt, actor=actor, source=source):  # all or nothing
        catalog_row_save(
            prompt, actor=actor, source=source, relations={"endpoints": list(endpoints)}
        )
        prompt_parts_set(
            prompt,
            arguments=[PromptArgument(**values) for values in arguments],
            messages=[PromptMessage(**values) for values in messages],
            actor=actor,
            source=source,
        )
    return prompt


UPSTREAM_PROMPT_MESSAGES = "A prompt from an upstream gets its messages there: it has none here."


def prompt_messages_check(prompt: Prompt, messages: Sequence[Any]) -> None:
    """Check that ``prompt`` may have ``messages`` (those it will have after the write).

    Raises:
        ValidationError: "messages": a prompt read from an upstream has none of its own.
    """
    if prompt.upstream is not None and messages:
        raise ValidationError({"messages": [UPSTREAM_PROMPT_MESSAGES]})


def prompt_parts_set(
    prompt: Prompt,
    *,
    arguments: Sequence[PromptArgument] | None,
    messages: Sequence[PromptMessage] | None,
    actor: Actor,
    source: str | None,
    message_files: Sequence[str | None] = (),
) -> None:
    """Replace the saved ``prompt``'s arguments and/or messages (None: keep them) by these
    unsaved rows, in this order (their ``position``).

    ``message_files``: by message, the storage path to save instead of the file content the
    message was checked with (an import's, stored by the caller), or None.

    Raises:
        ValidationError: a part is invalid; nothing was written.
    """
    with writing(prompt, actor=actor, source=source):
        if messages is not None:
            prompt_messages_check(prompt, messages)
        if arguments is not None:
            prompt.arguments.all().delete()
            _parts_save(prompt, arguments, ())
        if messages is not None:
            prompt.messages.all().delete()
            _parts_save(prompt, messages, message_files)


def prompt_part_save(
    part: PromptArgument | PromptMessage, *, actor: Actor, source: str | None
) -> None:
    """Check and save one argument or message of a saved prompt (the admin's inline rows).

    Raises:
        ValidationError: the part is invalid, or a message of a prompt read from an upstream.
    """
    with writing(part.prompt, actor=actor, source=source):
        if isinstance(part, PromptMessage):
            prompt_messages_check(part.prompt, [part])
        part.full_clean()
        part.save()


def prompt_part_delete(
    part: PromptArgument | PromptMessage, *, actor: Actor, source: str | None
) -> None:
    """Delete one argument or message of a prompt."""
    with writing(part.prompt, actor=actor, source=source):
        part.delete()


def _parts_save(
    prompt: Prompt,
    parts: Sequence[PromptArgument | PromptMessage],
    files: Sequence[str | None],
) -> None:
    for position, part in enumerate(parts):
        part.prompt = prompt
        part.position = position
        part.full_clean()
        path = files[position] if position < len(files) else None
        if path is not None and isinstance(part, PromptMessage):
            part.file = path  # a stored name, as Django allows
        part.save()
