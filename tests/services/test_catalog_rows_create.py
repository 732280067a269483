"""Many new tools at once (``catalog_rows_create``, used by catalog import) leave what the
same tools saved one by one through ``catalog_row_save`` leave: the rows, their history rows
(with the groups' history), the membership history, one version bump and one list_changed per
endpoint; and refuse the whole batch, naming each bad row, when one breaks a rule."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from mcp_app.models import Endpoint, MembershipChange, Tool
from mcp_app.services import history, notify
from mcp_app.services.catalog_changes import catalog_changes_coalesced
from mcp_app.services.catalog_writes import (
    NewItem,
    RowsInvalid,
    catalog_row_save,
    catalog_rows_create,
    endpoint_create,
    tool_create,
    tool_values,
)

pytestmark = pytest.mark.django_db

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


@pytest.fixture
def announced(
    django_capture_on_commit_callbacks: Any,
) -> Iterator[Callable[[dict[str, Endpoint], Callable[[], None]], list[Any]]]:
    """Run a write, commit it, and return the list_changed messages its endpoints' streams got."""
    layer = get_channel_layer()

    def run(endpoints: dict[str, Endpoint], write: Callable[[], None]) -> list[Any]:
        channel = async_to_sync(layer.new_channel)()
        letter_of = {endpoint.pk: letter for letter, endpoint in endpoints.items()}
        for endpoint in endpoints.values():
            async_to_sync(layer.group_add)(notify.endpoint_group(endpoint.pk), channel)
        with django_capture_on_commit_callbacks(execute=True):
            write()
        async_to_sync(layer.send)(channel, SENTINEL)
        messages = []
        while (message := async_to_sync(layer.receive)(channel))["type"] != SENTINEL["type"]:
            group = message[notify.GROUP_KEY]
            endpoint_id = next(pk for pk in letter_of if notify.endpoint_group(pk) == group)
            messages.append((letter_of[endpoint_id], message["type"], message.get("kinds")))
        for endpoint in endpoints.values():
            async_to_sync(layer.group_discard)(notify.endpoint_group(endpoint.pk), channel)
        return sorted(messages)

    yield run


def test_a_bulk_created_catalog_is_the_one_row_by_row_writes_leave(announced: Any) -> None:
    actor = User.objects.create_superuser("importer", password="unused-password-123")
    Group.objects.create(name="callers")
    Group.objects.create(name="others")

    one_by_one = endpoints_of("1")
    marks = marks_of(one_by_one)

    def row_by_row() -> None:
        with transaction.atomic(), catalog_changes_coalesced():
            for item in items_of(one_by_one):
                relations = {"endpoints": list(item.endpoints)}
                if item.groups:
                    relations["allowed_groups"] = list(item.groups)  # type: ignore[arg-type]
                catalog_row_save(item.row, actor=actor, source=history.IMPORT, relations=relations)

    row_by_row_notices = announced(one_by_one, row_by_row)
    expected = state_since(marks, one_by_one)

    in_bulk = endpoints_of("2")
    marks = marks_of(in_bulk)
    bulk_notices = announced(
        in_bulk,
        lambda: catalog_rows_create(items_of(in_bulk), actor=actor, source=history.IMPORT),
    )
    found = state_since(marks, in_bulk)

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


def test_a_bad_row_refuses_the_whole_batch_naming_each_row() -> None:
    endpoints = endpoints_of("")
    tool_create(
        name="taken", kind="template", config={"template": "Hi"}, endpoints=[endpoints["a"]]
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
