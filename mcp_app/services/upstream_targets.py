"""An upstream MCP server as a call reaches it: resolving it, its circuit breaker, its lists.

The ``mcp_upstream`` executor asks for its upstream before each call (``upstream_target``,
through ``services.execution.ServiceResolvers``): that reads the Upstream row (enabled?
breaker open?), resolves its credential into headers like an HTTP tool's, and hands the
executor a report hook that records the outcome on the row. Only failures to reach or
understand the upstream (``UpstreamUnavailable``) count towards the breaker; a tool error the
upstream reports is a healthy answer, and so is a tool too slow for the call timeout on an
upstream that still answers a ping (``UpstreamToolSlow``). The breaker's state lives on the
row, so every process (and the admin) sees the same one: after ``failure_threshold``
consecutive failures calls fail at once until ``cooldown_seconds`` have passed, then the next
call tries again (half-open) and either closes the breaker or opens it for another cool-down.

Listing what an upstream offers goes through the same resolution, and so does the sync its
sync policy makes when the upstream announces changed tools (``upstream_tools_changed``,
the hook every resolved target carries): the plans and their application are
``services/upstream_sync.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.db.models import F
from django.utils import timezone

from mcp_app.executors import mcp_upstream
from mcp_app.executors.base import UpstreamTarget
from mcp_app.executors.mcp_upstream import (
    UpstreamRefused,
    UpstreamUnavailable,
    list_tools,
    negotiated_revision,
)
from mcp_app.executors.netguard import NetworkPolicy, global_policy, refusal
from mcp_app.models import Tool, Upstream
from mcp_app.models.connection import forward_header_problem, split_header_names
from mcp_app.models.upstream import split_networks
from mcp_app.protocol.results import ToolError
from mcp_app.services.catalog_changes import catalog_changed, endpoint_ids_for
from mcp_app.services.connections import user_auth
from mcp_app.services.credentials import credential_load, credential_resolve
from mcp_app.services.database import in_thread
from mcp_app.services.stdio import stdio_bridge, stdio_credentials
from mcp_app.services.upstream_sync import SyncOutcome, UpstreamOffer, upstream_policy_apply

logger = logging.getLogger(__name__)


# A healthy upstream's last_success_at is rewritten at most this often per process.
SUCCESS_WRITE_INTERVAL = datetime.timedelta(seconds=60)


_last_success_written: dict[int, datetime.datetime] = {}


@dataclass(frozen=True, slots=True)
class _Loaded:
    pk: int
    target: UpstreamTarget
    per_user: bool = False


def _load(name: str, *, breaker: bool = True) -> tuple[Upstream, Any]:
    upstream = Upstream.objects.select_related("credential").filter(name=name).first()
    if upstream is None:
        raise ToolError(f"The upstream {name!r} does not exist.")
    if not upstream.enabled:
        raise ToolError(f"The upstream {name!r} is disabled.")
    if breaker and upstream.circuit_open:
        # Not contacted, so not a failure to count; but the upstream's, not its tool's.
        raise UpstreamUnavailable(
            f"The upstream {name!r} is failing (circuit breaker open after "
            f"{upstream.consecutive_failures} consecutive failures); try again later."
        )
    loaded = credential_load(upstream.credential.name) if upstream.credential else None
    return upstream, loaded


async def upstream_resolve(
    name: str,
    *,
    breaker: bool = True,
    caller: str = "",
    anonymous: bool = False,
    request_headers: Mapping[str, Sequence[str]] | None = None,
) -> _Loaded:
    """Read the upstream ``name`` and build the executor's target, credential resolved.

    ``breaker=False`` (the health probe) reaches an upstream whose breaker is open too.
    A per-user upstream carries ``caller``'s own token (``services.connections``), in a
    session of the caller's own even when the upstream is marked stateless; ``anonymous``
    (the probe) reaches it with no token at all. Of the client's ``request_headers``, those
    the upstream's ``forward_headers`` names are sent along (never a denied one, and never
    over the credential's own headers).

    Raises:
        ToolError: unknown, disabled, breaker open, the credential cannot be resolved, or
            (per-user) the caller has no connection.
    """
    upstream, loaded = await in_thread(_load)(name, breaker=breaker)
    if upstream.transport == Upstream.Transport.STDIO:
        return await _stdio_resolve(upstream)
    caller_auth = None
    if upstream.per_user and not anonymous:
        caller_auth = await user_auth(upstream, caller)
    networks = tuple(split_networks(upstream.allow_networks))
    headers: Mapping[str, str] = {}
    query: Mapping[str, str] = {}
    secrets: tuple[str, ...] = ()
    if loaded is not None:
        policy = global_policy().merged(_policy(networks))
        auth = await credential_resolve(loaded=loaded, policy=policy)
        headers, query, secrets = auth.headers, auth.query, auth.secrets
    if request_headers and upstream.forward_headers:
        # The credential's own headers win, whatever the case the client wrote them in.
        taken = {name.lower() for name in headers}
        forwarded = forwarded_headers(upstream.forward_headers, request_headers)
        headers = {
            **{name: value for name, value in forwarded.items() if name.lower() not in taken},
            **headers,
        }
    global_networks = tuple(str(network) for network in global_policy().allow_networks)
    target = UpstreamTarget(
        key=f"{upstream.pk}:{upstream.updated_at.isoformat()}:{loaded.version if loaded else ''}",
        name=upstream.name,
        url=upstream.url,
        headers=headers,
        query=query,
        secrets=secrets,
        connect_timeout=upstream.connect_timeout,
        call_timeout=upstream.call_timeout,
        allow_networks=networks + global_networks,
        stateless=upstream.stateless and caller_auth is None,
        session_idle_seconds=upstream.session_idle_seconds,
        max_sessions=upstream.max_sessions,
        tools_changed=functools.partial(upstream_tools_changed, upstream.pk),
    )
    if caller_auth is not None:
        target = replace(target, caller_auth=caller_auth, secrets=secrets + caller_auth.secrets())
    return _Loaded(pk=upstream.pk, target=target, per_user=upstream.per_user)


def forwarded_headers(names: str, request_headers: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """The headers of ``request_headers`` the forward list ``names`` lets through (the first
    value of each; a denied name is skipped even if a row was saved without validation)."""
    forwarded = {}
    for name in split_header_names(names):
        values = request_headers.get(name.lower())
        if values and forward_header_problem(name) is None:
            forwarded[name] = values[0]
    return forwarded


async def _stdio_resolve(upstream: Upstream) -> _Loaded:
    """A stdio upstream's target: its endpoint on the bridge, and that host alone allowed.

    The credentials of its environment are read here too: their secrets are redacted from
    what the upstream sends, and their versions are part of the key, so a rotated secret
    starts new sessions (new children with the new environment).
    """
    bridge = stdio_bridge(upstream.name)
    loaded = await in_thread(stdio_credentials)(upstream.stdio_env)
    versions = ",".join(f"{variable}={c.version}" for variable, c in sorted(loaded.items()))
    target = UpstreamTarget(
        key=f"{upstream.pk}:{upstream.updated_at.isoformat()}:{versions}",
        name=upstream.name,
        url=bridge.url,
        headers=bridge.headers,
        secrets=(bridge.secret, *(c.secret for c in loaded.values() if c.secret)),
        connect_timeout=upstream.connect_timeout,
        call_timeout=upstream.call_timeout,
        allow_hosts=(bridge.host,),
        stateless=upstream.stateless,
        session_idle_seconds=upstream.session_idle_seconds,
        max_sessions=upstream.max_sessions,
        tools_changed=functools.partial(upstream_tools_changed, upstream.pk),
    )
    return _Loaded(pk=upstream.pk, target=target)


def _policy(networks: tuple[str, ...]) -> NetworkPolicy:
    return NetworkPolicy.build(networks=networks)


async def upstream_target(
    name: str, *, caller: str = "", request_headers: Mapping[str, Sequence[str]] | None = None
) -> UpstreamTarget:
    """The upstream ``name`` resolved for one call of ``caller``, reporting back how the call
    went.

    Raises:
        ToolError: unknown, disabled, breaker open, the credential cannot be resolved, or
            (per-user) the caller has no connection.
    """
    loaded = await upstream_resolve(name, caller=caller, request_headers=request_headers)

    async def report(failure: str | None) -> None:
        if failure is None:
            await upstream_record_success(loaded.pk, negotiated_revision(loaded.target.key))
        else:
            await upstream_record_failure(loaded.pk, failure)

    return replace(loaded.target, report=report)


def _record_failure(pk: int, message: str) -> None:
    """Count a failure; open the breaker when the count reaches the threshold."""
    now = timezone.now()
    Upstream.objects.filter(pk=pk).update(
        consecutive_failures=F("consecutive_failures") + 1,
        last_error=message[:2000],
        last_error_at=now,
    )
    upstream = (
        Upstream.objects.filter(pk=pk)
        .only("consecutive_failures", "failure_threshold", "cooldown_seconds")
        .first()
    )
    if upstream is not None and upstream.consecutive_failures >= upstream.failure_threshold:
        until = now + datetime.timedelta(seconds=upstream.cooldown_seconds)
        Upstream.objects.filter(pk=pk).update(circuit_open_until=until)
        logger.warning(
            "Upstream %s: circuit breaker open for %g s after %d consecutive failures",
            pk, upstream.cooldown_seconds, upstream.consecutive_failures,
        )  # fmt: skip
    _last_success_written.pop(pk, None)


def _record_success(pk: int, revision: str | None) -> None:
    """Close the breaker and note the contact (rewritten at most once a minute when healthy)."""
    now = timezone.now()
    written = _last_success_written.get(pk)
    if written is not None and now - written < SUCCESS_WRITE_INTERVAL:
        return
    fields: dict[str, Any] = {
        "last_success_at": now,
        "consecutive_failures": 0,
        "circuit_open_until": None,
    }
    if revision:
        fields["protocol_version"] = revision
    Upstream.objects.filter(pk=pk).update(**fields)
    _last_success_written[pk] = now


async def upstream_record_failure(pk: int, message: str) -> None:
    await in_thread(_record_failure)(pk, message)


async def upstream_record_success(pk: int, revision: str | None) -> None:
    await in_thread(_record_success)(pk, revision)


def _record_tools_changed(pk: int) -> str | None:
    """Mark the upstream out of sync; return its name when its policy applies changes."""
    Upstream.objects.filter(pk=pk).update(tools_changed_at=timezone.now())
    return (
        Upstream.objects.filter(pk=pk, sync_policy=Upstream.SyncPolicy.APPLY)
        .values_list("name", flat=True)
        .first()
    )


async def upstream_tools_changed(pk: int) -> None:
    """Note that the upstream ``pk`` said its tool list changed (``UpstreamTarget.
    tools_changed``); with the sync policy "apply", apply its changes soon (in a task: this
    runs in the upstream's stream reader, which the listing must not wait for)."""
    logger.info("Upstream %s: its tool list changed; its tools are out of sync", pk)
    name = await in_thread(_record_tools_changed)(pk)
    if name is not None:
        _policy_sync_soon(pk, name)


def upstream_renamed(upstream: Upstream, old_name: str) -> None:
    """Follow a rename: tools naming the upstream by name take the new one, and endpoints
    serving its resources, templates and prompts (whose snapshots name it) are rebuilt."""
    for tool in Tool.objects.filter(kind=Tool.Kind.MCP_UPSTREAM, config__upstream=old_name):
        tool.config = {**tool.config, "upstream": upstream.name}
        tool.save(update_fields=["config", "updated_at"])
    endpoint_ids = endpoint_ids_for(
        resource_ids=list(upstream.resources.values_list("pk", flat=True)),
        template_ids=list(upstream.resource_templates.values_list("pk", flat=True)),
        prompt_ids=list(upstream.prompts.values_list("pk", flat=True)),
    )
    if endpoint_ids:
        catalog_changed(endpoint_ids=endpoint_ids, kinds=["resources", "prompts"])


def upstream_refused_address(upstream: Upstream) -> str | None:
    """Why the address check will refuse every request to ``upstream``, if it will.

    What the admin warns about on save, as for an HTTP tool: checked as a request would be
    (the upstream's networks plus MCP_HTTP_ALLOWED_NETWORKS), with the guard's own message. A
    name that does not resolve here is not reported: it may resolve where the calls run.
    """
    if upstream.transport != Upstream.Transport.HTTP or not upstream.url:
        return None
    try:
        policy = global_policy().merged(_policy(tuple(split_networks(upstream.allow_networks))))
    except (ToolError, ValueError):
        return None  # the form or the system check reports a malformed allow-list
    refused = refusal(upstream.url, policy)
    if refused is None:
        return None
    hint = "under Limits, Allow networks."
    return f"Requests will be refused: {refused.removesuffix('.')} {hint}"


def upstream_reset_breaker(upstream: Upstream) -> None:
    """Close the breaker now (admin action): the next call tries the upstream again."""
    Upstream.objects.filter(pk=upstream.pk).update(consecutive_failures=0, circuit_open_until=None)
    _last_success_written.pop(upstream.pk, None)


async def upstream_list_tools(name: str) -> list[dict[str, Any]]:
    """Return the upstream's tools (every page), recording the contact like a call.

    Raises:
        ToolError: unknown, disabled or failing upstream, or it could not be listed.
    """
    loaded = await upstream_resolve(name)
    try:
        tools = await list_tools(loaded.target)
    except UpstreamUnavailable as exc:
        await upstream_record_failure(loaded.pk, exc.detail)
        raise
    await upstream_record_success(loaded.pk, negotiated_revision(loaded.target.key))
    return tools


async def target_offer(target: UpstreamTarget) -> UpstreamOffer:
    """List what the resolved upstream ``target`` offers (tools, resources, templates,
    prompts); an upstream that does not serve a list refuses it, and that list is empty."""
    offer = UpstreamOffer(tools=await list_tools(target))
    for method, attribute in (
        (mcp_upstream.list_resources, "resources"),
        (mcp_upstream.list_resource_templates, "resource_templates"),
        (mcp_upstream.list_prompts, "prompts"),
    ):
        # An upstream that does not serve them refuses the list (method not found).
        with contextlib.suppress(UpstreamRefused):
            setattr(offer, attribute, await method(target))
    return offer


async def upstream_list_offer(name: str, *, caller: str = "") -> UpstreamOffer:
    """List the upstream's tools, resources, templates and prompts, recording the contact like
    a call (a per-user upstream with ``caller``'s own connection: the operator's).

    An upstream without resources or prompts answers their lists with an error: those lists
    are then empty.

    Raises:
        ToolError: unknown, disabled or failing upstream, or its tools could not be listed.
    """
    loaded = await upstream_resolve(name, caller=caller)
    try:
        offer = await target_offer(loaded.target)
    except UpstreamUnavailable as exc:
        await upstream_record_failure(loaded.pk, exc.detail)
        raise
    await upstream_record_success(loaded.pk, negotiated_revision(loaded.target.key))
    return offer


async def upstream_sync_by_policy(name: str) -> tuple[SyncOutcome, SyncOutcome] | None:
    """Apply what the upstream ``name`` added and changed, when its sync policy is "apply".

    The same code as a sync by hand with every addition and change ticked: new rows are
    disabled, changes are recorded as "upstream sync", connected clients get one
    list_changed. Rows the upstream no longer offers are left alone, and the upstream out of
    sync, for an operator to review. Returns None when the policy is "mark".

    Raises:
        ToolError: the upstream could not be listed.
    """
    upstream = await Upstream.objects.filter(name=name).only("pk", "sync_policy").afirst()
    if upstream is None or upstream.sync_policy != Upstream.SyncPolicy.APPLY:
        return None
    offer = await upstream_list_offer(name)
    outcomes = await in_thread(upstream_policy_apply)(upstream.pk, offer)
    if outcomes is not None:
        tools, items = outcomes
        logger.info(
            "Upstream %s: applied by its sync policy: %d created, %d updated",
            upstream.pk, len(tools.created) + len(items.created),
            len(tools.updated) + len(items.updated),
        )  # fmt: skip
    return outcomes


async def upstream_sync_by_policy_logged(name: str) -> None:
    """``upstream_sync_by_policy``, its failures logged rather than raised."""
    # A boundary: the probe job's and the list_changed task's. The upstream stays marked out
    # of sync, so the next drift, announcement or an operator tries again.
    try:
        await upstream_sync_by_policy(name)
    except ToolError:
        logger.warning("Upstream %s: could not apply its changes by its sync policy", name)
    except Exception:
        logger.exception("Upstream %s: applying its changes by its sync policy failed", name)


# Automatic syncs running in this process, by upstream pk; a change announced while one runs
# makes it run once more when done (its listing may predate the change).
_policy_syncs: dict[int, asyncio.Task[None]] = {}


_policy_again: set[int] = set()


def _policy_sync_soon(pk: int, name: str) -> None:
    running = _policy_syncs.get(pk)
    if running is not None and not running.done():
        _policy_again.add(pk)
        return

    async def run() -> None:
        while True:
            _policy_again.discard(pk)
            await upstream_sync_by_policy_logged(name)
            if pk not in _policy_again:
                return

    task = asyncio.get_running_loop().create_task(run())
    _policy_syncs[pk] = task
    task.add_done_callback(
        lambda done: _policy_syncs.pop(pk, None) if _policy_syncs.get(pk) is done else None
    )
