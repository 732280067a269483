"""Fan-out of catalog changes to connected clients, over the channel layer.

Every open legacy GET stream and every 2026 ``subscriptions/listen`` stream of an endpoint
joins that endpoint's group, in whichever web process holds it; a catalog edit (admin, shell,
fixtures, services) publishes one message per affected endpoint after the transaction
commits, so a client that refetches on the notification sees the new catalog. The group names
and message shapes live here and nowhere else, as do those of the client's answers to a
legacy call's questions (elicitation, sampling, roots), which may be POSTed to any process.

Bulk changes are announced once. A transaction publishes one merged message per endpoint
however many rows it changed (``invalidation.on_commit_merged``), and each stream sends a
kind's ``list_changed`` at most once per ``MCP_LIST_CHANGED_COALESCE_SECONDS``: the first
change at once, the rest of the window's changes in one message when it closes, so the last
change is always announced.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
import secrets
from collections.abc import Iterable
from typing import Any, Final, Literal

import orjson
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from mcp_app.conf import get_conf
from mcp_app.services.invalidation import on_commit_merged

logger = logging.getLogger(__name__)

CatalogKind = Literal["tools", "resources", "prompts"]
CATALOG_KINDS: Final[tuple[CatalogKind, ...]] = ("tools", "resources", "prompts")
LIST_CHANGED: Final = "mcp.list_changed"
RESOURCE_UPDATED: Final = "mcp.resource_updated"
CLIENT_REPLY: Final = "mcp.client_reply"
STREAM_EVENT: Final = "mcp.stream_event"
SESSION_STREAM_OPENED: Final = "mcp.session_stream_opened"
SESSION_CLOSED: Final = "mcp.session_closed"
# A background call: worker -> web process holding the client's request ...
CALL_FRAME: Final = "mcp.call_frame"
CALL_ASK: Final = "mcp.call_ask"
CALL_DONE: Final = "mcp.call_done"
# ... and any web process -> the worker running it.
CALL_ANSWER: Final = "mcp.call_answer"
CALL_CANCEL: Final = "mcp.call_cancel"
CALL_INPUT: Final = "mcp.call_input"
# A run held open between the rounds of a 2026-07-28 request: a retry -> the process
# holding the run ...
HELD_ANSWER: Final = "mcp.held_answer"
HELD_CANCEL: Final = "mcp.held_cancel"
# ... and that process -> the retry waiting on its reply group.
HELD_ACK: Final = "mcp.held_ack"
HELD_REFUSED: Final = "mcp.held_refused"
HELD_FRAME: Final = "mcp.held_frame"
HELD_QUESTIONS: Final = "mcp.held_questions"
HELD_OUTCOME: Final = "mcp.held_outcome"
# Every message names its group: a process receives all its groups on one channel
# (``GroupListener``) and routes by this key, which it removes before a listener sees it.
GROUP_KEY: Final = "mcp_group"


def endpoint_group(endpoint_id: int) -> str:
    """The channel-layer group of every live stream of one endpoint."""
    return f"mcp.endpoint.{endpoint_id}"


def client_reply_group(session_id: str, request_id: object) -> str:
    """The group a call waiting for the client's answer to ``request_id`` listens on.

    Keyed by session and id, so a client can only answer its own session's questions; hashed,
    because ids are the client's strings and group names must stay short and plain.
    """
    key = orjson.dumps([session_id, request_id])
    return f"mcp.reply.{hashlib.sha256(key).hexdigest()[:48]}"


async def apublish_client_reply(
    *, session_id: str, request_id: object, result: Any, error: Any
) -> None:
    """Route a client's answer (a JSON-RPC response POSTed anywhere) to the waiting call."""
    message = {"type": CLIENT_REPLY, "result": result, "error": error}
    await _asend(client_reply_group(session_id, request_id), message)


def session_group(session_id: str) -> str:
    """The group of a legacy session's standalone GET stream, in whichever process holds it."""
    return f"mcp.session.{hashlib.sha256(session_id.encode()).hexdigest()[:48]}"


async def apublish_session_stream_opened(*, session_id: str, stream_token: str) -> None:
    """Tell an older GET stream of the session to give way to the one just opened.

    Each server-to-client message of a session must go out on exactly one of its streams
    (2025-11-25 basic/transports), so a session keeps only its newest GET stream.
    """
    await _asend(session_group(session_id), {"type": SESSION_STREAM_OPENED, "token": stream_token})


async def apublish_session_closed(*, session_id: str) -> None:
    """End the session's GET stream at once (DELETE), wherever it is held."""
    await _asend(session_group(session_id), {"type": SESSION_CLOSED})


def listen_group(token: str) -> str:
    """The group of one 2026-07-28 listen stream (``token`` is its own, random)."""
    return f"mcp.listen.{token}"


async def apublish_session_resource_updated(*, session_id: str, uri: str) -> None:
    """Tell one legacy session's GET stream that ``uri`` changed (an upstream's resource it
    subscribed to: only the subscriber whose upstream session saw the change hears it)."""
    await _asend(session_group(session_id), {"type": RESOURCE_UPDATED, "uri": uri})


async def apublish_listen_resource_updated(*, token: str, uri: str) -> None:
    """Tell one listen stream that ``uri`` changed (as ``apublish_session_resource_updated``)."""
    await _asend(listen_group(token), {"type": RESOURCE_UPDATED, "uri": uri})


async def _asend(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(group, {**message, GROUP_KEY: group})


def stream_group(stream_id: str) -> str:
    """The group a resumed stream (GET + Last-Event-ID) follows its request's events on."""
    return f"mcp.sse.{stream_id}"


async def apublish_stream_event(*, stream_id: str, event_id: str, data: bytes) -> None:
    """Hand one event of a resumable stream to whichever process resumed it."""
    await _asend(stream_group(stream_id), {"type": STREAM_EVENT, "id": event_id, "data": data})


def call_group(call_id: str) -> str:
    """The group of whoever follows a background call (the web process holding the request)."""
    return f"mcp.call.{call_id}"


def call_control_group(call_id: str) -> str:
    """The group of the worker running a background call: answers, new input, cancellation."""
    return f"mcp.callctl.{call_id}"


async def apublish_call_frame(*, call_id: str, frame: dict[str, Any]) -> None:
    """A JSON-RPC notification (progress, log) the call emitted, for its client's stream."""
    await _asend(call_group(call_id), {"type": CALL_FRAME, "frame": frame})


async def apublish_call_ask(
    *, call_id: str, ask_id: str, method: str, params: dict[str, Any]
) -> None:
    """A legacy call's question for the client, asked on the request's stream by the follower."""
    message = {"type": CALL_ASK, "ask_id": ask_id, "method": method, "params": params}
    await _asend(call_group(call_id), message)


async def apublish_call_done(*, call_id: str) -> None:
    """The call reached a final status (or is waiting for input): read its row."""
    await _asend(call_group(call_id), {"type": CALL_DONE})


async def apublish_call_answer(
    *, call_id: str, ask_id: str, result: Any = None, error: str | None = None
) -> None:
    """The client's answer to a question the worker asked (``error``: why there is none)."""
    message = {"type": CALL_ANSWER, "ask_id": ask_id, "result": result, "error": error}
    await _asend(call_control_group(call_id), message)


async def apublish_call_cancel(*, call_id: str) -> None:
    """Stop the call now (its row already says cancelled; the worker also sees it there)."""
    await _asend(call_control_group(call_id), {"type": CALL_CANCEL})
    await _asend(call_group(call_id), {"type": CALL_DONE})


async def apublish_call_input(*, call_id: str) -> None:
    """New answers for a task waiting in input_required are in its row."""
    await _asend(call_control_group(call_id), {"type": CALL_INPUT})


def held_group(held_id: str) -> str:
    """The group of the process holding a run open between rounds (services/continuations)."""
    return f"mcp.held.{held_id}"


def held_reply_group(token: str) -> str:
    """The group one retry of a held run waits on for what the run does next."""
    return f"mcp.heldreply.{token}"


async def apublish_held_answer(
    *,
    held_id: str,
    round_number: int,
    answers: dict[str, Any],
    reply: str,
    endpoint: str,
    principal: str,
) -> None:
    """A retry's answers (``inputResponses``) for round ``round_number`` of a held run."""
    message = {
        "type": HELD_ANSWER,
        "round": round_number,
        "answers": answers,
        "reply": reply,
        "endpoint": endpoint,
        "principal": principal,
    }
    await _asend(held_group(held_id), message)


async def apublish_held_cancel(*, held_id: str, reply: str) -> None:
    """The retry waiting on ``reply`` is gone (its client disconnected): stop the run."""
    await _asend(held_group(held_id), {"type": HELD_CANCEL, "reply": reply})


async def apublish_held_event(*, reply: str, kind: str, **fields: Any) -> None:
    """What a held run does next, for the retry waiting on ``reply``: ``HELD_ACK``
    (``seconds`` it may still run), ``HELD_REFUSED`` (``reason``), ``HELD_FRAME``
    (``frame``), ``HELD_QUESTIONS`` (``requests``, ``round``), ``HELD_OUTCOME``
    (``outcome``)."""
    await _asend(reply, {"type": kind, **fields})


def _send(endpoint_ids: Iterable[int], message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for endpoint_id in sorted(set(endpoint_ids)):
        try:
            group = endpoint_group(endpoint_id)
            async_to_sync(layer.group_send)(group, {**message, GROUP_KEY: group})
        except Exception:
            # The edit is committed whatever happens here; clients then learn of it on their
            # next request. Never fail an operator's save because Redis is unreachable.
            logger.exception("Could not publish a catalog change", extra={"type": message["type"]})


def publish_list_changed(*, endpoint_ids: Iterable[int], kinds: Iterable[CatalogKind]) -> None:
    """Tell the endpoints' streams that these lists changed."""
    kinds = sorted(set(kinds))
    if kinds:
        _send(endpoint_ids, {"type": LIST_CHANGED, "kinds": kinds})


def publish_resource_updated(*, endpoint_ids: Iterable[int], uri: str) -> None:
    """Tell the endpoints' streams that the resource at ``uri`` changed (for its subscribers)."""
    _send(endpoint_ids, {"type": RESOURCE_UPDATED, "uri": uri})


# What a transaction announces, merged: endpoint id -> kinds (or resource URIs).
_Changes = dict[int, frozenset[str]]
# After the transaction's invalidation (order 0): a client refetching on the notification
# must find its cached catalog already dropped.
_LIST_CHANGED_ORDER: Final = 1
_RESOURCE_UPDATED_ORDER: Final = 2


def _merge(held: _Changes, new: _Changes) -> _Changes:
    return {key: held.get(key, frozenset()) | new.get(key, frozenset()) for key in held | new}


def _publish_list_changed(changes: _Changes) -> None:
    for endpoint_id, kinds in sorted(changes.items()):
        _send([endpoint_id], {"type": LIST_CHANGED, "kinds": sorted(kinds)})


def _publish_resource_updated(changes: _Changes) -> None:
    for endpoint_id, uris in sorted(changes.items()):
        for uri in sorted(uris):
            _send([endpoint_id], {"type": RESOURCE_UPDATED, "uri": uri})


def list_changed_on_commit(*, endpoint_ids: Iterable[int], kinds: Iterable[CatalogKind]) -> None:
    """Once the transaction commits, tell the endpoints' streams that these lists changed.

    However often a transaction calls this, each endpoint gets one message naming every kind
    it changed.
    """
    names = frozenset[str](kinds)
    if names:
        changes: _Changes = dict.fromkeys(endpoint_ids, names)
        on_commit_merged(
            order=_LIST_CHANGED_ORDER,
            value=changes,
            merge=_merge,
            publish=_publish_list_changed,
        )


def resource_updated_on_commit(*, endpoint_ids: Iterable[int], uri: str) -> None:
    """Once the transaction commits, tell the endpoints' streams that ``uri`` changed (once)."""
    changes: _Changes = dict.fromkeys(endpoint_ids, frozenset([uri]))
    on_commit_merged(
        order=_RESOURCE_UPDATED_ORDER,
        value=changes,
        merge=_merge,
        publish=_publish_resource_updated,
    )


class _Hub:
    """One channel-layer channel per event loop, receiving every group its listeners follow.

    A channel per stream cost each idle stream a channel-layer receive buffer (an
    ``asyncio.Queue``) and two tasks parked in ``receive()``: over a third of its memory.
    Here a group joins the hub's channel when its first listener in this process arrives and
    leaves with its last one; one receiver task routes each message by its ``GROUP_KEY``.
    Membership changes are serialised, so a group is never left while a listener wants it.
    """

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.channel: str | None = None
        self.listeners: dict[str, set[GroupListener]] = {}
        self.receiver: asyncio.Task[None] | None = None
        self.lock = asyncio.Lock()

    async def join(self, listener: GroupListener) -> None:
        async with self.lock:
            if self.channel is None:
                # A plain name, not the layer's process-local kind ("...!..."): channels_redis
                # receives those through one lock and counter shared by the whole layer, which
                # a receiver stopped on one event loop can leave held for the next loop.
                self.channel = f"mcp.hub.{secrets.token_hex(12)}"
            channel = self.channel
            try:
                for group in listener.groups:
                    members = self.listeners.setdefault(group, set())
                    if not members:
                        await self.layer.group_add(group, channel)
                    if self.channel is not channel:
                        # The receiver failed meanwhile: this channel is heard no more.
                        raise ConnectionError("The channel-layer receiver stopped")
                    members.add(listener)
            except BaseException:
                self._forget(listener)
                raise
            if self.receiver is None:
                self.receiver = asyncio.create_task(self._receive(channel))

    def _forget(self, listener: GroupListener) -> None:
        for group in listener.groups:
            members = self.listeners.get(group)
            if members is not None:
                members.discard(listener)
                if not members:
                    del self.listeners[group]

    async def leave(self, listener: GroupListener) -> None:
        async with self.lock:
            for group in listener.groups:
                members = self.listeners.get(group)
                if members is None or listener not in members:
                    continue
                members.discard(listener)
                if not members:
                    del self.listeners[group]
                    if self.channel is not None:
                        with contextlib.suppress(Exception):
                            await self.layer.group_discard(group, self.channel)
            if not self.listeners:
                await self._stop()

    async def _stop(self) -> None:
        """Stop receiving while no one listens (an idle process, the end of a worker's task)."""
        receiver, self.receiver, self.channel = self.receiver, None, None
        if receiver is None:
            return
        receiver.cancel()
        # A channel-layer receive can sit in a blocking Redis read for seconds before it
        # honours the cancellation: never hold the caller (a response!) waiting on it.
        await asyncio.wait({receiver}, timeout=RECEIVER_STOP_SECONDS)
        _stopping.add(receiver)
        receiver.add_done_callback(_forget_receiver)

    async def _receive(self, channel: str) -> None:
        failure: BaseException = ConnectionError("The channel-layer receiver stopped")
        try:
            while True:
                message = await self.layer.receive(channel)
                group = message.pop(GROUP_KEY, None)
                for listener in tuple(self.listeners.get(group, ())):
                    listener.deliver(message)
        except Exception as exc:
            failure = exc
            logger.warning("Channel-layer receiver failed; its streams end", exc_info=True)
        finally:
            if self.receiver is asyncio.current_task():
                self._fail_all(failure)

    def _fail_all(self, failure: BaseException) -> None:
        # Every listener learns at once (its stream ends, the client reconnects); the next
        # listener starts afresh on a new channel.
        listeners = {each for members in self.listeners.values() for each in members}
        self.listeners.clear()
        self.channel = None
        self.receiver = None
        for listener in listeners:
            listener.fail(failure)


# Seconds a leaving last listener waits for the receiver; the rest of the stop is unattended.
RECEIVER_STOP_SECONDS = 0.1
_stopping: set[asyncio.Task[None]] = set()


def _forget_receiver(task: asyncio.Task[None]) -> None:
    _stopping.discard(task)
    if not task.cancelled():
        # redis-py may report the cancelled read as its own TimeoutError: nothing to do.
        task.exception()


_hubs: dict[asyncio.AbstractEventLoop, _Hub] = {}


def _hub(layer: Any) -> _Hub:
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None or hub.layer is not layer:
        # Loops come and go (tests, a worker's tasks): forget the closed ones.
        for old in [old for old in _hubs if old.is_closed()]:
            del _hubs[old]
        hub = _hubs[loop] = _Hub(layer)
    return hub


class GroupListener:
    """The channel-layer messages of some groups, for one long-lived stream.

    Messages are routed to it by this event loop's ``_Hub``; waiting with a timeout (for
    keep-alives) never cancels a channel-layer ``receive`` halfway. Without a channel layer
    nothing arrives.
    """

    def __init__(self, *groups: str) -> None:
        self.groups = groups
        self._layer = get_channel_layer()
        self._hub: _Hub | None = None
        # A deque and one waiter, not an asyncio.Queue: this object lives as long as an idle
        # stream, and a Queue's four deques cost about 2 KB a stream.
        self._inbox: collections.deque[dict[str, Any]] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None
        # Made on the first list_changed: most streams never see one.
        self._throttle: _ListChangedThrottle | None = None

    @classmethod
    def deaf(cls) -> GroupListener:
        """A listener that hears nothing: every ``next`` waits its timeout and returns None."""
        listener = cls()
        listener._layer = None
        return listener

    async def __aenter__(self) -> GroupListener:
        if self._layer is not None:
            self._hub = _hub(self._layer)
            await self._hub.join(self)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._throttle is not None:
            self._throttle.close()
        if self._hub is not None:
            await self._hub.leave(self)

    def deliver(self, message: dict[str, Any]) -> None:
        if message.get("type") == LIST_CHANGED:
            if self._throttle is None:
                window = get_conf().MCP_LIST_CHANGED_COALESCE_SECONDS
                if window <= 0:
                    self._inbox.append(message)
                    self._wake()
                    return
                self._throttle = _ListChangedThrottle(self, window)
            self._throttle.offer(message["kinds"])
            return
        self._inbox.append(message)
        self._wake()

    def fail(self, failure: BaseException) -> None:
        self._failure = failure
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _raise_if_ended(self) -> None:
        if self._failure is not None and not self._inbox:
            raise self._failure

    async def next(self, timeout: float) -> dict[str, Any] | None:
        """Return the next message, or None when ``timeout`` passes first.

        Raises whatever ended the receiver (e.g. a lost Redis connection): the stream ends
        and the client reconnects, instead of waiting on a dead subscription.
        """
        self._raise_if_ended()
        if not self._inbox:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await self._waiter
            except TimeoutError:
                return None
            finally:
                self._waiter = None
            self._raise_if_ended()
        return self._inbox.popleft() if self._inbox else None


class _ListChangedThrottle:
    """One stream's list_changed, at most once per kind per window, never losing the last.

    A kind not sent within the window goes out at once; a kind sent less than a window ago is
    held, merged with whatever else arrives, and sent when its window closes. Runs on the
    stream's event loop (the hub's receiver calls ``offer``).
    """

    # Timers may fire this much early (the loop's clock resolution and rounding).
    _EARLY_SECONDS = 0.001

    def __init__(self, listener: GroupListener, window: float) -> None:
        self.listener = listener
        self.window = window
        self.sent_at: dict[str, float] = {}
        self.held: set[str] = set()
        self.timer: asyncio.TimerHandle | None = None

    def offer(self, kinds: Iterable[str]) -> None:
        now = asyncio.get_running_loop().time()
        ready = []
        for kind in kinds:
            if kind in self.held:
                continue
            sent = self.sent_at.get(kind)
            if sent is None or now - sent >= self.window - self._EARLY_SECONDS:
                ready.append(kind)
            else:
                self.held.add(kind)
        self._send(ready, now)
        self._arm()

    def _release(self) -> None:
        self.timer = None
        now = asyncio.get_running_loop().time()
        due = [
            kind
            for kind in self.held
            if now - self.sent_at[kind] >= self.window - self._EARLY_SECONDS
        ]
        self.held.difference_update(due)
        self._send(due, now)
        self._arm()

    def _send(self, kinds: list[str], now: float) -> None:
        if kinds:
            for kind in kinds:
                self.sent_at[kind] = now
            self.listener._inbox.append({"type": LIST_CHANGED, "kinds": sorted(kinds)})
            self.listener._wake()

    def _arm(self) -> None:
        if self.timer is not None or not self.held:
            return
        when = min(self.sent_at[kind] for kind in self.held) + self.window
        self.timer = asyncio.get_running_loop().call_at(when, self._release)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
