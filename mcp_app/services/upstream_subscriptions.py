"""Subscriptions to resources of upstream MCP servers: relayed there, updates delivered here.

A client subscribing to one of our URIs that an upstream serves (a resource or a template of
kind upstream) is subscribed there too, in the upstream session its reads use (the caller's,
``port_caller``; the upstream's one session when it is ``stateless``), by this process, which
then holds that subscription (``mcp_upstream.subscribe_resource``). Each subscriber is a
``Watch``: a legacy session (its id) or a 2026-07-28 listen stream (``LISTEN_PREFIX`` and its
token) and our URI. When the upstream says the resource changed, the subscribers still
subscribed (the session row says so; the listen stream is still open in this process) are
told on their own stream only (``notify.apublish_session_resource_updated``), wherever that
stream is held.

Unsubscribing, closing or expiring a session ends its part at once when this process holds
the subscription, and otherwise at the holder's next look (the sweep of upstream sessions,
at least every ``mcp_upstream.SWEEP_SECONDS``, or the next update); the upstream is told
when no subscriber is left.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Final

import uritemplate

from mcp_app.executors import mcp_upstream
from mcp_app.protocol.catalog import CatalogSnapshot, ResourceDef, ResourceTemplateDef
from mcp_app.protocol.errors import McpError
from mcp_app.protocol.handlers import resources
from mcp_app.protocol.uritemplate import match
from mcp_app.services import notify
from mcp_app.services.sessions import asessions_subscriptions
from mcp_app.services.snapshots import ResourceBinding, ResourceTemplateBinding
from mcp_app.services.upstream_relay import port_caller, relay

logger = logging.getLogger(__name__)

LISTEN_PREFIX: Final = "listen:"
# The listen streams open in this process (their subscriber names): only they want updates.
_listening: set[str] = set()


@dataclass(frozen=True, slots=True)
class Watch:
    """One subscriber of one of our URIs."""

    subscriber: str
    uri: str


def upstream_source(source: ResourceDef | ResourceTemplateDef, uri: str) -> tuple[str, str] | None:
    """The upstream serving our ``uri`` (through ``source``) and the URI there; None when
    the catalog serves it itself."""
    key = source.binding
    if isinstance(source, ResourceDef):
        if isinstance(key, ResourceBinding) and key.upstream is not None:
            return key.upstream, key.remote_uri
        return None
    if not isinstance(key, ResourceTemplateBinding) or key.upstream is None:
        return None
    if key.remote_uri_template == source.uri_template:
        return key.upstream, uri
    variables = match(source.uri_template, uri) or {}
    return key.upstream, uritemplate.expand(key.remote_uri_template, dict(variables))


class UpstreamResourceWatcher:
    """The ``ResourceWatcher`` port: subscriptions to upstreams' resources, in the upstream
    session of ``caller`` (the request's ``RequestContext.caller``)."""

    def __init__(self, caller: str = "") -> None:
        self.caller = port_caller(caller)

    async def watch(
        self, subscriber: str, uri: str, source: ResourceDef | ResourceTemplateDef
    ) -> None:
        """Subscribe upstream for ``subscriber``.

        Raises: as ``services.upstream_relay.relay`` (the upstream refused, or is unreachable).
        """
        remote = upstream_source(source, uri)
        if remote is None:
            return
        name, remote_uri = remote
        watch = Watch(subscriber, uri)
        await relay(
            name,
            lambda target: mcp_upstream.subscribe_resource(
                target, remote_uri, watch, caller=self.caller
            ),
        )

    async def unwatch(
        self, subscriber: str, uri: str, source: ResourceDef | ResourceTemplateDef
    ) -> None:
        remote = upstream_source(source, uri)
        if remote is None:
            return
        name, remote_uri = remote
        watch = Watch(subscriber, uri)
        try:
            await relay(
                name,
                lambda target: mcp_upstream.unsubscribe_resource(
                    target, remote_uri, watch, caller=self.caller
                ),
            )
        except McpError as exc:
            # The holder's next look at its subscribers ends it upstream instead.
            logger.info("Could not unsubscribe upstream %s now: %s", name, exc.message)


class ListenSubscriptions:
    """The upstream side of one 2026-07-28 ``subscriptions/listen`` stream of this process.

    Resources of upstreams among those the stream watches are subscribed to there for the
    stream's life, in the upstream session its caller's reads use; their updates come on the
    stream's own group (``notify.listen_group(token)``).
    """

    def __init__(self, snapshot: CatalogSnapshot, *, caller: str) -> None:
        self.token = secrets.token_urlsafe(12)
        self._subscriber = LISTEN_PREFIX + self.token
        self._snapshot = snapshot
        self._watcher = UpstreamResourceWatcher(caller)
        self._relayed: list[tuple[str, ResourceDef | ResourceTemplateDef]] = []

    async def open(self, uris: Sequence[str]) -> list[str]:
        """Want updates from now on; subscribe upstream to those of ``uris`` an upstream
        serves. Returns the URIs the stream carries: ``uris`` less those an upstream did not
        honour (the acknowledgement lists only those)."""
        _listening.add(self._subscriber)
        carried = list(uris)
        for uri in uris:
            source = resources.subscription_source(self._snapshot, uri)
            if source is None or upstream_source(source, uri) is None:
                continue
            try:
                await self._watcher.watch(self._subscriber, uri, source)
            except McpError:
                carried.remove(uri)
            else:
                self._relayed.append((uri, source))
        return carried

    async def close(self) -> None:
        """The stream ended: its upstream subscriptions end now (or at the holder's next
        look, when the upstream cannot be told)."""
        _listening.discard(self._subscriber)
        for uri, source in self._relayed:
            await self._watcher.unwatch(self._subscriber, uri, source)
        self._relayed.clear()


async def _live(subscribers: frozenset[Hashable]) -> frozenset[Hashable]:
    """The subscribers that still want updates: a live session whose row lists the URI, or
    a listen stream still open in this process."""
    watches = [each for each in subscribers if isinstance(each, Watch)]
    session_ids = {w.subscriber for w in watches if not w.subscriber.startswith(LISTEN_PREFIX)}
    subscribed = await asessions_subscriptions(session_ids=session_ids) if session_ids else {}
    return frozenset(
        w
        for w in watches
        if (w.subscriber in _listening if w.subscriber.startswith(LISTEN_PREFIX)
            else w.uri in subscribed.get(w.subscriber, ()))
    )  # fmt: skip


async def _deliver(subscribers: frozenset[Hashable]) -> None:
    """Tell each subscriber, on its own stream, that its URI changed."""
    for watch in subscribers:
        if not isinstance(watch, Watch):
            continue
        if watch.subscriber.startswith(LISTEN_PREFIX):
            token = watch.subscriber.removeprefix(LISTEN_PREFIX)
            await notify.apublish_listen_resource_updated(token=token, uri=watch.uri)
        else:
            await notify.apublish_session_resource_updated(
                session_id=watch.subscriber, uri=watch.uri
            )


def connect_upstream_events() -> None:
    """Have an upstream's resource updates reach our subscribers, and the relay ask which are
    still subscribed (it reads no rows). Called once per process, from ``AppConfig.ready``."""
    if _deliver not in mcp_upstream.resource_updated_handlers:
        mcp_upstream.resource_updated_handlers.append(_deliver)
    if _live not in mcp_upstream.subscribers_live_handlers:
        mcp_upstream.subscribers_live_handlers.append(_live)
