"""Resources: lists, reads through concrete URIs and templates, not-found per era, subscribe."""

from __future__ import annotations

from collections.abc import Callable

import mcp_types._v2025_11_25 as v2025
import mcp_types._v2026_07_28 as v2026
import pytest

from mcp_app.protocol import errors
from mcp_app.protocol.catalog import ResourceDef, ResourceTemplateDef
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import InvalidParams, InvalidRequest, MethodNotFound, ResourceNotFound

from .conftest import InMemoryResourceReader, InMemorySessionStore

MakeContext = Callable[..., RequestContext]


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_resource_lists_validate_and_are_sorted(make_ctx: MakeContext, version: str) -> None:
    ctx = make_ctx(version)
    resources = await handle_request(ctx, "resources/list", None)
    templates = await handle_request(ctx, "resources/templates/list", {})
    assert [r["uri"] for r in resources["resources"]] == ["file:///empty.txt", "file:///readme.txt"]
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == [
        "files:///{+path}",
        "users://{id}/profile",
    ]
    models = v2026 if version == "2026-07-28" else v2025
    models.ListResourcesResult.model_validate(resources)
    models.ListResourceTemplatesResult.model_validate(templates)
    assert ("ttlMs" in resources and "ttlMs" in templates) is (version == "2026-07-28")


@pytest.mark.parametrize("version", ["2024-11-05", "2026-07-28"])
async def test_read_of_a_concrete_uri_returns_its_contents(
    make_ctx: MakeContext, version: str
) -> None:
    result = await handle_request(
        make_ctx(version), "resources/read", {"uri": "file:///readme.txt"}
    )
    assert result["contents"] == [
        {"uri": "file:///readme.txt", "mimeType": "text/plain", "text": "hello world"}
    ]
    if version == "2026-07-28":
        v2026.ReadResourceResult.model_validate(result)
        assert (result["ttlMs"], result["cacheScope"]) == (0, "public")
    else:
        v2025.ReadResourceResult.model_validate(result)


async def test_read_through_a_template_passes_decoded_variables(
    make_ctx: MakeContext, resource_reader: InMemoryResourceReader
) -> None:
    result = await handle_request(
        make_ctx(), "resources/read", {"uri": "users://J%C3%BCrgen/profile"}
    )
    assert result["contents"][0]["text"] == '{"id": "Jürgen"}'
    assert resource_reader.template_reads == [
        ("users://{id}/profile", "users://J%C3%BCrgen/profile", {"id": "Jürgen"})
    ]


async def test_reserved_template_matches_across_segments(make_ctx: MakeContext) -> None:
    result = await handle_request(make_ctx(), "resources/read", {"uri": "files:///a/b.txt"})
    assert result["contents"] == [{"uri": "files:///a/b.txt", "text": "contents of a/b.txt"}]


@pytest.mark.spec("2025-11-25", "server/resources", "resource not found is -32002")
@pytest.mark.parametrize(
    "uri", ["file:///nowhere.txt", "users://missing/profile", "file:///empty.txt"]
)
async def test_legacy_miss_is_resource_not_found_with_the_uri(
    make_ctx: MakeContext, uri: str
) -> None:
    with pytest.raises(ResourceNotFound) as caught:
        await handle_request(make_ctx("2025-11-25"), "resources/read", {"uri": uri})
    assert caught.value.to_error_object() == {
        "code": errors.RESOURCE_NOT_FOUND,
        "message": "Resource not found",
        "data": {"uri": uri},
    }


@pytest.mark.spec("2026-07-28", "server/resources", "not found is -32602, never -32002")
async def test_modern_miss_is_invalid_params_with_the_uri(make_ctx: MakeContext) -> None:
    with pytest.raises(InvalidParams) as caught:
        await handle_request(make_ctx("2026-07-28"), "resources/read", {"uri": "file:///no"})
    assert caught.value.data == {"uri": "file:///no"}


async def test_read_without_uri_is_invalid_params(make_ctx: MakeContext) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(make_ctx(), "resources/read", {"uri": 5})


@pytest.mark.spec("2025-11-25", "server/resources", "resources/subscribe and unsubscribe")
async def test_subscribe_and_unsubscribe_update_the_session(
    make_ctx: MakeContext, session_store: InMemorySessionStore
) -> None:
    ctx = make_ctx("2025-06-18")
    assert await handle_request(ctx, "resources/subscribe", {"uri": "file:///readme.txt"}) == {}
    assert session_store.subscriptions == {"s-1": {"file:///readme.txt"}}
    assert ctx.session is not None
    assert ctx.session.subscriptions == frozenset({"file:///readme.txt"})
    assert await handle_request(ctx, "resources/unsubscribe", {"uri": "file:///readme.txt"}) == {}
    assert session_store.subscriptions == {"s-1": set()}
    assert ctx.session.subscriptions == frozenset()


async def test_subscribe_without_a_session_is_an_invalid_request(make_ctx: MakeContext) -> None:
    ctx = make_ctx("2025-06-18", session=None, sessions=None)
    with pytest.raises(InvalidRequest):
        await handle_request(ctx, "resources/subscribe", {"uri": "file:///readme.txt"})


@pytest.mark.spec("2026-07-28", "server/resources", "subscribe RPCs are removed")
async def test_subscribe_does_not_exist_in_the_modern_era(make_ctx: MakeContext) -> None:
    with pytest.raises(MethodNotFound):
        await handle_request(make_ctx("2026-07-28"), "resources/subscribe", {"uri": "x"})


class InMemoryWatcher:
    """A ``ResourceWatcher`` recording what it relays; ``refuse`` makes ``watch`` fail."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.relayed: list[tuple[str, str, str, str]] = []

    async def watch(
        self, subscriber: str, uri: str, source: ResourceDef | ResourceTemplateDef
    ) -> None:
        if self.refuse:
            raise errors.InternalError("The upstream 'up' could not be reached.")
        self.relayed.append(("watch", subscriber, uri, _name(source)))

    async def unwatch(
        self, subscriber: str, uri: str, source: ResourceDef | ResourceTemplateDef
    ) -> None:
        self.relayed.append(("unwatch", subscriber, uri, _name(source)))


def _name(source: ResourceDef | ResourceTemplateDef) -> str:
    return source.uri if isinstance(source, ResourceDef) else source.uri_template


async def test_subscriptions_are_relayed_to_where_the_resource_is_served(
    make_ctx: MakeContext, session_store: InMemorySessionStore
) -> None:
    """Our choice: the watcher learns the source (resource, else the first matching
    template), so a resource of an upstream is subscribed to there."""
    watcher = InMemoryWatcher()
    ctx = make_ctx("2025-11-25", watcher=watcher)
    for uri in ("file:///readme.txt", "users://7/profile"):
        await handle_request(ctx, "resources/subscribe", {"uri": uri})
    await handle_request(ctx, "resources/unsubscribe", {"uri": "users://7/profile"})
    await handle_request(ctx, "resources/subscribe", {"uri": "nothing://here"})
    assert watcher.relayed == [
        ("watch", "s-1", "file:///readme.txt", "file:///readme.txt"),
        ("watch", "s-1", "users://7/profile", "users://{id}/profile"),
        ("unwatch", "s-1", "users://7/profile", "users://{id}/profile"),
    ]


async def test_a_subscription_its_source_refuses_is_an_error_and_not_kept(
    make_ctx: MakeContext, session_store: InMemorySessionStore
) -> None:
    ctx = make_ctx("2025-11-25", watcher=InMemoryWatcher(refuse=True))
    with pytest.raises(errors.InternalError):
        await handle_request(ctx, "resources/subscribe", {"uri": "file:///readme.txt"})
    assert session_store.subscriptions == {"s-1": set()}
    assert ctx.session is not None and ctx.session.subscriptions == frozenset()
