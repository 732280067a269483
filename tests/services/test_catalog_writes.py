"""One write path for catalog rows: the admin form, the API, catalog import, OpenAPI import and
the service itself write the same row for the same input, stamp its history with their own
user and source, and refuse bad input with the same words, saving nothing."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django import forms
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

import mcp_app
from mcp_app.executors import DEFAULT_EXECUTORS
from mcp_app.executors.base import ConfigError, ConfigReference, Executor, PreparedConfig
from mcp_app.models import Endpoint, MembershipChange, Prompt, Tool, Upstream
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolResult
from mcp_app.services import history
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.calllog.writer import call_log_flush
from mcp_app.services.catalog_io import FORMAT
from mcp_app.services.catalog_writes import (
    UPSTREAM_PROMPT_MESSAGES,
    endpoint_create,
    prompt_create,
    tool_create,
)
from mcp_app.services.openapi import openapi_read, openapi_tools_create
from tests.admin.conftest import tool_payload
from tests.api.conftest import CATALOG_PERMISSIONS, make_user
from tests.support.openapi_docs import petstore

pytestmark = pytest.mark.django_db

# A python tool given its name, function and a description of its own: every field left out
# (title, schemas, hints) comes from the function.
CLOCK = {
    "name": "clock",
    "kind": "python",
    "config": {"function": "current_time"},
    "description": "Tells the time.",
}
# Columns that differ between two rows of the same input.
BOOKKEEPING = {"id", "created_at", "updated_at"}


@pytest.fixture
def api() -> APIClient:
    user = make_user("robot", CATALOG_PERMISSIONS)
    _token, key = api_token_create(user=user, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def via_admin(client: Client, slug: str, **overrides: Any) -> Any:
    endpoint = Endpoint.objects.get(slug=slug)
    payload = tool_payload(
        name="clock",
        kind="python",
        function="current_time",
        title="",
        description="Tells the time.",
        input_schema="",
        template="",
        endpoints=[str(endpoint.pk)],
    )
    payload.update(overrides)
    return client.post(reverse("admin:mcp_app_tool_add"), payload)


def via_api(api: APIClient, slug: str, **fields: Any) -> Any:
    return api.post("/api/v1/tools/", {**CLOCK, **fields, "endpoints": [slug]})


def via_import(api: APIClient, slug: str, **fields: Any) -> Any:
    document = {
        "format": FORMAT,
        "endpoints": [{"slug": slug}],
        "tools": [{**CLOCK, **fields, "endpoints": [slug]}],
    }
    return api.post("/api/v1/catalog/import/", {"document": document})


def row_values(tool: Tool) -> dict[str, Any]:
    return {
        field.attname: getattr(tool, field.attname)
        for field in Tool._meta.concrete_fields
        if field.attname not in BOOKKEEPING
    }


def stamp(tool: Tool) -> tuple[str | None, str | None]:
    """The source and user of the tool's newest history row and of its endpoint attach."""
    latest = tool.history.latest()
    attach = MembershipChange.objects.get(item_id=tool.pk, kind="tool")
    assert (attach.source or None, attach.changed_by) == (
        latest.history_change_reason,
        latest.history_user,
    )
    user = latest.history_user
    return latest.history_change_reason, user.username if user is not None else None


def test_every_interface_writes_the_same_tool_with_its_own_user_and_source(
    admin_client: Client, api: APIClient
) -> None:
    for slug in ("by-service", "by-admin", "by-api", "by-import"):
        if slug != "by-import":
            endpoint_create(slug=slug)

    by_service = tool_create(**CLOCK, endpoints=Endpoint.objects.filter(slug="by-service"))
    assert via_admin(admin_client, "by-admin").status_code == 302
    assert via_api(api, "by-api").status_code == 201
    assert via_import(api, "by-import").status_code == 200

    tools = {tool.endpoints.get().slug: tool for tool in Tool.objects.all()}
    expected = row_values(by_service)
    # What was given is kept; what was not is the function's.
    assert expected["description"] == "Tells the time."
    assert expected["title"] == "Current time"
    assert expected["read_only_hint"] is True
    assert expected["output_schema"] is not None
    assert {slug: row_values(tool) for slug, tool in tools.items()} == {
        slug: expected for slug in tools
    }
    assert {slug: stamp(tool) for slug, tool in tools.items()} == {
        "by-service": (None, None),
        "by-admin": (history.ADMIN, "admin"),
        "by-api": (history.API, "robot"),
        "by-import": (history.IMPORT, "robot"),
    }


def test_an_openapi_import_is_recorded_with_its_user_and_source(admin_user: User) -> None:
    endpoint = endpoint_create(slug="main")
    document = openapi_read(petstore())

    [tool, *_] = openapi_tools_create(
        document=document,
        keys=[document.operations[0].key],
        endpoints=[endpoint],
        actor=admin_user,
    )

    assert stamp(tool) == (history.OPENAPI, admin_user.username)


def test_a_taken_tool_name_is_refused_by_every_interface_in_the_same_words(
    admin_client: Client, api: APIClient
) -> None:
    main = endpoint_create(slug="main")
    tool_create(**CLOCK, endpoints=[main])
    words = "Endpoint 'main' already has another tool named 'clock'."

    admin = via_admin(admin_client, "main")
    posted = via_api(api, "main")
    with pytest.raises(ValidationError) as service:
        tool_create(**CLOCK, endpoints=[main])

    assert admin.status_code == 200
    assert words in [str(e) for errors in admin.context["adminform"].form.errors.values()
                     for e in errors]  # fmt: skip
    assert posted.status_code == 400
    assert [error["message"] for error in posted.json()["errors"]] == [words]
    assert service.value.message_dict == {"name": [words]}
    assert Tool.objects.count() == 1


def test_a_rename_into_a_taken_name_is_refused_on_the_tools_own_endpoints(
    api: APIClient,
) -> None:
    main, other = endpoint_create(slug="main"), endpoint_create(slug="other")
    tool_create(**CLOCK, endpoints=[main])
    moving = tool_create(**{**CLOCK, "name": "time"}, endpoints=[main, other])
    elsewhere = tool_create(**{**CLOCK, "name": "time"}, endpoints=[])

    renamed = api.patch(f"/api/v1/tools/{moving.pk}/", {"name": "clock"})
    lonely = api.patch(f"/api/v1/tools/{elsewhere.pk}/", {"name": "clock"})

    assert [error["message"] for error in renamed.json()["errors"]] == [
        "Endpoint 'main' already has another tool named 'clock'."
    ]
    assert lonely.status_code == 200
    assert Tool.objects.get(pk=moving.pk).name == "time"


HTTP_PLACEHOLDER = "{owner} names no property of the input schema."


def test_an_undeclared_placeholder_is_refused_by_every_interface_in_the_same_words(
    admin_client: Client, api: APIClient
) -> None:
    endpoint_create(slug="main")
    url = "https://api.example/{owner}"
    http = {"name": "repo", "kind": "http", "description": "A repo."}

    admin = admin_client.post(
        reverse("admin:mcp_app_tool_add"),
        tool_payload(
            **{**http, "template": "", "http_method": "GET", "http_url": url},
            http_body="none",
            http_expected_status="2xx",
            input_schema={"type": "object", "properties": {}},
        ),
    )
    posted = api.post(
        "/api/v1/tools/", {**http, "config": {"method": "GET", "url": url}, "endpoints": ["main"]}
    )
    document = {
        "format": FORMAT,
        "endpoints": [{"slug": "main"}],
        "tools": [{**http, "config": {"method": "GET", "url": url}, "endpoints": ["main"]}],
    }
    imported = api.post("/api/v1/catalog/import/", {"document": document})

    assert admin.status_code == 200
    assert admin.context["adminform"].form.errors["http_url"] == [HTTP_PLACEHOLDER]
    assert posted.json()["errors"] == [
        {"path": "config.url", "message": HTTP_PLACEHOLDER, "code": "invalid"}
    ]
    assert imported.status_code == 400
    assert [error["message"] for error in imported.json()["errors"]] == [HTTP_PLACEHOLDER]
    with pytest.raises(ValidationError) as service:
        tool_create(**http, config={"method": "GET", "url": url})
    assert service.value.message_dict == {"config.url": [HTTP_PLACEHOLDER]}
    assert not Tool.objects.exists()


TEMPLATE_VARIABLE = "{{ nmae }} names no property of the input schema."


def test_an_undeclared_template_variable_is_refused_by_every_interface_in_the_same_words(
    admin_client: Client, api: APIClient
) -> None:
    """Issue #28: it was accepted, and rendered empty whatever the client sent."""
    endpoint_create(slug="main")
    source = "Hello {{ nmae }}! {% for tag in tags %}{{ tag|default:name }}{% endfor %}"
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "tags": {"type": "array"}},
    }
    tool = {"name": "greet", "kind": "template", "description": "Greets."}

    admin = admin_client.post(
        reverse("admin:mcp_app_tool_add"),
        tool_payload(**tool, template=source, input_schema=schema),
    )
    posted = api.post(
        "/api/v1/tools/",
        {**tool, "config": {"template": source}, "input_schema": schema, "endpoints": ["main"]},
    )
    document = {
        "format": FORMAT,
        "endpoints": [{"slug": "main"}],
        "tools": [
            {**tool, "config": {"template": source}, "input_schema": schema, "endpoints": ["main"]}
        ],
    }
    imported = api.post("/api/v1/catalog/import/", {"document": document})

    assert admin.status_code == 200
    assert admin.context["adminform"].form.errors["template"] == [TEMPLATE_VARIABLE]
    assert posted.json()["errors"] == [
        {"path": "config.template", "message": TEMPLATE_VARIABLE, "code": "invalid"}
    ]
    assert imported.status_code == 400
    assert [error["message"] for error in imported.json()["errors"]] == [TEMPLATE_VARIABLE]
    with pytest.raises(ValidationError) as service:
        tool_create(**tool, config={"template": source}, input_schema=schema)
    assert service.value.message_dict == {"config.template": [TEMPLATE_VARIABLE]}
    assert not Tool.objects.exists()
    # Declared, it is saved; the loop variable and the context's built-ins need no property.
    tool_create(**tool, config={"template": source.replace("nmae", "name")}, input_schema=schema)


def test_a_missing_credential_is_refused_by_every_interface_in_the_same_words(
    api: APIClient,
) -> None:
    endpoint_create(slug="main")
    http = {
        "name": "repo",
        "kind": "http",
        "description": "A repo.",
        "config": {"method": "GET", "url": "https://api.example/", "credential": "nowhere"},
    }
    words = "No credential named 'nowhere' here."

    posted = api.post("/api/v1/tools/", {**http, "endpoints": ["main"]})
    document = {"format": FORMAT, "endpoints": [{"slug": "main"}], "tools": [http]}
    imported = api.post("/api/v1/catalog/import/", {"document": document})
    with pytest.raises(ValidationError) as service:
        tool_create(**http)

    assert posted.json()["errors"] == [
        {"path": "config.credential", "message": words, "code": "invalid"}
    ]
    assert [error["message"] for error in imported.json()["errors"]] == [words]
    assert service.value.message_dict == {"config.credential": [words]}
    assert not Tool.objects.exists()


REVIEW = {"name": "review", "description": "Review code."}
MESSAGE = {"role": "user", "kind": "text", "text": "Review {code}"}


def prompt_form(**fields: str) -> dict[str, str]:
    """The prompt add form with one argument and one message, as a browser posts it."""
    management = {"TOTAL_FORMS": "1", "INITIAL_FORMS": "0", "MIN_NUM_FORMS": "0",
                  "MAX_NUM_FORMS": "1000"}  # fmt: skip
    return {
        **REVIEW, "title": "", "enabled": "on", "icons": "[]", "upstream": "", "remote_name": "",
        **{f"arguments-{key}": value for key, value in management.items()},
        "arguments-0-position": "0", "arguments-0-name": "code", "arguments-0-required": "on",
        **{f"messages-{key}": value for key, value in management.items()},
        **{f"messages-0-{key}": value for key, value in MESSAGE.items()},
        "messages-0-position": "0",
        **fields,
    }  # fmt: skip


def prompt_parts(prompt_name: str) -> tuple[Any, ...]:
    prompt = Prompt.objects.get(name=prompt_name)
    return (
        [(a.position, a.name, a.required) for a in prompt.arguments.all()],
        [(m.position, m.role, m.kind, m.text) for m in prompt.messages.all()],
        prompt.history.latest().history_change_reason,
        [part.history.latest().history_change_reason
         for part in (*prompt.arguments.all(), *prompt.messages.all())],
    )  # fmt: skip


def test_every_interface_writes_a_prompt_and_its_parts_with_its_source(
    admin_client: Client, api: APIClient
) -> None:
    parts = {"arguments": [{"name": "code", "required": True}], "messages": [MESSAGE]}

    assert admin_client.post(reverse("admin:mcp_app_prompt_add"), prompt_form()).status_code == 302
    assert api.post("/api/v1/prompts/", {**REVIEW, **parts, "name": "by-api"}).status_code == 201
    document = {"format": FORMAT, "prompts": [{**REVIEW, **parts, "name": "by-import"}]}
    assert api.post("/api/v1/catalog/import/", {"document": document}).status_code == 200

    arguments, messages = [(0, "code", True)], [(0, "user", "text", "Review {code}")]
    assert prompt_parts("review") == (arguments, messages, history.ADMIN, [history.ADMIN] * 2)
    assert prompt_parts("by-api") == (arguments, messages, history.API, [history.API] * 2)
    assert prompt_parts("by-import") == (arguments, messages, history.IMPORT, [history.IMPORT] * 2)


def test_an_upstream_prompt_with_messages_is_refused_by_every_interface_in_the_same_words(
    admin_client: Client, api: APIClient
) -> None:
    peer = Upstream.objects.create(name="peer", url="https://peer.example.com/mcp")
    upstream_prompt = {**REVIEW, "upstream": "peer", "messages": [MESSAGE]}

    admin = admin_client.post(
        reverse("admin:mcp_app_prompt_add"), prompt_form(upstream=str(peer.pk))
    )
    posted = api.post("/api/v1/prompts/", upstream_prompt)
    document = {"format": FORMAT, "prompts": [upstream_prompt]}
    imported = api.post("/api/v1/catalog/import/", {"document": document})
    with pytest.raises(ValidationError) as service:
        prompt_create(**REVIEW, upstream=peer, messages=[MESSAGE])

    assert admin.status_code == 200
    assert [
        str(e) for e in admin.context["inline_admin_formsets"][1].formset.non_form_errors()
    ] == [UPSTREAM_PROMPT_MESSAGES]
    assert posted.json()["errors"] == [
        {"path": "messages", "message": UPSTREAM_PROMPT_MESSAGES, "code": "invalid"}
    ]
    assert [error["message"] for error in imported.json()["errors"]] == [UPSTREAM_PROMPT_MESSAGES]
    assert service.value.message_dict == {"messages": [UPSTREAM_PROMPT_MESSAGES]}
    assert not Prompt.objects.exists()


APP = Path(mcp_app.__file__).parent
# What takes catalog input from outside: each writes catalog rows through
# services.catalog_writes (upstreams, credentials, reverts and deletes through
# services.row_writes), and names no tool kind (the kinds' executors answer for them). Django's
# and DRF's own saves and deletes are not greppable: tests/services/test_row_writes.py checks
# that every admin, serializer and viewset of these rows replaces them.
INTERFACES = sorted(
    [
        *(APP / "admin").glob("*.py"),
        *(APP / "api").glob("*.py"),
        APP / "services" / "catalog_io.py",
        APP / "services" / "openapi.py",
        APP / "services" / "try_it.py",
        APP / "management" / "commands" / "seed_demo.py",
    ]
)
WRITE = re.compile(
    r"\.save\(|\.delete\(\)|\.objects\.(create|bulk_create|get_or_create|update_or_create)\("
    r"|\.objects\.\w+\(.*\)\.(update|delete)\("
    r"|\.(endpoints|allowed_groups|tools|resources|resource_templates|prompts|arguments"
    r"|messages)\.(add|set|remove|clear|create)\("
)
TOOL_KIND = re.compile(
    r"Tool\.Kind\.|\bkind\b[^=\n]*[!=]=\s*[\"'](python|template|http|mcp_upstream)"
)
# Lines that match but write no catalog row, or name a kind on purpose: (file, fragment, why).
ALLOWED = [
    ("admin/prompt.py", "formset.save(commit=False)", "unsaved; prompt_part_save saves them"),
    ("services/catalog_io.py", "Group.objects.create(", "a Django group, not a catalog row"),
    ("services/catalog_io.py", "default_storage.save(", "a file's content"),
    ("services/openapi.py", "kind=Tool.Kind.HTTP", "OpenAPI operations become HTTP tools"),
    ("management/commands/seed_demo.py", "kind=Tool.Kind.", "the demo's own tools"),
]


def test_interfaces_write_catalog_rows_only_through_the_write_path_and_name_no_kind() -> None:
    found = [
        (str(path.relative_to(APP)), line.strip())
        for path in INTERFACES
        for line in path.read_text().splitlines()
        if WRITE.search(line) or TOOL_KIND.search(line)
    ]

    def allowed(name: str, line: str) -> bool:
        return any(name == where and fragment in line for where, fragment, _why in ALLOWED)

    assert [(name, line) for name, line in found if not allowed(name, line)] == []
    # Every exception still exists: the list shrinks as they go.
    assert [
        (where, fragment)
        for where, fragment, _why in ALLOWED
        if not any(name == where and fragment in line for name, line in found)
    ] == []


# Lines of the upstream modules (services/upstream_*.py) that match WRITE but write no catalog
# row through the side door: (fragment, why). Upstream sync writes its tools, resources,
# templates and prompts through services.catalog_writes like any interface.
UPSTREAMS_ALLOWED = [
    ("Upstream.objects.filter(", "the upstream's own state: health, breaker, what a sync took"),
    ('tool.save(update_fields=["config", "updated_at"])', "following a rename, not a sync"),
]


def test_upstream_sync_writes_catalog_rows_only_through_the_write_path() -> None:
    lines = [
        line
        for path in sorted((APP / "services").glob("upstream_*.py"))
        for line in path.read_text().splitlines()
    ]
    found = [line.strip() for line in lines if WRITE.search(line)]

    assert [
        line for line in found if not any(fragment in line for fragment, _ in UPSTREAMS_ALLOWED)
    ] == []
    assert [
        fragment for fragment, _ in UPSTREAMS_ALLOWED if not any(fragment in line for line in found)
    ] == []


@dataclass(frozen=True, slots=True)
class GreetingConfig(PreparedConfig):
    greeting: str


class GreetingConfigForm(forms.Form):
    greeting_text = forms.CharField(required=False)


class GreetingExecutor(Executor[GreetingConfig]):
    """A kind defined here, in a test module: ``{"greeting": "Hello", "credential": name}``."""

    kind = "greeting"
    label = "Greeting"
    config_form = GreetingConfigForm

    def prepare(self, config: Mapping[str, Any]) -> GreetingConfig:
        if set(config) - {"greeting", "credential"} or not config.get("greeting"):
            raise ConfigError("A greeting needs its words.")
        return GreetingConfig(greeting=str(config["greeting"]))

    async def run(
        self, prepared: GreetingConfig, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        return ToolResult.text(f"{prepared.greeting}, {arguments['name']}!")

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"greeting_text": config.get("greeting", "")}

    def config_from_form(
        self, data: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return {"greeting": data.get("greeting_text", "")}

    def tool_defaults(self, config: Mapping[str, Any]) -> Mapping[str, Any]:
        return {
            "title": "Greeting",
            "description": f"Says {config.get('greeting')} to someone.",
            "input_schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        }

    def config_references(self, config: Mapping[str, Any]) -> Sequence[ConfigReference]:
        name = config.get("credential")
        return (ConfigReference("credential", "credential", name),) if name else ()


WITH_GREETING = override_settings(
    MCP_EXECUTORS=[*DEFAULT_EXECUTORS, f"{__name__}.GreetingExecutor"]
)
HELLO = {"name": "hello", "kind": "greeting", "config": {"greeting": "Hello"}}


# The try-it call is logged by the call log's writer thread, on its own connection.
@pytest.mark.django_db(transaction=True)
@WITH_GREETING
def test_a_kind_from_a_test_module_is_written_by_every_interface_and_runs(
    admin_client: Client, api: APIClient
) -> None:
    for slug in ("by-admin", "by-api"):
        endpoint_create(slug=slug)
    admin_form = tool_payload(
        name="hello", kind="greeting", greeting_text="Hello", template="", title="",
        description="", input_schema="", endpoints=[str(Endpoint.objects.get(slug="by-admin").pk)],
    )  # fmt: skip

    assert admin_client.post(reverse("admin:mcp_app_tool_add"), admin_form).status_code == 302
    assert api.post("/api/v1/tools/", {**HELLO, "endpoints": ["by-api"]}).status_code == 201
    document = {"format": FORMAT, "endpoints": [{"slug": "by-import"}],
                "tools": [{**HELLO, "endpoints": ["by-import"]}]}  # fmt: skip
    assert api.post("/api/v1/catalog/import/", {"document": document}).status_code == 200
    tried = api.post(
        f"/api/v1/tools/{Tool.objects.get(endpoints__slug='by-api').pk}/try/",
        {"arguments": {"name": "Ada"}},
    )

    rows = [row_values(tool) for tool in Tool.objects.order_by("pk")]
    assert rows[0]["description"] == "Says Hello to someone."
    assert rows == [rows[0]] * 3
    assert tried.json()["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert call_log_flush(timeout=10)


@WITH_GREETING
def test_a_kind_from_a_test_module_has_its_references_checked(api: APIClient) -> None:
    words = "No credential named 'nowhere' here."
    tool = {**HELLO, "config": {"greeting": "Hello", "credential": "nowhere"}}

    posted = api.post("/api/v1/tools/", tool)
    imported = api.post(
        "/api/v1/catalog/import/", {"document": {"format": FORMAT, "tools": [tool]}}
    )
    with pytest.raises(ValidationError) as service:
        tool_create(**tool)

    assert [error["message"] for error in posted.json()["errors"]] == [words]
    assert [error["message"] for error in imported.json()["errors"]] == [words]
    assert service.value.message_dict == {"config.credential": [words]}
    assert not Tool.objects.exists()
