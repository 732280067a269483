"""Catalog history in the admin: rows for every edit, a diff of any two versions, revert through
the admin form (its validation and the catalog signals), recent changes, and no secrets."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test import Client
from django.urls import reverse

from mcp_app.models import (
    Credential,
    Endpoint,
    MembershipChange,
    Prompt,
    PromptArgument,
    PromptMessage,
    Tool,
)
from mcp_app.protocol.handlers.prompts import render_prompt
from mcp_app.services import history, invalidation
from mcp_app.services.catalog_writes import endpoint_create, prompt_create, tool_create
from mcp_app.services.credentials import credential_create
from mcp_app.services.snapshots import build_snapshot
from tests.admin.conftest import tool_payload
from tests.admin.test_credential_admin import SECRET, credential_payload
from tests.audit.factories import make_call

pytestmark = pytest.mark.django_db

WAIT_SECONDS = 10.0


def change_url(tool: Tool) -> str:
    return reverse("admin:mcp_app_tool_change", args=[tool.pk])


def edit_description(client: Client, tool: Tool, endpoint: Endpoint, description: str) -> None:
    response = client.post(
        change_url(tool), tool_payload(description=description, endpoints=[str(endpoint.pk)])
    )
    assert response.status_code == 302, response.context and response.context["errors"]


def version_page(tool: Tool, history_id: int) -> str:
    return reverse("admin:mcp_app_tool_simple_history", args=[tool.pk, history_id])


def test_an_admin_edit_is_recorded_with_its_user_and_source(
    admin_client: Client, admin_user: User, greet: Tool, endpoint: Endpoint
) -> None:
    edit_description(admin_client, greet, endpoint, "Says hello.")

    latest = greet.history.latest()
    assert latest.description == "Says hello."
    assert latest.history_type == "~"
    assert latest.history_user == admin_user
    assert latest.history_change_reason == history.ADMIN
    assert greet.history.count() >= 2  # created, then edited


def test_the_history_page_lists_versions_and_compares_any_two(
    admin_client: Client, greet: Tool, endpoint: Endpoint
) -> None:
    first = greet.history.latest().history_id
    edit_description(admin_client, greet, endpoint, "Says hello.")
    edit_description(admin_client, greet, endpoint, "Says hello twice.")
    last = greet.history.latest().history_id

    page = admin_client.get(reverse("admin:mcp_app_tool_history", args=[greet.pk]))
    assert page.status_code == 200
    assert 'id="history-compare"' in page.content.decode()

    compare = reverse("admin:mcp_app_tool_history_compare", args=[greet.pk])
    # Either order: the older version is always shown first.
    diff = admin_client.get(compare, {"a": last, "b": first})
    assert diff.status_code == 200
    changes = {change.field: change for change in diff.context["changes"]}
    assert set(changes) == {"description"}
    assert (changes["description"].old, changes["description"].new) == (
        "Greets someone.",
        "Says hello twice.",
    )
    assert "<del>Greets someone.</del>" in diff.content.decode()


def test_a_diff_of_a_schema_is_shown_line_by_line(greet: Tool) -> None:
    older = greet.history.latest()
    greet.input_schema = {"type": "object", "properties": {"who": {"type": "string"}}}
    greet.save()

    (change,) = history.version_diff(older, greet.history.latest())

    assert change.field == "input_schema"
    assert '-    "name": {' in change.lines
    assert '+    "who": {' in change.lines


def read_push(pubsub: Any) -> invalidation.Invalidation:
    message = pubsub.get_message(timeout=WAIT_SECONDS)
    while message is not None and message["type"] != "message":
        message = pubsub.get_message(timeout=WAIT_SECONDS)
    assert message is not None, "no invalidation was published"
    decoded = invalidation.Invalidation.decode(message["data"])
    assert decoded is not None
    return decoded


@pytest.fixture
def pushes() -> Iterator[Any]:
    """What this process publishes on the invalidation channel, read back from Redis."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    pubsub = client.pubsub()
    pubsub.subscribe(invalidation.invalidation_channel())
    try:
        yield pubsub
    finally:
        pubsub.close()
        client.close()


def test_reverting_goes_through_the_admin_form_and_invalidates_like_an_edit(
    admin_client: Client,
    greet: Tool,
    endpoint: Endpoint,
    pushes: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    original = greet.history.latest().history_id
    edit_description(admin_client, greet, endpoint, "Says hello.")
    version_before = Endpoint.objects.get(pk=endpoint.pk).catalog_version

    # The version page is the admin form filled with that version; submitting it reverts.
    page = admin_client.get(version_page(greet, original))
    assert page.status_code == 200
    assert page.context["adminform"].form.initial["description"] == "Greets someone."
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            version_page(greet, original),
            tool_payload(description="Greets someone.", endpoints=[str(endpoint.pk)]),
        )

    assert response.status_code == 302
    greet.refresh_from_db()
    assert greet.description == "Greets someone."
    assert Endpoint.objects.get(pk=endpoint.pk).catalog_version > version_before
    assert endpoint.pk in read_push(pushes).endpoint_ids
    latest = greet.history.latest()
    assert (latest.description, latest.history_change_reason) == ("Greets someone.", "admin")


def test_a_revert_the_form_refuses_changes_nothing(
    admin_client: Client, greet: Tool, endpoint: Endpoint
) -> None:
    original = greet.history.latest().history_id
    greet.name = "hello"
    greet.save()
    # Another tool on the endpoint has taken the old name since.
    tool_create(
        name="greet",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "x", "output": "text"},
        description="Newer.",
        endpoints=[endpoint],
    )
    count = greet.history.count()

    response = admin_client.post(
        version_page(greet, original), tool_payload(endpoints=[str(endpoint.pk)])
    )

    assert response.status_code == 200
    assert response.context["errors"]
    greet.refresh_from_db()
    assert greet.name == "hello"
    assert greet.history.count() == count


def test_access_rule_changes_are_recorded_with_their_groups(
    admin_client: Client, greet: Tool, endpoint: Endpoint
) -> None:
    ops = Group.objects.create(name="ops")
    before = greet.history.latest()

    response = admin_client.post(
        change_url(greet),
        tool_payload(
            endpoints=[str(endpoint.pk)], required_scope="mcp:write", allowed_groups=[str(ops.pk)]
        ),
    )

    assert response.status_code == 302
    changes = {c.field: c for c in history.version_diff(before, greet.history.latest())}
    assert changes["required_scope"].new == "mcp:write"
    assert (changes["allowed_groups"].old, changes["allowed_groups"].new) == ("", "ops")


def test_a_prompts_history_shows_its_arguments_and_messages(admin_client: Client) -> None:
    prompt = prompt_create(
        name="review",
        description="Reviews code.",
        arguments=[{"name": "code"}],
        messages=[{"role": "user", "text": "Review {code}"}],
    )
    argument = PromptArgument.objects.get(prompt=prompt)
    argument.description = "The code to review."
    argument.save()

    page = admin_client.get(reverse("admin:mcp_app_prompt_history", args=[prompt.pk]))

    parts = page.context["part_history"]
    assert [(kind, record.history_type) for kind, record in parts if kind == "argument"] == [
        ("argument", "~"),
        ("argument", "+"),
    ]
    assert any(kind == "message" for kind, _ in parts)
    assert 'id="part-history"' in page.content.decode()
    assert Prompt.history.filter(id=prompt.pk).exists()


def test_recent_changes_filter_by_user_and_endpoint(
    admin_client: Client, admin_user: User, greet: Tool, endpoint: Endpoint
) -> None:
    elsewhere = endpoint_create(slug="elsewhere")
    other = tool_create(
        name="other",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "x", "output": "text"},
        description="Elsewhere.",
        endpoints=[elsewhere],
    )
    edit_description(admin_client, greet, endpoint, "Says hello.")
    url = reverse("admin:mcp_app_recent_changes")

    everything = admin_client.get(url).context["rows"]
    assert {row["change"].record.id for row in everything if row["change"].model is Tool} == {
        greet.pk,
        other.pk,
    }
    by_user = admin_client.get(url, {"user": admin_user.pk}).context["rows"]
    assert [(row["change"].model, row["change"].source) for row in by_user] == [(Tool, "admin")]
    by_endpoint = admin_client.get(url, {"endpoint": elsewhere.pk}).context["rows"]
    assert {(row["change"].model, row["change"].owner_id) for row in by_endpoint} == {
        (Endpoint, elsewhere.pk),
        (Tool, other.pk),
        (MembershipChange, elsewhere.pk),  # "other" attached to it
    }


def test_credential_secrets_never_reach_a_history_table(admin_client: Client) -> None:
    assert admin_client.post(reverse("admin:mcp_app_credential_add"), credential_payload())
    credential = Credential.objects.get(name="github")
    change = reverse("admin:mcp_app_credential_change", args=[credential.pk])
    response = admin_client.post(
        change, credential_payload(secret="an0ther-s3cret-4712", description="Rotated.")
    )
    assert response.status_code == 302
    credential_create(name="spare", kind="bearer", secret="th1rd-s3cret-4713")
    encrypted = list(Credential.objects.values_list("secret_encrypted", flat=True))

    history_model = Credential.history.model
    assert "secret_encrypted" not in {f.name for f in history_model._meta.fields}
    assert Credential.history.filter(name="github").count() == 2
    dumped = dump_history_tables()
    for secret in (SECRET, "an0ther-s3cret-4712", "th1rd-s3cret-4713", *encrypted):
        assert secret not in dumped


def test_reverting_a_credential_keeps_its_current_secret(admin_client: Client) -> None:
    credential = credential_create(name="github", kind="bearer", secret=SECRET)
    original = Credential.history.latest().history_id
    credential.description = "Changed."
    credential.save()
    encrypted = Credential.objects.get(pk=credential.pk).secret_encrypted

    url = reverse("admin:mcp_app_credential_simple_history", args=[credential.pk, original])
    response = admin_client.post(url, credential_payload(secret=""))

    assert response.status_code == 302
    credential.refresh_from_db()
    assert (credential.description, credential.secret_encrypted) == ("", encrypted)


def dump_history_tables() -> str:
    """Every row of every history table, as text."""
    with connection.cursor() as cursor:
        tables = [
            name
            for name in connection.introspection.table_names(cursor)
            if re.match(r"mcp_app_historical", name)
        ]
        rows = []
        for table in tables:
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 (introspected names)
            rows.extend(repr(row) for row in cursor.fetchall())
    assert tables
    return "\n".join(rows)


def test_the_admin_links_recent_changes(admin_client: Client, endpoint: Endpoint) -> None:
    url = reverse("admin:mcp_app_recent_changes")

    assert f'href="{url}"' in admin_client.get(reverse("admin:index")).content.decode()
    change = admin_client.get(reverse("admin:mcp_app_endpoint_change", args=[endpoint.pk]))
    assert f'href="{url}?endpoint={endpoint.pk}"' in change.content.decode()


@pytest.mark.parametrize("may_view_tools", [True, False])
def test_a_calls_page_names_the_tool_version_that_answered(
    greet: Tool, endpoint: Endpoint, may_view_tools: bool
) -> None:
    version = greet.history.latest()
    greet.description = "Changed since the call."
    greet.save()
    call = make_call(
        endpoint, target="greet", catalog_version=7, tool_history_id=version.history_id
    )
    codenames = ["audit_calls", *(["view_tool"] if may_view_tools else [])]
    auditor = User.objects.create_user("auditor", password="pw", is_staff=True)
    auditor.user_permissions.add(
        # manage_every_team: an operator of every team (issue #27), as before teams
        *Permission.objects.filter(codename__in=[*codenames, "manage_every_team"])
    )
    client = Client()
    client.force_login(auditor)

    page = client.get(reverse("mcp_app:audit_detail", args=[call.pk])).content.decode()

    definition = re.search(r'<dd id="definition">(.*?)</dd>', page, re.S)
    assert definition is not None
    assert "catalog version 7" in definition.group(1)
    assert f"tool version #{version.history_id}" in definition.group(1)
    link = reverse("admin:mcp_app_tool_simple_history", args=[greet.pk, version.history_id])
    assert (f'href="{link}"' in definition.group(1)) is may_view_tools


def test_reverting_a_prompt_restores_its_arguments_and_messages(
    admin_client: Client, endpoint: Endpoint
) -> None:
    prompt = prompt_create(
        name="review",
        description="Reviews code.",
        arguments=[{"name": "code", "required": True}],
        messages=[{"role": "user", "text": "Review {code}"}],
        endpoints=[endpoint],
    )
    first = prompt.history.latest().history_id
    # A later edit of the prompt, then of its parts.
    prompt.description = "Looks at code."
    prompt.save()
    message = prompt.messages.get()
    message.text = "Look at {code} in {style}"
    message.save()
    PromptArgument.objects.create(prompt=prompt, name="style", position=1)

    response = admin_client.post(
        reverse("admin:mcp_app_prompt_simple_history", args=[prompt.pk, first]),
        {"name": "review", "title": "", "description": "Reviews code.", "enabled": "on",
         "icons": "[]", "required_scope": ""},
    )  # fmt: skip

    assert response.status_code == 302, response.context and response.context["errors"]
    prompt.refresh_from_db()
    assert prompt.description == "Reviews code."
    assert [(a.name, a.required) for a in prompt.arguments.all()] == [("code", True)]
    [served] = build_snapshot(Endpoint.objects.get(pk=endpoint.pk)).prompts
    assert render_prompt(served, {"code": "x = 1"}) == [
        {"role": "user", "content": {"type": "text", "text": "Review x = 1"}}
    ]
    # The revert is itself recorded: its parts' deletions and re-creations included.
    assert PromptMessage.history.filter(prompt_id=prompt.pk, history_type="-").exists()


def test_a_refused_prompt_revert_leaves_its_parts_alone(
    admin_client: Client, endpoint: Endpoint
) -> None:
    prompt = prompt_create(
        name="review",
        description="Reviews code.",
        messages=[{"role": "user", "text": "Review it"}],
    )
    first = prompt.history.latest().history_id
    message = prompt.messages.get()
    message.text = "Look at it"
    message.save()

    response = admin_client.post(
        reverse("admin:mcp_app_prompt_simple_history", args=[prompt.pk, first]),
        {"name": "review", "title": "", "description": "   ", "enabled": "on", "icons": "[]"},
    )

    assert response.status_code == 200 and response.context["errors"]
    assert prompt.messages.get().text == "Look at it"
