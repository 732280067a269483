"""Hostile input to the management API: every route answers the documented error body (JSON,
4xx) and changes nothing.

NUL characters and unpaired surrogates anywhere in a body or query string, objects and arrays
nested past the bound, oversized bodies, unknown routes and rows: docs/api.md, "Limits" and
"Errors". The parsers (mcp_app/api/parsers.py) check every body format in one place.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from mcp_app.api import parsers
from mcp_app.models import CallLog, Tool
from mcp_app.services.catalog_io import catalog_dump, catalog_export
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.api.conftest import CATALOG_PERMISSIONS

pytestmark = pytest.mark.django_db

ERROR_KEYS = {"type", "detail", "errors"}


@pytest.fixture
def client(token_client: Callable[..., APIClient]) -> APIClient:
    return token_client(
        *CATALOG_PERMISSIONS, "mcp_app.view_calllog", "mcp_app.audit_calls", username="ops"
    )


@pytest.fixture
def echo() -> Tool:
    endpoint = endpoint_create(slug="demo", auth_mode="public")
    return tool_create(
        name="echo", kind="python", config={"function": "echo"}, endpoints=[endpoint]
    )


def snapshot() -> tuple[Any, ...]:
    """What a refused request must leave as it was."""
    return (
        catalog_dump(catalog_export(), fmt="json"),
        sorted(Group.objects.values_list("name", flat=True)),
        CallLog.objects.count(),
    )


def assert_error_body(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert set(body) == ERROR_KEYS
    assert isinstance(body["type"], str) and body["type"]
    assert isinstance(body["detail"], str) and body["detail"]
    for error in body["errors"]:
        assert set(error) == {"path", "message", "code"}
    return body


def nested(depth: int) -> str:
    """JSON text of ``depth`` objects nested in one another."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def tool_body(**fields: str) -> str:
    """A tool's JSON with some members given as raw JSON text (for what json.dumps cannot
    write: lone surrogates, deep nesting)."""
    members = {
        "name": '"hostile"',
        "kind": '"python"',
        "config": '{"function": "echo"}',
        **fields,
    }
    return "{" + ", ".join(f'"{key}": {value}' for key, value in members.items()) + "}"


# (method, path, raw JSON body, the path of the error); {id} is the echo tool's id.
NUL = json.dumps("a\x00b")
FORMAT = '"mcphost-catalog/1"'
BODIES = {
    "group name": (
        "post",
        "/api/v1/tools/",
        tool_body(allowed_groups=f"[{NUL}]"),
        "allowed_groups.0",
    ),
    "key in config": (
        "post",
        "/api/v1/tools/",
        tool_body(config='{"function": "echo", "x\\u0000": 1}'),
        "config",
    ),
    "nested config value": (
        "post",
        "/api/v1/tools/",
        tool_body(config=f'{{"function": "echo", "opts": {{"a": [{NUL}]}}}}'),
        "config.opts.a.0",
    ),
    "input schema value": (
        "post",
        "/api/v1/tools/",
        tool_body(input_schema=f'{{"type": "object", "description": {NUL}}}'),
        "input_schema.description",
    ),
    "output schema value": (
        "post",
        "/api/v1/tools/",
        tool_body(output_schema=f'{{"type": "object", "title": {NUL}}}'),
        "output_schema.title",
    ),
    "endpoint slug": ("post", "/api/v1/endpoints/", f'{{"slug": {NUL}}}', "slug"),
    "patched config": (
        "patch",
        "/api/v1/tools/{id}/",
        f'{{"config": {{"function": {NUL}}}}}',
        "config.function",
    ),
    "put description": ("put", "/api/v1/tools/{id}/", tool_body(description=NUL), "description"),
    "try-it arguments": (
        "post",
        "/api/v1/tools/{id}/try/",
        f'{{"arguments": {{"message": {NUL}}}}}',
        "arguments.message",
    ),
    "catalog document": (
        "post",
        "/api/v1/catalog/import/",
        f'{{"document": {{"format": {FORMAT}, "endpoints": [{{"slug": {NUL}}}]}}}}',
        "document.endpoints.0.slug",
    ),
    "openapi document": (
        "post",
        "/api/v1/tools/openapi-import/",
        f'{{"document": {{"openapi": {NUL}}}}}',
        "document.openapi",
    ),
    "lone surrogate in a value": ("post", "/api/v1/tools/", tool_body(name='"a\\ud800"'), ""),
    "lone surrogate in a key": ("post", "/api/v1/tools/", tool_body(config='{"\\udc00": 1}'), ""),
    "100 levels of input schema": (
        "post",
        "/api/v1/tools/",
        tool_body(input_schema=nested(100)),
        "input_schema.a.a.a",
    ),
    "10,000 levels of input schema": (
        "post",
        "/api/v1/tools/",
        tool_body(input_schema=nested(10_000)),
        "",
    ),
    "100 levels of output schema": (
        "post",
        "/api/v1/tools/",
        tool_body(output_schema=nested(100)),
        "output_schema.a",
    ),
    "10,000 levels of config": (
        "patch",
        "/api/v1/tools/{id}/",
        f'{{"config": {nested(10_000)}}}',
        "",
    ),
    "100 levels of arguments": (
        "post",
        "/api/v1/tools/{id}/try/",
        f'{{"arguments": {nested(100)}}}',
        "arguments.a",
    ),
    "10,000 levels of arguments": (
        "post",
        "/api/v1/tools/{id}/try/",
        f'{{"arguments": {nested(10_000)}}}',
        "",
    ),
    "10,000 levels of arrays": (
        "post",
        "/api/v1/catalog/import/",
        '{"document": ' + "[" * 10_000 + "]" * 10_000 + "}",
        "",
    ),
}


@pytest.mark.parametrize("case", BODIES, ids=list(BODIES))
def test_a_hostile_json_body_is_refused_with_the_error_body(
    client: APIClient, echo: Tool, case: str
) -> None:
    method, path, body, error_path = BODIES[case]
    before = snapshot()

    response = getattr(client, method)(
        path.format(id=echo.pk), data=body.encode(), content_type="application/json"
    )

    body = assert_error_body(response, 400)
    assert body["type"] == "invalid"
    assert body["errors"][0]["path"].startswith(error_path)
    assert body["errors"][0]["code"] in ("unstorable", "too_deep")
    assert snapshot() == before


@pytest.mark.parametrize(("wraps", "status"), [(31, 201), (32, 400)])
def test_the_nesting_bound_is_where_docs_say(client: APIClient, wraps: int, status: int) -> None:
    # The body's object is level 1 and input_schema level 2; each "properties"/"x" wrap adds
    # two: 31 wraps reach MAX_DEPTH (64) exactly, 32 go past it.
    assert parsers.MAX_DEPTH == 64
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(wraps):
        schema = {"type": "object", "properties": {"x": schema}}

    response = client.post(
        "/api/v1/tools/",
        {"name": "deep", "kind": "python", "config": {"function": "echo"}, "input_schema": schema},
        format="json",
    )

    assert response.status_code == status, response.content[:300]


@pytest.mark.parametrize(
    ("field", "value"),
    [("input_schema", nested(10_000)), ("config", nested(100)), ("description", "a\x00b")],
)
def test_a_hostile_form_field_is_refused_with_the_error_body(
    client: APIClient, field: str, value: str
) -> None:
    # The browsable API posts forms; a JSON field's text is read as a JSON body is.
    before = snapshot()
    data = {"name": "form", "kind": "python", "config": '{"function": "echo"}', field: value}

    response = client.post("/api/v1/tools/", data, format="multipart")

    body = assert_error_body(response, 400)
    assert body["errors"][0]["path"].startswith(field)
    assert snapshot() == before


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("deep.yaml", ("format: mcphost-catalog/1\nendpoints: " + "[" * 10_000 + "]" * 10_000)),
        ("deep.json", '{"format": "mcphost-catalog/1", "endpoints": ' + nested(10_000) + "}"),
        ("nul.yaml", 'format: mcphost-catalog/1\nendpoints:\n- slug: "a\\0b"\n'),
    ],
)
def test_a_hostile_import_file_is_refused_with_the_error_body(
    client: APIClient, name: str, content: str
) -> None:
    before = snapshot()
    upload = SimpleUploadedFile(name, content.encode(), content_type="application/yaml")

    response = client.post("/api/v1/catalog/import/", {"file": upload}, format="multipart")

    body = assert_error_body(response, 400)
    assert body["errors"][0]["path"].startswith("file")
    assert snapshot() == before


@pytest.mark.parametrize(
    "query",
    [
        "kind=http&kind=a%00b",
        "kind=a%00b&kind=http",
        "search=a%00",
        "ordering=name&ordering=%00",
        "a%00=1",
        "page_size=1&page_size=%00",
    ],
)
@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/tools/",
        "/api/v1/call-log/",
        "/api/v1/catalog/export/",
        "/api/v1/tools/{id}/",
        "/api/v1/",
        "/api/schema/",
    ],
)
def test_a_nul_in_any_query_parameter_is_refused(
    client: APIClient, echo: Tool, path: str, query: str
) -> None:
    response = client.get(f"{path.format(id=echo.pk)}?{query}")

    body = assert_error_body(response, 400)
    assert body["errors"][0]["path"].startswith("query.")


def test_a_json_body_over_the_size_limit_is_413(client: APIClient, settings: Any) -> None:
    before = snapshot()
    description = "a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)

    response = client.post(
        "/api/v1/tools/",
        {
            "name": "big",
            "kind": "python",
            "config": {"function": "echo"},
            "description": description,
        },
        format="json",
    )

    assert assert_error_body(response, 413)["type"] == "too_large"
    assert snapshot() == before


def test_form_fields_over_the_size_limit_are_413(client: APIClient, settings: Any) -> None:
    response = client.post(
        "/api/v1/catalog/import/",
        {"prune": "false", "document": "a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)},
        format="multipart",
    )

    assert assert_error_body(response, 413)["type"] == "too_large"


def test_an_upload_over_the_upload_limit_is_413(
    client: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real bound is 64 MiB; a small one keeps the test fast and exercises the same check.
    monkeypatch.setattr(parsers, "MAX_UPLOAD_BYTES", 10_000)
    upload = SimpleUploadedFile("big.yaml", b"format: mcphost-catalog/1\n" + b"#" * 20_000)

    response = client.post("/api/v1/catalog/import/", {"file": upload}, format="multipart")

    assert assert_error_body(response, 413)["type"] == "too_large"


@pytest.mark.parametrize(
    ("method", "path", "headers", "status", "error_type"),
    [
        ("get", "/api/v1/nothing/", {}, 404, "not_found"),
        ("get", "/api/nothing", {}, 404, "not_found"),
        ("post", "/api/v1/tools/999999/enable/", {}, 404, "not_found"),
        ("get", "/api/v1/tools/999999/", {}, 404, "not_found"),
        ("get", "/api/v1/tools/not-a-number/", {}, 404, "not_found"),
        ("get", "/api/v1/endpoints/999999/export/", {}, 404, "not_found"),
        ("delete", "/api/v1/tools/", {}, 405, "method_not_allowed"),
        ("get", "/api/v1/tools/", {"HTTP_ACCEPT": "image/png"}, 406, "not_acceptable"),
    ],
)
def test_routing_failures_answer_the_error_body(
    client: APIClient,
    method: str,
    path: str,
    headers: dict[str, str],
    status: int,
    error_type: str,
) -> None:
    response = getattr(client, method)(path, **headers)

    assert assert_error_body(response, status)["type"] == error_type


def test_an_unsupported_body_type_is_415_with_the_error_body(client: APIClient) -> None:
    before = snapshot()

    response = client.post("/api/v1/tools/", data=b"name=x", content_type="text/plain")

    assert assert_error_body(response, 415)["type"] == "unsupported_media_type"
    assert snapshot() == before


def test_json_that_does_not_parse_is_a_parse_error(client: APIClient) -> None:
    response = client.post("/api/v1/tools/", data=b"{", content_type="application/json")

    assert assert_error_body(response, 400)["type"] == "parse_error"


@pytest.mark.parametrize(("field", "value"), [("scopes", 0), ("title", 1.5), ("slug", 7)])
def test_a_number_where_text_is_expected_is_refused(
    client: APIClient, field: str, value: Any
) -> None:
    # DRF's text fields would store 0 as "0"; schemathesis' coverage phase sent that.
    before = snapshot()

    response = client.post(
        "/api/v1/endpoints/", {"slug": "typed", field: value, "auth_mode": "public"}, format="json"
    )

    body = assert_error_body(response, 400)
    assert [error["path"] for error in body["errors"]] == [field]
    assert snapshot() == before
