"""Many new tools at once (``catalog_rows_create``, used by catalog import) leave what the
same tools saved one by one through ``catalog_row_save`` leave: the rows, their history rows
(with the groups' history), the membership history, one version bump and one list_changed per
endpoint; and refuse the whole batch, naming each bad row, when one breaks a rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max, Model
from django.test import override_settings

from bench import catalog_bulk
from mcp_app.models import Endpoint, MembershipChange, Tool
from mcp_app.services import history, notify, review
from mcp_app.services.catalog_changes import catalog_changes_coalesced
from mcp_app.services.catalog_io import BULK_CHUNK, CatalogImportError, catalog_import
from mcp_app.services.catalog_writes import (
    NewItem,
    RowsInvalid,
    catalog_row_check,
    catalog_row_save,
    catalog_rows_create,
    endpoint_create,
    row_checks_remembered,
    tool_create,
    tool_values,
)
from tests.support.waiting import WAIT_SECONDS

SENTINEL = {"type": "test.sentinel"}
# name, endpoint letters, group names
SPECS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("greet", "a", ()),
    ("shout", "ab", ("callers",)),
    ("whisper", "b", ()),
    ("unpublished", "", ("callers", "others")),
)


def tool_row(name: str) -> Tool:
    return Tool(
        **tool_values(
            tool=None,
            data={
                "name": name,
                "description": f"Says {name}.",
                "kind": "template",
                "config": {"template": "Hello {{ name }}"},
                "input_schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
            },
        )
    )


def endpoints_of(suffix: str) -> dict[str, Endpoint]:
    return {
        letter: endpoint_create(slug=f"{letter}{suffix}", auth_mode="public") for letter in "ab"
    }


def items_of(endpoints: dict[str, Endpoint]) -> list[NewItem]:
    groups = {group.name: group for group in Group.objects.all()}
    return [
        NewItem(
            row=tool_row(name),
            endpoints=[endpoints[letter] for letter in letters],
            groups=[groups[group] for group in group_names],
        )
        for name, letters, group_names in SPECS
    ]


def state_since(marks: dict[str, int], endpoints: dict[str, Endpoint]) -> dict[str, Any]:
    """What the write after ``marks`` left, with ids, dates and the endpoints' suffix out."""
    letter_of = {endpoint.pk: letter for letter, endpoint in endpoints.items()}
    unshown = {"id", "created_at", "updated_at"}
    fields = [f.attname for f in Tool._meta.concrete_fields if f.attname not in unshown]
    tools = Tool.objects.filter(pk__gt=marks["tool"]).order_by("pk")
    records = Tool.history.filter(history_id__gt=marks["history"]).order_by("history_id")
    return {
        "tools": [
            (
                [getattr(tool, name) for name in fields],
                sorted(letter_of[endpoint.pk] for endpoint in tool.endpoints.all()),
                sorted(group.name for group in tool.allowed_groups.all()),
            )
            for tool in tools
        ],
        "history": [
            (
                [getattr(record, name) for name in fields],
                record.history_type,
                record.history_change_reason,
                record.history_user_id,
                sorted(link.group.name for link in record.allowed_groups.all()),
            )
            for record in records
        ],
        "membership": [
            (
                letter_of[change.endpoint_id],
                change.kind,
                change.item_name,
                change.action,
                change.changed_by_id,
                change.source,
            )
            for change in MembershipChange.objects.filter(pk__gt=marks["membership"]).order_by("pk")
        ],  # fmt: skip
        "versions": sorted(
            (letter, endpoint.catalog_version - marks[f"version {letter}"])
            for letter, endpoint in (
                (k, Endpoint.objects.get(pk=e.pk)) for k, e in endpoints.items()
            )
        ),  # fmt: skip
    }


def marks_of(endpoints: dict[str, Endpoint]) -> dict[str, int]:
    def top(queryset: Any, name: str) -> int:
        return queryset.aggregate(top=Max(name))["top"] or 0

    return {
        "tool": top(Tool.objects, "pk"),
        "history": top(Tool.history, "history_id"),
        "membership": top(MembershipChange.objects, "pk"),
        **{
            f"version {letter}": Endpoint.objects.get(pk=endpoint.pk).catalog_version
            for letter, endpoint in endpoints.items()
        },
    }


async def announced(endpoints: dict[str, Endpoint], write: Callable[[], None]) -> list[Any]:
    """Commit ``write`` in a worker thread and return the list_changed messages the streams of
    ``endpoints`` got, as each heard it.

    One listener per endpoint, all on this test's one event loop (the channel layer's
    connections belong to it); each is read up to a marker sent through its group after the
    commit, within a bound, so a message that never comes fails the test."""
    messages = []
    listeners = {letter: notify.GroupListener(notify.endpoint_group(endpoint.pk))
                 for letter, endpoint in endpoints.items()}  # fmt: skip
    for listener in listeners.values():
        await listener.__aenter__()
    try:
        await sync_to_async(committed(write))()
        for letter, listener in listeners.items():
            await notify._asend(listener.groups[0], SENTINEL)
            while (message := await listener.next(WAIT_SECONDS)) != SENTINEL:
                assert message is not None, f"the marker never reached endpoint {letter}"
                messages.append((letter, message["type"], message.get("kinds")))
    finally:
        for listener in listeners.values():
            await listener.__aexit__(None, None, None)
    return sorted(messages)


def committed(change: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        with transaction.atomic():
            return change()

    return run


# Committed, so the streams hear of it: the database is emptied after the test, not rolled back.
@pytest.mark.django_db(transaction=True)
@override_settings(MCP_LIST_CHANGED_COALESCE_SECONDS=0)
async def test_a_bulk_created_catalog_is_the_one_row_by_row_writes_leave() -> None:
    def arrange() -> tuple[User, dict[str, Endpoint], dict[str, Endpoint]]:
        actor = User.objects.create_superuser("importer", password="unused-password-123")
        Group.objects.create(name="callers")
        Group.objects.create(name="others")
        return actor, endpoints_of("1"), endpoints_of("2")

    actor, one_by_one, in_bulk = await sync_to_async(committed(arrange))()

    def row_by_row() -> None:
        with catalog_changes_coalesced():
            for item in items_of(one_by_one):
                relations = {"endpoints": list(item.endpoints)}
                if item.groups:
                    relations["allowed_groups"] = list(item.groups)  # type: ignore[arg-type]
                catalog_row_save(item.row, actor=actor, source=history.IMPORT, relations=relations)

    marks = await sync_to_async(marks_of)(one_by_one)
    row_by_row_notices = await announced(one_by_one, row_by_row)
    expected = await sync_to_async(state_since)(marks, one_by_one)

    marks = await sync_to_async(marks_of)(in_bulk)
    bulk_notices = await announced(
        in_bulk,
        lambda: catalog_rows_create(items_of(in_bulk), actor=actor, source=history.IMPORT),
    )
    found = await sync_to_async(state_since)(marks, in_bulk)

    assert found == expected
    assert (
        bulk_notices
        == row_by_row_notices
        == [
            ("a", notify.LIST_CHANGED, ["tools"]),
            ("b", notify.LIST_CHANGED, ["tools"]),
        ]
    )
    # What the comparison covers: a "+" version per tool, then a "~" one with its groups.
    assert [(record[1], record[4]) for record in found["history"]] == [
        ("+", []), ("+", []), ("~", ["callers"]), ("+", []), ("+", []),
        ("~", ["callers", "others"]),
    ]  # fmt: skip
    assert {record[2] for record in found["history"]} == {history.IMPORT}
    assert {record[3] for record in found["history"]} == {actor.pk}
    assert [change[:4] for change in found["membership"]] == [
        ("a", "tool", "greet", "+"), ("a", "tool", "shout", "+"), ("b", "tool", "shout", "+"),
        ("b", "tool", "whisper", "+"),
    ]  # fmt: skip
    assert found["versions"] == [("a", 1), ("b", 1)]


@pytest.mark.django_db
def test_a_bad_row_refuses_the_whole_batch_naming_each_row() -> None:
    endpoints = endpoints_of("")
    tool_create(
        name="taken",
        description="Says hi.",
        kind="template",
        config={"template": "Hi"},
        endpoints=[endpoints["a"]],
    )
    before = (Tool.objects.count(), Tool.history.count(), MembershipChange.objects.count())
    versions = marks_of(endpoints)
    bad_config = tool_row("broken")
    bad_config.config = {"template": "{% if %}"}
    items = [
        NewItem(row=tool_row("fine"), endpoints=[endpoints["a"]]),
        NewItem(row=tool_row("taken"), endpoints=[endpoints["a"], endpoints["b"]]),
        NewItem(row=bad_config, endpoints=[endpoints["b"]]),
        NewItem(row=tool_row("twice"), endpoints=[endpoints["b"]]),
        NewItem(row=tool_row("twice"), endpoints=[endpoints["a"], endpoints["b"]]),
    ]

    with pytest.raises(RowsInvalid) as raised:
        catalog_rows_create(items, actor=None, source=history.IMPORT)

    assert sorted(raised.value.by_row) == [1, 2, 4]
    assert raised.value.by_row[1] == {
        "endpoints": ["Endpoint 'a' already has another tool named 'taken'."]
    }
    assert [name for name in raised.value.by_row[2]] == ["config"]
    assert raised.value.by_row[4] == {
        "endpoints": ["Endpoint 'b' already has another tool named 'twice'."]
    }
    assert isinstance(raised.value, ValidationError)
    assert [message.split(":")[0] for message in raised.value.messages] == [
        "tool taken", "tool broken", "tool twice",
    ]  # fmt: skip
    assert (Tool.objects.count(), Tool.history.count(), MembershipChange.objects.count()) == before
    assert marks_of(endpoints) == versions


@pytest.mark.django_db
def test_the_review_rule_refuses_the_rows_it_touches() -> None:
    endpoints = endpoints_of("")
    Endpoint.objects.filter(pk=endpoints["b"].pk).update(require_review=True)
    endpoints["b"].refresh_from_db()
    actor = User.objects.create_superuser("reviewer", password="unused-password-123")
    items = [
        NewItem(row=tool_row("free"), endpoints=[endpoints["a"]]),
        NewItem(row=tool_row("held"), endpoints=[endpoints["b"]]),
    ]

    with pytest.raises(RowsInvalid) as raised:
        catalog_rows_create(items, actor=actor, source=history.IMPORT)

    assert sorted(raised.value.by_row) == [1]
    assert "Endpoint b requires review" in raised.value.by_row[1]["__all__"][0]
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_an_import_writing_new_tools_in_bulk_keeps_the_review_rule() -> None:
    endpoints = endpoints_of("")
    Endpoint.objects.filter(pk=endpoints["b"].pk).update(require_review=True)
    actor = User.objects.create_superuser("importer", password="unused-password-123")
    document = {
        "format": "mcphost-catalog/1",
        "endpoints": [{"slug": slug, "auth_mode": "public"} for slug in "ab"],
        "tools": [
            {
                "name": name,
                "description": "Says hi.",
                "kind": "template",
                "config": {"template": "Hi"},
                "endpoints": [slug],
            }
            for name, slug in (("free", "a"), ("held", "b"))
        ],
    }

    with pytest.raises(CatalogImportError) as raised:
        catalog_import(document=document, user=actor)

    assert [str(error).split(":")[0] for error in raised.value.errors] == ["tools[1] (held)"]
    assert "Endpoint b requires review" in str(raised.value)
    assert not Tool.objects.exists()
    # An approved draft's publish goes through.
    with review.publishing_draft():
        catalog_import(document=document, user=actor)
    assert sorted(Tool.objects.values_list("name", flat=True)) == ["free", "held"]


def refusal(row: Tool) -> dict[str, list[str]]:
    """What ``catalog_row_check`` says of ``row``, checked afresh."""
    try:
        catalog_row_check(row)
    except ValidationError as exc:
        return exc.message_dict
    return {}


def broken(rows: dict[str, Tool]) -> None:
    """Break each row but "kept" in a way only its model's own rules catch, some in place."""
    rows["blank"].description = "   "
    rows["schema"].input_schema["properties"]["name"]["maxLength"] = -1
    rows["inline"].execution_mode, rows["inline"].task_support = "inline", "required"
    rows["template"].config["template"] = "{% if %}"


@pytest.mark.django_db
def test_a_row_checked_before_is_checked_again_once_its_values_change() -> None:
    # Inside row_checks_remembered (a catalog import), a row catalog_row_check passed is not
    # held again to the rules reading its values alone while they stay as they were: any
    # change, even inside its schema or config, and it is checked in full.
    endpoint = endpoints_of("")["a"]
    rows = {name: tool_row(name) for name in ("blank", "schema", "inline", "template", "kept")}
    fresh = {name: tool_row(name) for name in rows}
    broken(fresh)
    expected = {index: refusal(row) for index, row in enumerate(fresh.values()) if refusal(row)}

    with row_checks_remembered():
        for row in rows.values():
            catalog_row_check(row)
        broken(rows)
        with pytest.raises(RowsInvalid) as raised:
            catalog_rows_create(
                [NewItem(row=row, endpoints=[endpoint]) for row in rows.values()],
                actor=None,
                source=history.IMPORT,
            )

    assert raised.value.by_row == expected
    assert expected[0] == {"description": ["A tool needs a description."]}
    assert expected[1] == {
        "input_schema": [
            "Input schema is not a valid JSON Schema 2020-12 at /properties/name/maxLength: "
            "-1 is less than the minimum of 0"
        ]
    }
    assert expected[2] == {
        "task_support": ["An inline tool cannot require tasks: tasks run on a worker."]
    }
    assert list(expected[3]) == ["config"] and sorted(expected) == [0, 1, 2, 3]
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_a_row_checked_before_is_still_held_to_what_the_database_holds(monkeypatch: Any) -> None:
    cleaned: list[Model] = []
    full_clean = Model.full_clean

    def counted(self: Model, *args: Any, **kwargs: Any) -> None:
        cleaned.append(self)
        full_clean(self, *args, **kwargs)

    monkeypatch.setattr(Model, "full_clean", counted)
    endpoint = Endpoint(slug="late", auth_mode="public")
    with row_checks_remembered():
        catalog_row_check(endpoint)
        catalog_row_check(endpoint)
        assert cleaned == [endpoint]  # its own rules once
        endpoint_create(slug="late", auth_mode="public")  # meanwhile, another takes the slug
        cleaned.clear()
        with pytest.raises(ValidationError) as raised:
            catalog_row_check(endpoint)

    assert cleaned == []  # only the unique check ran again, and refused
    assert raised.value.message_dict == {"slug": ["Endpoint with this Slug already exists."]}
    # Outside the block every check is in full.
    catalog_row_check(tool := tool_row("outside"))
    catalog_row_check(tool)
    assert cleaned == [tool, tool]


@pytest.mark.django_db
def test_an_import_of_many_tools_refuses_each_bad_one_with_its_message() -> None:
    # More tools than a chunk of catalog_rows_create, many schemas: each check still bites.
    count = BULK_CHUNK + 500
    document: dict[str, Any] = catalog_bulk.document(tools=count, endpoints=1)
    tools = document["tools"]
    tools[321]["description"] = "   "
    tools[1234]["input_schema"]["properties"]["name"]["maxLength"] = -1
    tools[count - 1]["execution_mode"] = "inline"
    tools[count - 1]["task_support"] = "required"

    with pytest.raises(CatalogImportError) as raised:
        catalog_import(document=document)

    assert [str(error) for error in raised.value.errors] == [
        "tools[321].description (tool_00321): A tool needs a description.",
        "tools[1234].input_schema (tool_01234): Input schema is not a valid JSON Schema 2020-12 "
        "at /properties/name/maxLength: -1 is less than the minimum of 0",
        f"tools[{count - 1}].task_support (tool_{count - 1:05d}): An inline tool cannot "
        "require tasks: tasks run on a worker.",
    ]
    assert not Tool.objects.exists()
