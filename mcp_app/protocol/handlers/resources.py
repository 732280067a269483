"""``resources/list``, ``resources/templates/list``, ``resources/read`` (every revision) and
``resources/subscribe``/``resources/unsubscribe`` (legacy sessions only; a resource served
from an upstream is subscribed to there too, through ``RequestContext.watcher``).

A read resolves the URI against the concrete resources first, then against the templates in
snapshot order; the first template that matches *and* has something at that URI wins. A miss
is ``-32002`` for legacy sessions and ``-32602`` for 2026-07-28, with ``data.uri`` in both,
and never an empty ``contents`` list (protocol.md §1.7).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from mcp_app.protocol.catalog import CatalogSnapshot, ResourceDef, ResourceTemplateDef
from mcp_app.protocol.context import LegacySession, RequestContext
from mcp_app.protocol.errors import (
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND,
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpError,
    RelayedError,
    ResourceNotFound,
)
from mcp_app.protocol.handlers.listing import list_page
from mcp_app.protocol.messages import ListParams, UriParams
from mcp_app.protocol.policies import (
    RESOURCES_READ,
    PolicyCall,
    PolicyRecord,
    PolicyRefused,
    policy_refusal,
)
from mcp_app.protocol.ports import SessionStore
from mcp_app.protocol.shaping import shape_resource, shape_resource_template
from mcp_app.protocol.storable import is_storable_text, require_storable
from mcp_app.protocol.uritemplate import TemplateCache, match
from mcp_app.protocol.versions import Feature

logger = logging.getLogger(__name__)


async def handle_resources_list(ctx: RequestContext, params: ListParams) -> dict[str, Any]:
    """Return one page of concrete resources."""
    return list_page(
        ctx,
        params,
        items=ctx.catalog.resources,
        key=lambda resource: resource.uri,
        list_name="resources",
        result_key="resources",
        shape=shape_resource,
    )


async def handle_resources_templates_list(
    ctx: RequestContext, params: ListParams
) -> dict[str, Any]:
    """Return one page of resource templates."""
    return list_page(
        ctx,
        params,
        items=ctx.catalog.resource_templates,
        key=lambda template: template.uri_template,
        list_name="resource_templates",
        result_key="resourceTemplates",
        shape=shape_resource_template,
    )


def _not_found(ctx: RequestContext, uri: str) -> McpError:
    if ctx.supports(Feature.RESOURCE_NOT_FOUND_AS_INVALID_PARAMS):
        return InvalidParams("Resource not found", {"uri": uri})
    return ResourceNotFound("Resource not found", {"uri": uri})


def _shape_contents(contents: Sequence[Mapping[str, Any]], uri: str) -> list[dict[str, Any]]:
    # Every item names its URI (schema: ResourceContents.uri is required); a reader that
    # leaves it out means the URI that was read.
    shaped = []
    for item in contents:
        entry = dict(item)
        entry.setdefault("uri", uri)
        shaped.append(entry)
    return shaped


async def handle_resources_read(
    ctx: RequestContext, params: UriParams, record: PolicyRecord
) -> dict[str, Any]:
    """Return the contents at ``params.uri``; what the endpoint's policies do about the read
    goes to ``record``.

    Raises:
        ResourceNotFound: legacy, nothing at that URI.
        InvalidParams: modern, nothing at that URI.
        InternalError: the reader failed unexpectedly.
    """
    uri = params.uri
    policies = ctx.catalog.policies
    call = PolicyCall(RESOURCES_READ, uri)
    if policies is not None:
        try:
            policies.before(call, {"uri": uri}, record.decisions)
        except PolicyRefused as refused:
            raise policy_refusal(refused) from None
    try:
        contents, private = await _read(ctx, uri)
    except RelayedError as exc:
        if exc.code in (RESOURCE_NOT_FOUND, INVALID_PARAMS):
            # An upstream's "not found" (either revision's code) in this revision's words.
            raise _not_found(ctx, uri) from None
        raise
    except McpError:
        raise
    except Exception:
        logger.exception("Resource read failed")
        raise InternalError("Resource read failed") from None
    if not contents:
        raise _not_found(ctx, uri)
    result: dict[str, Any] = {"contents": _shape_contents(contents, uri)}
    if private and ctx.supports(Feature.CACHEABLE_RESULTS):
        # Narrower than the default scope, which finish_result keeps (2026-07-28
        # server/utilities/caching: "private" when the response depends on the caller).
        result["cacheScope"] = "private"
    if policies is not None:
        result = policies.after(call, result, record.decisions)
    return result


async def _read(ctx: RequestContext, uri: str) -> tuple[Sequence[Mapping[str, Any]] | None, bool]:
    """The contents at ``uri``, and whether they may depend on the caller."""
    named = ctx.named_item
    templates = ctx.catalog.resource_templates
    start = None
    if type(named) is ResourceTemplateDef and ctx.named_variables is not None:
        start = _position(templates, named)
    if start is not None:
        # Inbound classification found no resource at ``uri``, and this template is the first
        # it matches (those before it match nothing): read it with the variables it found.
        template = templates[start]
        contents = await ctx.resources.read_template(template, uri, ctx.named_variables or {})
        if contents:
            return contents, template.private
        start += 1
    else:
        resource = named if type(named) is ResourceDef and named.uri == uri else None
        resource = resource or ctx.catalog.resource(uri)
        if resource is not None:
            return await ctx.resources.read_resource(resource), resource.private
        start = 0
    for template in templates[start:] if start else templates:
        try:
            variables = match(template.uri_template, uri, ctx.templates)
        except ValueError:
            # The catalog refuses invalid templates on save; skip one that slipped through.
            logger.warning("Skipping an invalid resource template")
            continue
        if variables is None:
            continue
        contents = await ctx.resources.read_template(template, uri, variables)
        if contents:
            return contents, template.private
    return None, False


def _position(templates: Sequence[ResourceTemplateDef], template: object) -> int | None:
    """Where ``template`` itself (not an equal one) is in ``templates``, or None."""
    for index, candidate in enumerate(templates):
        if candidate is template:
            return index
    return None


def _session(ctx: RequestContext) -> tuple[LegacySession, SessionStore]:
    if ctx.session is None or ctx.sessions is None:
        raise InvalidRequest("Resource subscriptions need a session")
    return ctx.session, ctx.sessions


def subscription_source(
    catalog: CatalogSnapshot, uri: str, templates: TemplateCache | None = None
) -> ResourceDef | ResourceTemplateDef | None:
    """Where a subscription to ``uri`` is served from: the concrete resource at that URI,
    else the first template that matches it (a read would try it first), else None.

    ``templates`` keeps the parsed templates (None: parsed afresh)."""
    resource = catalog.resource(uri)
    if resource is not None:
        return resource
    for template in catalog.resource_templates:
        try:
            if match(template.uri_template, uri, templates) is not None:
                return template
        except ValueError:
            continue  # an invalid template, skipped as a read skips it
    return None


async def handle_resources_subscribe(ctx: RequestContext, params: UriParams) -> dict[str, Any]:
    """Subscribe this session to ``notifications/resources/updated`` for ``params.uri``.

    A resource served from elsewhere (an upstream's) is subscribed to there too, after the
    session row has it (an update arriving at once finds the subscriber). If that fails the
    client gets the error and the session is left as it was.
    """
    session, sessions = _session(ctx)
    # The session row keeps its subscriptions.
    require_storable(params.uri, "params.uri")
    await sessions.subscribe(session.id, params.uri)
    source = subscription_source(ctx.catalog, params.uri, ctx.templates)
    if source is not None and ctx.watcher is not None:
        try:
            await ctx.watcher.watch(session.id, params.uri, source)
        except BaseException:
            if params.uri not in session.subscriptions:
                await sessions.unsubscribe(session.id, params.uri)
            raise
    session.subscriptions = session.subscriptions | {params.uri}
    return {}


async def handle_resources_unsubscribe(ctx: RequestContext, params: UriParams) -> dict[str, Any]:
    """Cancel this session's subscription to ``params.uri`` (a no-op when absent), at the
    resource's source too."""
    session, sessions = _session(ctx)
    if not is_storable_text(params.uri):
        return {}  # never subscribed: a subscription with this URI cannot be stored
    await sessions.unsubscribe(session.id, params.uri)
    session.subscriptions = session.subscriptions - {params.uri}
    source = subscription_source(ctx.catalog, params.uri, ctx.templates)
    if source is not None and ctx.watcher is not None:
        await ctx.watcher.unwatch(session.id, params.uri, source)
    return {}
