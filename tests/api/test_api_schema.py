"""The API's own OpenAPI schema, exercised by schemathesis against a live server.

The schema is the one the running server serves at ``/api/schema/``; schemathesis generates
requests for every operation, valid and invalid (a few examples each, no shrinking, so the
run stays bounded; ``API_SCHEMA_COVERAGE=1`` adds schemathesis' coverage phase) and sends
them with a superuser's API token. Every answer must pass schemathesis' checks: no 5xx, a
documented status, content type, headers and body, invalid requests refused, valid ones
accepted (where the schema can say what is valid: see ``excluded_checks``), authentication
not ignored.

The server is uvicorn, as in production (Dockerfile): Daphne's HTTP layer (Twisted) parses
a multipart body itself and answers a malformed one with an empty 400 before the
application sees it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from django.contrib.auth.models import User
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.support.live import (  # noqa: F401  (fixture)
    asgi_server,
    flush_database,
    uvicorn_server_url,
)

# Serial: schemathesis gives every operation's test the same node id, and pytest-xdist
# schedules by node id, so on workers one of them would run in place of all 121.
pytestmark = [pytest.mark.django_db, pytest.mark.serial]

EXAMPLES_PER_OPERATION = 5
# Schemathesis' coverage phase (boundary and invalid values of every parameter, as explicit
# examples that max_examples does not cap) takes about 4 minutes here: opt in with
# API_SCHEMA_COVERAGE=1. The default run generates EXAMPLES_PER_OPERATION requests each.
PHASES = (
    [Phase.explicit, Phase.generate]
    if os.environ.get("API_SCHEMA_COVERAGE") == "1"
    else [Phase.generate]
)
REQUEST_TIMEOUT_SECONDS = 10


@pytest.fixture(scope="module")
def api_auth(uvicorn_server_url: str, django_db_blocker: Any) -> Iterator[dict[str, Any]]:  # noqa: F811
    with django_db_blocker.unblock():
        admin = User.objects.create_superuser("schema-admin", password="unused-password-123")
        _token, key = api_token_create(user=admin, name="schemathesis")
        endpoint = endpoint_create(slug="schema", auth_mode="public")
        tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[endpoint])
    yield {"base_url": uvicorn_server_url, "headers": {"Authorization": f"Bearer {key}"}}
    flush_database(django_db_blocker)


def generated_schema() -> dict[str, Any]:
    """The schema /api/schema/ serves, generated in this process (Django is set up)."""
    return json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True)))


# Loaded at collection: schemathesis' fixture-based loader does not run under pytest 9.
schema = schemathesis.openapi.from_dict(generated_schema())
# The API refuses a NUL anywhere (docs/api.md, Limits; tests/api/test_api_hostile_input.py),
# which the schema's string types do not say: without this, a string holding one would count
# as a valid request wrongly refused.
schema.config.generation.update(allow_x00=False)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    phases=PHASES,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_every_generated_request_gets_a_documented_answer(
    case: Any, api_auth: dict[str, Any]
) -> None:
    response = case.call(
        base_url=api_auth["base_url"],
        headers=api_auth["headers"],
        timeout=REQUEST_TIMEOUT_SECONDS,
    )
    case.validate_response(
        response,
        checks=CHECKS,
        excluded_checks=excluded_checks(case.operation.method, case.operation.path),
        headers=api_auth["headers"],
        transport_kwargs={"base_url": api_auth["base_url"], "timeout": REQUEST_TIMEOUT_SECONDS},
    )


# Every check that judges one answer. Left out: use_after_free and
# ensure_resource_availability judge sequences of calls (schemathesis' stateful phase), and
# object_level_authorization needs a second user's credentials; the permission tests
# (tests/api/test_api.py) cover that.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    missing_required_header,
    unsupported_method,
    allow_header_conformance,
    ignored_auth,
]
# GET operations whose parameters must name existing rows or choices of /audit/'s filter
# form (an endpoint slug, an era): a well-typed random value is rightly refused.
ROW_NAMING_READS = {"/api/v1/catalog/export/", "/api/v1/call-log/", "/api/v1/call-log/export/"}


def excluded_checks(method: str, path: str) -> list[Any]:
    """positive_data_acceptance, narrowly: where the schema cannot say what is valid.

    A write's body passes the model's full_clean (name patterns, URIs, origins, the kind's
    config, a credential's secret on create), which JSON Schema does not express; such a
    body with well-typed random values is rightly refused with 400. A DELETE's If-Match
    names the row's version: a random one is rightly refused with 412. Every other check
    runs on every operation.
    """
    if method.upper() in ("POST", "PUT", "PATCH", "DELETE") or path in ROW_NAMING_READS:
        return [positive_data_acceptance]
    return []


def test_schema_is_openapi_3_1_and_docs_use_our_static_files(
    api_auth: dict[str, Any],
) -> None:
    with httpx.Client(base_url=api_auth["base_url"], timeout=REQUEST_TIMEOUT_SECONDS) as client:
        document = client.get("/api/schema/", headers={"Accept": "application/json"})
        docs = client.get("/api/docs/")

    assert document.json() == generated_schema()
    assert document.json()["openapi"] == "3.1.0"
    assert "/api/v1/tools/{id}/try/" in document.json()["paths"]
    assert docs.status_code == 200
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in docs.text
    assert "cdn" not in docs.text.lower()


def test_twenty_concurrent_first_requests_all_get_the_schema(django_db_setup: None) -> None:
    # A fresh server: the first requests after a start are the ones that built the schema
    # concurrently (drf-spectacular's generator is not thread-safe). Daphne, as dev.py run.
    with (
        asgi_server("daphne") as base_url,
        httpx.Client(base_url=base_url, timeout=120) as client,
        concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool,
    ):
        answers = list(
            pool.map(
                lambda _: client.get("/api/schema/", headers={"Accept": "application/json"}),
                range(20),
            )
        )

    assert [answer.status_code for answer in answers] == [200] * 20
    assert all(answer.json() == answers[0].json() for answer in answers)


def test_every_operation_documents_its_errors_and_etags() -> None:
    document = generated_schema()
    error_body = document["components"]["schemas"]["Error"]
    assert error_body["required"] == ["type", "detail", "errors"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"400", "401", "403", "406", "429"} <= codes, (method, path)
            if "{id}" in path:
                assert "404" in codes, (method, path)
            if "requestBody" in operation:
                assert {"413", "415"} <= codes, (method, path)
            if method == "delete":
                assert {"409", "412"} <= codes, (method, path)
    tool = document["paths"]["/api/v1/tools/{id}/"]
    for method in ("put", "patch", "delete"):
        assert "If-Match" in [p["name"] for p in tool[method]["parameters"]]
        assert "412" in tool[method]["responses"]
    assert "If-None-Match" in [p["name"] for p in tool["get"]["parameters"]]
    assert "ETag" in tool["get"]["responses"]["200"]["headers"]
    assert "ETag" in tool["put"]["responses"]["200"]["headers"]
    assert "ETag" in document["paths"]["/api/v1/tools/"]["post"]["responses"]["201"]["headers"]
    not_found = tool["get"]["responses"]["404"]["$ref"].rsplit("/", 1)[1]
    content = document["components"]["responses"][not_found]["content"]
    assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


def test_boolean_filters_are_typed_boolean() -> None:
    document = generated_schema()

    def parameter(path: str, name: str) -> dict[str, Any]:
        operation = document["paths"][path]["get"]
        return next(p for p in operation["parameters"] if p["name"] == name)

    assert parameter("/api/v1/tools/", "enabled")["schema"] == {"type": "boolean"}
    assert parameter("/api/v1/background-calls/", "is_task")["schema"] == {"type": "boolean"}
    assert parameter("/api/v1/sessions/", "closed")["schema"] == {"type": "boolean"}
    assert parameter("/api/v1/tools/", "kind")["schema"] == {"type": "string"}
