"""Resources, resource templates and prompts of an upstream MCP server, served by a live
endpoint to the SDK client.

The upstream is the official SDK's server (``tests/support/mcp_upstream_server.py``) in a
subprocess; our endpoint runs in a live Daphne process and reads the upstream's resources and
gets its prompts on every request, through the same session, breaker and credential as its
tools.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from mcp_app.models import (
    CallLog,
    Endpoint,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.protocol import errors
from mcp_app.services.snapshots import build_snapshot
from tests.support.catalog import make_endpoint
from tests.support.live import flush_database, free_port
from tests.support.mcp_upstream_server import PNG, RunningUpstream, run_mcp_upstream

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    with run_mcp_upstream(tmp_path_factory.mktemp("e2e-upstream-rp")) as running:
        yield running


def _resource(uri: str, upstream: Upstream, remote_uri: str = "", **fields: Any) -> Resource:
    resource = Resource(uri=uri, name=uri.rsplit("/", 1)[-1], upstream=upstream, **fields)
    resource.remote_uri = remote_uri
    resource.full_clean()
    resource.save()
    return resource


def _template(uri_template: str, upstream: Upstream, remote: str = "") -> ResourceTemplate:
    template = ResourceTemplate(
        uri_template=uri_template,
        name="notes",
        kind=ResourceTemplate.Kind.UPSTREAM,
        upstream=upstream,
        remote_uri_template=remote,
    )
    template.full_clean()
    template.save()
    return template


@pytest.fixture(scope="module")
def server(
    live_server_url: str, upstream: RunningUpstream, django_db_blocker: Any
) -> Iterator[str]:
    with django_db_blocker.unblock():
        up = Upstream.objects.create(name="up-rp", url=upstream.url, allow_networks="127.0.0.1/32")
        # Nothing listens there: every read fails to connect.
        dead = Upstream.objects.create(
            name="dead-rp",
            url=f"http://127.0.0.1:{free_port()}/mcp",
            allow_networks="127.0.0.1/32",
            connect_timeout=2,
            call_timeout=5,
        )
        endpoint = make_endpoint("e2e-rp")
        endpoint.resources.add(
            _resource("ours://readme", up, remote_uri="up://readme", mime_type="text/markdown"),
            _resource("up://pixel.png", up, mime_type="image/png"),
            _resource("ours://missing", up, remote_uri="up://nothing-there"),
            _resource("dead://readme", dead),
        )
        local = Resource(uri="ours://local-rp", name="local", text="kept here")
        local.full_clean()
        local.save()
        endpoint.resources.add(local)
        endpoint.resource_templates.add(
            _template("up://notes/{topic}", up),
            _template("ours://topics/{topic}", up, remote="up://notes/{topic}"),
        )
        review = Prompt(name="review", description="Code review, by the upstream.", upstream=up)
        review.full_clean()
        review.save()
        PromptArgument.objects.create(prompt=review, name="code", required=True)
        PromptArgument.objects.create(prompt=review, name="language", position=1)
        endpoint.prompts.add(review)
    yield live_server_url
    flush_database(django_db_blocker)


@pytest.fixture(params=["legacy", "2026-07-28"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_a_text_resource_is_read_from_the_upstream_under_our_uri(server, mode):
    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-rp", mode=mode) as client:
        listed = await client.list_resources()
        read = await client.read_resource("ours://readme")
    assert "ours://readme" in {str(resource.uri) for resource in listed.resources}
    [contents] = read.contents
    assert contents.text == "# Upstream readme"
    assert str(contents.uri) == "ours://readme"
    assert contents.mime_type == "text/markdown"


async def test_2026_reads_from_an_upstream_are_private_to_the_caller(server):
    """Spec-mandated (2026-07-28 server/utilities/caching): ``public`` only for a response
    with nothing caller-specific. An upstream's resource is read in the caller's own upstream
    session, so what it holds may differ per caller."""
    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-rp", mode="2026-07-28") as client:
        direct = await client.read_resource("ours://readme")
        templated = await client.read_resource("ours://topics/rust")
        local = await client.read_resource("ours://local-rp")
    assert (direct.cache_scope, templated.cache_scope) == ("private", "private")
    assert local.cache_scope == "public"
    assert (direct.ttl_ms, templated.ttl_ms) == (0, 0)


async def test_a_binary_resource_comes_back_as_the_upstreams_blob(server, mode):
    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-rp", mode=mode) as client:
        read = await client.read_resource("up://pixel.png")
    [contents] = read.contents
    assert base64.b64decode(contents.blob) == base64.b64decode(PNG)
    assert contents.mime_type == "image/png"


async def test_a_templated_uri_is_read_from_the_upstream(server, mode):
    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-rp", mode=mode) as client:
        listed = await client.list_resource_templates()
        same = await client.read_resource("up://notes/python")
        # Ours under another template: the variables fill the upstream's.
        mapped = await client.read_resource("ours://topics/rust%20lang")
    assert {t.uri_template for t in listed.resource_templates} == {
        "up://notes/{topic}",
        "ours://topics/{topic}",
    }
    assert [(str(c.uri), c.text) for c in same.contents] == [
        ("up://notes/python", "Notes on python")
    ]
    assert [(str(c.uri), c.text) for c in mapped.contents] == [
        ("ours://topics/rust%20lang", "Notes on rust lang")
    ]


async def test_a_prompt_is_got_from_the_upstream_with_the_callers_arguments(server, mode):
    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-rp", mode=mode) as client:
        listed = await client.list_prompts()
        got = await client.get_prompt("review", {"code": "x = 1", "language": "rust"})
    [prompt] = listed.prompts
    assert [(a.name, bool(a.required)) for a in prompt.arguments] == [
        ("code", True),
        ("language", False),
    ]
    [message] = got.messages
    assert message.role == "user"
    assert message.content.text == "Review this rust code: x = 1"


async def test_arguments_of_upstream_templates_and_prompts_are_completed_there(server, mode):
    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-rp", mode=mode) as client:
        renamed = await client.complete(
            ResourceTemplateReference(type="ref/resource", uri="ours://topics/{topic}"),
            {"name": "topic", "value": "py"},
        )
        prompt = await client.complete(
            PromptReference(type="ref/prompt", name="review"), {"name": "language", "value": "r"}
        )
        # The upstream offers nothing for this one: none, not the row's (empty) list.
        code = await client.complete(
            PromptReference(type="ref/prompt", name="review"), {"name": "code", "value": ""}
        )
    assert renamed.completion.values == ["python", "pytest"]
    assert prompt.completion.values == ["rust", "ruby"]
    assert code.completion.values == []


async def test_a_missing_required_argument_is_refused_before_the_upstream_is_asked(server):
    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-rp", mode="legacy") as client:
        with pytest.raises(MCPError) as excinfo:
            await client.get_prompt("review", {})
    assert excinfo.value.error.code == errors.INVALID_PARAMS
    assert "code" in excinfo.value.error.message


async def test_the_upstreams_not_found_is_this_revisions_not_found(server, mode):
    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-rp", mode=mode) as client:
        with pytest.raises(MCPError) as excinfo:
            await client.read_resource("ours://missing")
    expected = errors.RESOURCE_NOT_FOUND if mode == "legacy" else errors.INVALID_PARAMS
    assert excinfo.value.error.code == expected


async def test_an_unreachable_upstream_is_a_clear_error_and_a_call_log_row(server):
    async with asyncio.timeout(30), Client(f"{server}/mcp/e2e-rp", mode="legacy") as client:
        with pytest.raises(MCPError) as excinfo:
            await client.read_resource("dead://readme")
        # The endpoint still serves what does not need that upstream.
        read = await client.read_resource("ours://readme")
    assert excinfo.value.error.code == errors.INTERNAL_ERROR
    assert "Could not reach the upstream 'dead-rp'" in excinfo.value.error.message
    assert read.contents[0].text == "# Upstream readme"

    async def recorded() -> CallLog | None:
        return await CallLog.objects.filter(
            rpc_method="resources/read", target="dead://readme"
        ).afirst()

    async with asyncio.timeout(15):
        while (row := await recorded()) is None:
            await asyncio.sleep(0.05)
    # The upstream failed, not the request: an auditor tells the two apart.
    assert row.status == CallLog.Status.UPSTREAM_ERROR
    assert row.upstream == "dead-rp"
    assert "Could not reach the upstream" in row.error_message
    dead = await Upstream.objects.aget(name="dead-rp")
    assert dead.consecutive_failures >= 1 and "Could not reach" in dead.last_error


def test_a_resource_is_read_from_an_upstream_or_has_content_never_both(upstream):
    up = Upstream.objects.create(name="check-rp", url=upstream.url, allow_networks="127.0.0.1/32")
    both = Resource(uri="ours://both", name="both", upstream=up, text="local")
    neither = Resource(uri="ours://neither", name="neither")
    stray = Resource(uri="ours://stray", name="stray", text="local", remote_uri="up://readme")
    bad_remote = Resource(uri="ours://bad", name="bad", upstream=up, remote_uri="no scheme")
    for resource, needle in (
        (both, "no text or file"),
        (neither, "either text or a file"),
        (stray, "Only a resource read from an upstream"),
        (bad_remote, "remote_uri"),
    ):
        with pytest.raises(ValidationError) as excinfo:
            resource.full_clean()
        assert needle in str(excinfo.value)


def test_a_template_is_read_from_an_upstream_only_when_it_is_of_that_kind(upstream):
    up = Upstream.objects.create(name="check-rt", url=upstream.url, allow_networks="127.0.0.1/32")
    base = {"uri_template": "ours://t/{x}", "name": "t"}
    cases = (
        (ResourceTemplate(**base, kind=ResourceTemplate.Kind.UPSTREAM), "names its upstream"),
        (
            ResourceTemplate(**base, kind="template", config={"template": "x"}, upstream=up),
            "names its upstream",
        ),
        (
            ResourceTemplate(**base, kind="template", config={"template": "x"},
                             remote_uri_template="up://t/{x}"),
            "Only a template read from an upstream",
        ),
        (
            ResourceTemplate(**base, kind=ResourceTemplate.Kind.UPSTREAM, upstream=up,
                             remote_uri_template="up://t/{y}"),
            "same variables",
        ),
        (
            ResourceTemplate(**base, kind=ResourceTemplate.Kind.UPSTREAM, upstream=up,
                             config={"template": "x"}),
            "has no config",
        ),
    )  # fmt: skip
    for template, needle in cases:
        with pytest.raises(ValidationError) as excinfo:
            template.full_clean()
        assert needle in str(excinfo.value)


def test_renaming_an_upstream_keeps_what_uses_it_working(upstream):
    up = Upstream.objects.create(name="old-rp", url=upstream.url, allow_networks="127.0.0.1/32")
    endpoint = make_endpoint("rename-rp")
    tool = Tool(
        name="renamed_echo",
        description="The upstream's echo.",
        kind=Tool.Kind.MCP_UPSTREAM,
        config={"upstream": "old-rp", "tool": "echo"},
        input_schema={"type": "object"},
    )
    tool.full_clean()
    tool.save()
    endpoint.tools.add(tool)
    endpoint.resources.add(_resource("renamed://readme", up, remote_uri="up://readme"))
    template_only = make_endpoint("rename-rp-templates")
    template_only.resource_templates.add(_template("renamed://notes/{topic}", up))
    version = Endpoint.objects.get(pk=endpoint.pk).catalog_version
    template_version = Endpoint.objects.get(pk=template_only.pk).catalog_version

    up.name = "new-rp"
    up.save()

    tool.refresh_from_db()
    assert tool.config == {"upstream": "new-rp", "tool": "echo"}
    assert Endpoint.objects.get(pk=endpoint.pk).catalog_version > version
    [resource] = build_snapshot(Endpoint.objects.get(pk=endpoint.pk)).resources
    assert resource.binding.upstream == "new-rp"
    template_only = Endpoint.objects.get(pk=template_only.pk)
    assert template_only.catalog_version > template_version
    [template] = build_snapshot(template_only).resource_templates
    assert template.binding.upstream == "new-rp"
