"""The API's own OpenAPI schema, exercised by schemathesis against a live server.

The schema is the one the running server serves at ``/api/schema/``; schemathesis generates
requests for every operation (a few examples each, no shrinking, so the run stays bounded;
``API_SCHEMA_COVERAGE=1`` adds schemathesis' coverage phase)
and sends them with a superuser's API token. No answer may be a 5xx, and every answer must
match what the schema says of its status: content type and body.
"""

from __future__ import annotations

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
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog import endpoint_create, tool_create
from tests.support.live import flush_database, live_server_url  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db

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
def api_auth(live_server_url: str, django_db_blocker: Any) -> Iterator[dict[str, Any]]:  # noqa: F811
    with django_db_blocker.unblock():
        admin = User.objects.create_superuser("schema-admin", password="unused-password-123")
        _token, key = api_token_create(user=admin, name="schemathesis")
        endpoint = endpoint_create(slug="schema", auth_mode="public")
        tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[endpoint])
    yield {"base_url": live_server_url, "headers": {"Authorization": f"Bearer {key}"}}
    flush_database(django_db_blocker)


def generated_schema() -> dict[str, Any]:
    """The schema /api/schema/ serves, generated in this process (Django is set up)."""
    return json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True)))


# Loaded at collection: schemathesis' fixture-based loader does not run under pytest 9.
schema = schemathesis.openapi.from_dict(generated_schema())


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
        checks=[not_a_server_error, content_type_conformance, response_schema_conformance],
    )


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
