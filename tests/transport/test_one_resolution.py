"""A request is resolved once: its target and the item it names are found by inbound
classification.

Inbound classification returns one value (``inbound.Resolved``: era, envelope, target, the
definition of the tool, prompt, resource or resource template it names) that the scope
check, the limits, dispatch, the handlers and the call log take, instead of each finding the
target and looking the item up again. These tests count the lookups of one warm request in
each era, by wrapping the functions that do them (each call still goes through). The prompt
and resource reads go to an OAuth endpoint, whose scope check needs the item too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_app.models import Endpoint, Prompt, PromptMessage, Resource, ResourceTemplate
from mcp_app.protocol import methods, uritemplate
from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.services import tracing
from tests.support.catalog import echo_schema, make_endpoint, make_python_tool
from tests.support.oauth import issue_token
from tests.transport.test_query_budget import initialize, modern, post


@dataclass
class Lookups:
    targets: list[str | None] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    # The resource templates a URI was matched against, in order.
    matches: list[str] = field(default_factory=list)

    def clear(self) -> None:
        for found in (self.targets, self.tools, self.prompts, self.resources, self.matches):
            found.clear()


def _counting(monkeypatch: pytest.MonkeyPatch, name: str, original: Any, counted: Any) -> None:
    # Every module that imported the function by name gets the counting one.
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("mcp_app") and (
            getattr(module, name, None) is original
        ):
            monkeypatch.setattr(module, name, counted)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[Lookups]:
    seen = Lookups()
    target_of = methods.target_of
    match = uritemplate.match
    tool, prompt, resource = CatalogSnapshot.tool, CatalogSnapshot.prompt, CatalogSnapshot.resource

    def counted_target_of(method: str, params: Any) -> str | None:
        found = target_of(method, params)
        seen.targets.append(found)
        return found

    def counted_match(template: str, uri: str, cache: Any = None) -> Any:
        seen.matches.append(template)
        return match(template, uri, cache)

    def counted_tool(self: CatalogSnapshot, name: str) -> Any:
        seen.tools.append(name)
        return tool(self, name)

    def counted_prompt(self: CatalogSnapshot, name: str) -> Any:
        seen.prompts.append(name)
        return prompt(self, name)

    def counted_resource(self: CatalogSnapshot, uri: str) -> Any:
        seen.resources.append(uri)
        return resource(self, uri)

    _counting(monkeypatch, "target_of", target_of, counted_target_of)
    _counting(monkeypatch, "match", match, counted_match)
    monkeypatch.setattr(CatalogSnapshot, "tool", counted_tool)
    monkeypatch.setattr(CatalogSnapshot, "prompt", counted_prompt)
    monkeypatch.setattr(CatalogSnapshot, "resource", counted_resource)
    yield seen


def _endpoint(slug: str) -> None:
    endpoint = make_endpoint(slug)
    endpoint.tools.add(make_python_tool("echo", "echo", input_schema=echo_schema()))


@pytest.mark.django_db(transaction=True)
def test_a_modern_call_finds_its_target_and_tool_once(lookups: Lookups) -> None:
    _endpoint("resolved-modern")
    assert modern("resolved-modern", "tools/list", {}).status == 200  # caches the snapshot
    lookups.clear()
    answer = modern(
        "resolved-modern", "tools/call", {"name": "echo", "arguments": {"message": "x"}}, "echo"
    )
    assert answer.json()["result"]["content"][0]["text"] == "x"
    assert (lookups.targets, lookups.tools) == (["echo"], ["echo"])


@pytest.mark.django_db(transaction=True)
def test_a_legacy_call_finds_its_target_and_tool_once(lookups: Lookups) -> None:
    _endpoint("resolved-legacy")
    session_id = initialize("resolved-legacy", "2025-11-25")
    headers = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "y"}},
    }
    lookups.clear()
    answer = post("resolved-legacy", call, headers)
    assert answer.json()["result"]["content"][0]["text"] == "y"
    assert (lookups.targets, lookups.tools) == (["echo"], ["echo"])


def _oauth_endpoint(slug: str) -> str:
    """An OAuth endpoint with a prompt, a resource and two templates; return a token for it."""
    endpoint = make_endpoint(slug, auth_mode=Endpoint.AuthMode.OAUTH)
    prompt = Prompt.objects.create(name="brief", description="A briefing.")
    PromptMessage.objects.create(prompt=prompt, position=0, role="user", text="Brief me.")
    endpoint.prompts.add(prompt)
    endpoint.resources.add(Resource.objects.create(uri="res://readme", name="readme", text="Hi"))
    for variable, uri_template in (("x", "res://a/{x}"), ("y", "res://b/{y}")):
        template = ResourceTemplate.objects.create(
            uri_template=uri_template,
            name=f"template {variable}",
            kind=ResourceTemplate.Kind.TEMPLATE,
            config={"template": f"About {{{{ {variable} }}}}"},
        )
        endpoint.resource_templates.add(template)
    user = User.objects.create_user(f"{slug}-user")
    return issue_token(user, resource=[f"{settings.PUBLIC_BASE_URL}/mcp/{slug}"])


# A request per item kind, what its answer holds, and what it may look up (once each): the
# prompt, the resource, or no resource at the URI and each template up to the one it matches.
ITEM_REQUESTS = [
    pytest.param(
        "prompts/get", {"name": "brief"}, "Brief me.", ["brief"], [], [], id="prompts/get"
    ),
    pytest.param(
        "resources/read", {"uri": "res://readme"}, "Hi", [], ["res://readme"], [], id="resource"
    ),
    pytest.param(
        "resources/read",
        {"uri": "res://b/1"},
        "About 1",
        [],
        ["res://b/1"],
        ["res://a/{x}", "res://b/{y}"],
        id="template",
    ),
]


def _text(answer: Any) -> str:
    result = answer.json()["result"]
    if "messages" in result:
        return str(result["messages"][0]["content"]["text"])
    return str(result["contents"][0]["text"])


def _request(slug: str, token: str, era: str, method: str, params: dict[str, Any]) -> Any:
    """Send one request in ``era`` ("modern", or "legacy" in a session opened here)."""
    auth = {"authorization": f"Bearer {token}"}
    if era == "legacy":
        session_id = initialize(slug, "2025-11-25", auth)
        headers = {**auth, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
        return lambda: post(
            slug, {"jsonrpc": "2.0", "id": 2, "method": method, "params": params}, headers
        )
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        **auth,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        "mcp-name": params.get("name") or params["uri"],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    return lambda: post(slug, body, headers)


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize(
    ("method", "params", "text", "prompts", "resources", "matches"), ITEM_REQUESTS
)
@pytest.mark.django_db(transaction=True)
def test_a_request_finds_its_prompt_or_resource_once(
    lookups: Lookups,
    era: str,
    method: str,
    params: dict[str, Any],
    text: str,
    prompts: list[str],
    resources: list[str],
    matches: list[str],
) -> None:
    slug = f"resolved-{era}-items"
    send = _request(slug, _oauth_endpoint(slug), era, method, params)
    # The first one caches the token, the snapshot and the caller's view of it.
    assert _text(send()) == text
    lookups.clear()
    assert _text(send()) == text
    assert lookups.targets == [params.get("name") or params["uri"]]
    assert (lookups.prompts, lookups.resources, lookups.matches) == (prompts, resources, matches)


@pytest.mark.django_db(transaction=True)
def test_each_call_of_a_batch_finds_its_target_and_tool_once(lookups: Lookups) -> None:
    _endpoint("resolved-batch")
    session_id = initialize("resolved-batch", "2025-03-26")
    headers = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-03-26"}
    batch = [
        {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": str(n)}},
        }
        for n in (2, 3)
    ]
    lookups.clear()
    answer = post("resolved-batch", batch, headers)
    assert [reply["result"]["content"][0]["text"] for reply in answer.json()] == ["2", "3"]
    assert (lookups.targets, lookups.tools) == (["echo", "echo"], ["echo", "echo"])


@pytest.mark.django_db(transaction=True)
def test_a_traced_call_finds_its_target_once(
    lookups: Lookups, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    monkeypatch.setattr(tracing, "tracer", tracer)
    _endpoint("resolved-traced")
    assert modern("resolved-traced", "tools/list", {}).status == 200  # caches the snapshot
    lookups.clear()
    with tracer.start_as_current_span("POST /mcp/{slug}"):
        answer = modern(
            "resolved-traced", "tools/call", {"name": "echo", "arguments": {"message": "t"}}, "echo"
        )
    assert answer.json()["result"]["content"][0]["text"] == "t"
    request_span = next(s for s in exporter.get_finished_spans() if s.name == "POST /mcp/{slug}")
    assert (request_span.attributes or {}).get("mcp.tool") == "echo"
    assert lookups.targets == ["echo"]
