"""Redis behind Sentinel: every use follows the master through a failover (issue #30).

A real group on loopback ports: a master, one replica (``--replicaof``) and three sentinels
(quorum 2, as a production group; short timeouts), all three named in the URL. The rate
limiter's own client (``services/resp.py``) finds the master again after the master is
killed together with the first sentinel the URL names (the two left still make a quorum and a
majority, and the client asks past the dead one); every client the settings make asks a dead
sentinel once, and a worker whose first sentinels hang still ends its calls; a web process and
a Celery worker given only a ``redis+sentinel://`` URL serve rate-limited calls, background
calls whose progress crosses the channel layer on an SSE stream, and pushed catalog edits,
before and after ``SENTINEL FAILOVER`` and before and after the master is killed together with
the first sentinel. Every wait polls against a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import kombu
import pytest
import redis
from django.conf import settings
from django.core.cache.backends.redis import RedisCache
from mcp import Client

from mcp_app.services import redis_sentinel, resp
from mcp_app.services.celery_transport import SentinelTransport
from scripts import services
from tests.faults.conftest import FaultStack, Redis, WebProcess, plain_redis_args, run_manage
from tests.faults.test_invalidation_after_redis_restart import echo_description
from tests.faults.wire import final_message, session_headers, tool_call
from tests.support.raw_mcp import open_session
from tests.support.waiting import await_until, wait_until
from tests.support.worker import celery_worker

MASTER = "mcphost"
# Three sentinels, two of which must agree the master is down (a majority must also elect
# the one that runs the failover).
SENTINELS = 3
QUORUM = 2
# Sentinel's bounds: how long a silent master takes to be judged down, and a failover's.
DOWN_AFTER_MS = 500
FAILOVER_TIMEOUT_MS = 3000
# A failover (or a master's death, judgement and failover) is over well within this.
FAILOVER_WAIT_SECONDS = 30.0
SLUG = "faults-sentinel"
SEED = f"""
from mcp_app.models import Endpoint, RateLimit, Tool
from mcp_app.services.catalog_writes import endpoint_create
if not Endpoint.objects.filter(slug={SLUG!r}).exists():  # each test of the module seeds
    endpoint = endpoint_create(slug={SLUG!r}, auth_mode="public")
    endpoint.tools.add(Tool.objects.get(name="echo"), Tool.objects.get(name="countdown"))
    RateLimit.objects.create(endpoint=endpoint, rate=1000, window="hour", on_redis_down="closed")
"""


def _data_node(workdir: Path, port: int, master_port: int | None) -> Redis:
    args = plain_redis_args(workdir, port)
    if master_port is not None:
        args += ["--replicaof", "127.0.0.1", str(master_port)]
    return Redis(workdir, port, args=args)


@dataclass
class SentinelGroup:
    nodes: dict[int, Redis]
    sentinels: list[Redis]
    history: list[str] = field(default_factory=list)
    # Sentinels stopped by a test (started again by ``_restart``).
    down: set[int] = field(default_factory=set)

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    @property
    def sentinel(self) -> Redis:
        """A sentinel that is up (the test's own questions go to it)."""
        return next(s for s in self.sentinels if s.port not in self.down)

    def master_port(self) -> int:
        with contextlib.closing(self.sentinel.client()) as client:
            return int(client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)[1])

    def replica_port(self, master: int | None = None) -> int:
        """The node that is not ``master`` (by default, the master a sentinel names now)."""
        master = self.master_port() if master is None else master
        return next(port for port in self.nodes if port != master)

    def _settled(self) -> bool:
        """The master is a master, the other node replicates from it, and every sentinel up
        knows that replica in good health (a failover needs one) and the other sentinels up
        (a failover needs a majority of them to agree).

        A sentinel started again may name the old master until it hears the new epoch, so
        the master is asked once per check and a failed question is "not yet"."""
        up = [s for s in self.sentinels if s.port not in self.down]
        try:
            master = self.master_port()
            replica = self.replica_port(master)
            with contextlib.closing(self.nodes[master].client()) as client:
                if client.execute_command("ROLE")[0] != b"master":
                    return False
            with contextlib.closing(self.nodes[replica].client()) as client:
                info = client.info("replication")
                if info.get("master_port") != master or info.get("master_link_status") != "up":
                    return False
            for sentinel in up:
                with contextlib.closing(sentinel.client()) as client:
                    if client.sentinel_get_master_addr_by_name(MASTER)[1] != master:
                        return False
                    peers = client.sentinel_sentinels(MASTER)
                    known = client.sentinel_slaves(MASTER)
                healthy_peers = {int(peer["port"]) for peer in peers if not peer["is_sdown"]} >= {
                    other.port for other in up if other is not sentinel
                }
                # redis-py parses each replica's fields (flags into is_* booleans).
                healthy_replica = any(
                    int(entry["port"]) == replica
                    and entry["is_slave"]
                    and not entry["is_sdown"]
                    and entry.get("master-link-status") == "ok"
                    for entry in known
                )
                if not (healthy_peers and healthy_replica):
                    return False
        except (redis.RedisError, OSError, TypeError):
            return False
        return True

    def wait_settled(self) -> None:
        wait_until(self._settled, "the Sentinel group settled", timeout=FAILOVER_WAIT_SECONDS)

    def wait_master_is(self, port: int) -> None:
        def moved() -> bool:
            with contextlib.suppress(redis.RedisError, OSError):
                return self.master_port() == port
            return False

        wait_until(moved, f"the sentinel naming {port} master", timeout=FAILOVER_WAIT_SECONDS)

    def failover(self) -> int:
        """``SENTINEL FAILOVER``; returns the new master's port once the group settled."""
        self.wait_settled()
        old = self.master_port()
        new = self.replica_port(old)
        with contextlib.closing(self.sentinel.client()) as client:
            client.execute_command("SENTINEL", "FAILOVER", MASTER)
        self.wait_master_is(new)
        self.wait_settled()
        self.history.append(f"failover {old} -> {new}")
        return new


@pytest.fixture(scope="module")
def sentinel_group() -> Iterator[SentinelGroup]:
    """A master, its replica and three sentinels on free loopback ports, for this module."""
    workdir = Path(tempfile.mkdtemp(prefix="mcphost-sentinel-"))
    master_port, replica_port = services.free_port(), services.free_port()
    master = _data_node(workdir / "master", master_port, None)
    replica = _data_node(workdir / "replica", replica_port, master_port)
    sentinels = []
    for n in range(SENTINELS):
        port = services.free_port()
        conf = workdir / f"sentinel{n}" / "sentinel.conf"
        conf.parent.mkdir(parents=True)
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {conf.parent}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {master_port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
        )
        sentinels.append(Redis(conf.parent, port, args=[str(conf), "--sentinel"]))
    group = SentinelGroup({master_port: master, replica_port: replica}, sentinels)
    try:
        master.start()
        replica.start()
        for sentinel in sentinels:
            sentinel.start()
        group.wait_settled()
        yield group
    finally:
        for node in (*sentinels, replica, master):
            node.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# -- the rate limiter's own client --------------------------------------------------------------


async def test_the_limiters_client_finds_the_master_again_after_it_is_killed(
    sentinel_group: SentinelGroup,
) -> None:
    """The master dies with the first sentinel the URL names: the two left agree and fail
    over, and the client asks past the dead sentinel."""
    old = sentinel_group.master_port()
    client = resp.Client(sentinel_group.url, timeout=2.0)
    try:
        assert await client.pipeline([[b"SET", b"sentinel:probe", b"1"], [b"INCR", b"n"]])
        await asyncio.to_thread(_kill_master, sentinel_group, first_sentinel_too=True)

        async def counted_on_the_new_master() -> bool:
            with contextlib.suppress(OSError, TimeoutError):
                await client.pipeline([[b"INCR", b"n"]])
                return True
            return False

        # Each try is bounded by the client's timeout; none spins (a lost master fails fast).
        await await_until(
            counted_on_the_new_master, "a write after the failover", timeout=FAILOVER_WAIT_SECONDS
        )
        new = sentinel_group.master_port()
        assert new != old
        with contextlib.closing(sentinel_group.nodes[new].client()) as direct:
            # The write replicated before the kill, then the one after it, landed there.
            assert direct.get("sentinel:probe") == b"1"
            assert int(direct.get("n") or 0) >= 2
    finally:
        client.drop()
        # The killed nodes come back; the sentinels make the old master a replica.
        await asyncio.to_thread(_restart, sentinel_group, old)


async def test_the_limiters_client_leaves_a_demoted_master(sentinel_group: SentinelGroup) -> None:
    """A connection kept across a failover is dropped on the demoted node's answer (or its
    closing) and the command lands on the new master within two attempts."""
    client = resp.Client(sentinel_group.url, timeout=2.0)
    try:
        await client.pipeline([[b"SET", b"sentinel:before", b"1"]])
        new = await asyncio.to_thread(sentinel_group.failover)

        async def written() -> bool:
            with contextlib.suppress(OSError, TimeoutError):
                await client.pipeline([[b"SET", b"sentinel:after", b"1"]])
                return True
            return False

        await await_until(written, "a write after the failover", timeout=FAILOVER_WAIT_SECONDS)
        with contextlib.closing(sentinel_group.nodes[new].client()) as direct:
            assert direct.get("sentinel:after") == b"1"
    finally:
        client.drop()


async def test_a_silent_sentinel_leaves_time_to_ask_the_next(
    sentinel_group: SentinelGroup,
) -> None:
    """A sentinel that accepts connections and never answers (a hung host) costs its share of
    the timeout, not all of it: the next sentinel names the master."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections complete in the backlog and are never read
        port = silent.getsockname()[1]
        url = sentinel_group.url.replace("://", f"://127.0.0.1:{port},", 1)
        client = resp.Client(url, timeout=2.0)
        try:
            sentinel_group.wait_settled()
            assert await client.pipeline([[b"PING"]]) == [b"PONG"]
        finally:
            client.drop()


async def test_each_client_the_settings_make_asks_a_dead_sentinel_once(
    sentinel_group: SentinelGroup, connections: list[Any]
) -> None:
    """A sentinel refusing connections (a SIGKILLed one, on loopback) is tried once, then the
    next one is asked: redis-py's own retries (10, with pauses growing to 1 s) cost each
    client made afresh seconds per dead sentinel, enough to fail a background call whose
    worker joined the channel layer on a fresh client (its heartbeat waited meanwhile)."""
    dead = services.free_port()  # nothing listens on it: every connection is refused
    url = sentinel_group.url.replace("://", f"://127.0.0.1:{dead},", 1)
    sentinel_group.wait_settled()
    broker_url, options = redis_sentinel.kombu_broker(url)

    def cache_round_trip() -> Any:
        cache = RedisCache(
            [url], {"OPTIONS": {"pool_class": "mcp_app.services.redis_sentinel.CachePool"}}
        )
        try:
            cache.set("sentinel-dead", "1")
            return cache.get("sentinel-dead")
        finally:
            for pool in cache._cache._pools.values():
                pool.disconnect()

    async def layer_round_trip() -> Any:
        layer = redis_sentinel.SentinelChannelLayer(
            hosts=[redis_sentinel.channel_layer_host(url, **settings.REDIS_CLIENT_OPTIONS)],
            prefix="sentinel-dead:",
        )
        try:
            channel = await layer.new_channel()
            await layer.send(channel, {"type": "test.tag", "tag": "1"})
            return (await layer.receive(channel))["tag"]
        finally:
            await layer.flush()

    def sync_round_trip() -> Any:
        with contextlib.closing(redis_sentinel.sync_client(url)) as client:
            client.set("sentinel-dead:client", "1")
            return client.get("sentinel-dead:client").decode()

    async def async_round_trip() -> Any:
        client = redis_sentinel.async_client(url)
        try:
            await client.set("sentinel-dead:client", "1")
            return (await client.get("sentinel-dead:client")).decode()
        finally:
            await client.aclose()

    def broker_round_trip() -> Any:
        with kombu.Connection(
            broker_url, transport=SentinelTransport, transport_options=options
        ) as connection:
            queue = connection.SimpleQueue("sentinel-dead:queue")
            try:
                queue.put({"tag": "1"})
                message = queue.get(timeout=5)
                message.ack()
                return message.payload["tag"]
            finally:
                queue.close()

    asked: dict[str, int] = {}
    for name, round_trip in [
        ("cache", cache_round_trip),
        ("layer", layer_round_trip),
        ("sync", sync_round_trip),
        ("async", async_round_trip),
        ("broker", broker_round_trip),
    ]:
        connections.clear()
        async with asyncio.timeout(20):
            if asyncio.iscoroutinefunction(round_trip):
                assert await round_trip() == "1", name
            else:
                assert await asyncio.to_thread(round_trip) == "1", name
        asked[name] = sum(1 for address in connections if address[1] == dead)
    # Each asks the dead sentinel once per Sentinel client it makes, not once per retry:
    # kombu makes two, for its pool of commands and its pool of BRPOPs.
    assert asked == {"cache": 1, "layer": 1, "sync": 1, "async": 1, "broker": 2}


async def test_a_user_without_role_still_reaches_the_master(
    sentinel_group: SentinelGroup,
) -> None:
    """ROLE is an @admin command an application's ACL user may lack: the client then goes
    without that check (a replica would still answer READONLY) instead of failing."""
    sentinel_group.wait_settled()
    for node in sentinel_group.nodes.values():
        with contextlib.closing(node.client()) as admin:
            admin.execute_command("ACL", "SETUSER", "app", "on", ">app-pw", "~*", "+@all", "-role")
    url = sentinel_group.url.replace("://", "://app:app-pw@", 1)
    client = resp.Client(url, timeout=2.0)
    try:
        assert await client.pipeline([[b"SET", b"sentinel:acl", b"1"], [b"ACL", b"WHOAMI"]]) == [
            b"OK",
            b"app",
        ]
    finally:
        client.drop()


# -- a web process and a worker on the group ----------------------------------------------------


async def _limited_echo(url: str, message: str) -> str:
    """A limited call with the official SDK: its text (the refusal's, if it was refused)."""
    async with asyncio.timeout(30), Client(url) as client:
        result = await client.call_tool("echo", {"message": message})
    text = result.content[0].text
    return f"refused: {text}" if result.is_error else text


async def _streamed_countdown(
    client: httpx.AsyncClient, url: str, session_id: str, request_id: int
) -> dict[str, Any]:
    """A background call with progress: the worker's messages reach this SSE stream through
    the channel layer."""
    async with client.stream(
        "POST",
        url,
        headers=session_headers(session_id),
        json=tool_call(request_id, "countdown", {"seconds": 1}, progressToken=f"p{request_id}"),
    ) as response:
        return await final_message(response)


async def _works(client: httpx.AsyncClient, web: WebProcess, request_id: int) -> None:
    """A limited call is counted (its limit fails closed: no Redis would refuse it) and a
    streamed background call ends with its result."""
    url = f"{web.base_url}/mcp/{SLUG}"
    assert await _limited_echo(url, f"call {request_id}") == f"call {request_id}"
    session_id = await open_session(client, url)
    done = await _streamed_countdown(client, url, session_id, request_id + 1)
    assert done.get("result", {}).get("structuredContent") == {"counted": 1}, done


def _kill_master(group: SentinelGroup, *, first_sentinel_too: bool = False) -> int:
    """SIGKILL the master (no goodbye to anyone), and with ``first_sentinel_too`` the first
    sentinel the URL names before it: the sentinels left judge the master down after
    ``DOWN_AFTER_MS``, agree, and promote the replica. Returns the killed node's port."""
    group.wait_settled()
    old = group.master_port()
    new = group.replica_port(old)
    killed = f"{old}"
    if first_sentinel_too:
        first = group.sentinels[0]
        first.kill()
        group.down.add(first.port)
        killed = f"sentinel {first.port} and {old}"
    group.nodes[old].kill()
    group.wait_master_is(new)
    group.history.append(f"killed {killed}, master {new}")
    return old


def _restart(group: SentinelGroup, port: int) -> None:
    group.nodes[port].start()
    for sentinel in group.sentinels:
        if sentinel.port in group.down:
            sentinel.start()
            group.down.discard(sentinel.port)
    group.wait_settled()


@pytest.mark.parametrize("change", ["failover", "master killed"])
async def test_calls_streams_and_pushes_follow_a_failover(
    change: str,
    request: pytest.FixtureRequest,
    sentinel_group: SentinelGroup,
    fault_stack: FaultStack,
    web_process: Callable[..., WebProcess],
) -> None:
    """After a planned ``SENTINEL FAILOVER`` and after the master's death alike, limited
    calls, streamed background calls and pushed edits work again within the bound."""
    await asyncio.to_thread(run_manage, fault_stack.env, "shell", "-c", SEED)
    env = {
        "REDIS_URL": sentinel_group.url,
        "CELERY_BROKER_URL": sentinel_group.url,
        # Edits reach the process by the push alone, not by re-reading.
        "MCP_CACHE_RECHECK_SECONDS": "3600",
    }
    with celery_worker(extra_env={**fault_stack.env, **env}) as worker:
        web = web_process("uvicorn", env)
        url = f"{web.base_url}/mcp/{SLUG}"
        async with httpx.AsyncClient(timeout=30) as client:
            async with asyncio.timeout(30):
                await _works(client, web, 1)
                assert await echo_description(client, url)

            if change == "failover":
                await asyncio.to_thread(sentinel_group.failover)
            else:
                killed = await asyncio.to_thread(
                    _kill_master, sentinel_group, first_sentinel_too=True
                )
                # The dead node comes back as a replica of the new master, for the next test.
                request.addfinalizer(lambda: _restart(sentinel_group, killed))

            tries: list[str] = []

            async def limited_call_counted() -> bool:
                # Refused as "unavailable" while the limiter finds no master (fails closed).
                message = f"after {len(tries)}"
                tries.append(await _limited_echo(url, message))
                return tries[-1] == message

            await await_until(
                limited_call_counted,
                "a limited call counted on the new master",
                timeout=FAILOVER_WAIT_SECONDS,
                interval=0.1,
                detail=lambda: f"{tries} {sentinel_group.history}",
            )
            async with asyncio.timeout(FAILOVER_WAIT_SECONDS):
                await _works(client, web, 200)

            text = f"Edited after the failover {time.monotonic_ns()}"
            # Saved by another process on the group, as an operator's admin save would be.
            script = (
                "from mcp_app.models import Tool\n"
                "tool = Tool.objects.get(name='echo')\n"
                f"tool.description = {text!r}\n"
                "tool.save()\n"
            )
            await asyncio.to_thread(run_manage, {**fault_stack.env, **env}, "shell", "-c", script)
            seen: list[str] = []

            async def edited() -> bool:
                seen.append(await echo_description(client, url))
                return seen[-1] == text

            await await_until(
                edited,
                "the edit pushed after the failover",
                timeout=FAILOVER_WAIT_SECONDS,
                interval=0.1,
                detail=lambda: f"still {seen[-1]!r}; worker log {worker.log_path}",
            )


async def test_a_background_call_outlives_a_slow_channel_layer_join(
    sentinel_group: SentinelGroup,
    fault_stack: FaultStack,
    web_process: Callable[..., WebProcess],
) -> None:
    """A worker whose first sentinels hang (accept, never answer) joins a call's control
    group only after their timeouts (1 s each: four cost 4 s), longer than
    ``MCP_BACKGROUND_LOST_AFTER_SECONDS`` here (3 s): the heartbeat is written meanwhile, so
    the call is not settled as lost while it runs, and its result comes back."""
    await asyncio.to_thread(run_manage, fault_stack.env, "shell", "-c", SEED)
    sentinel_group.wait_settled()
    with contextlib.ExitStack() as stack:
        hung_ports = []
        for _ in range(4):
            silent = stack.enter_context(socket.socket())
            silent.bind(("127.0.0.1", 0))
            silent.listen(64)  # connections complete in the backlog and are never read
            hung_ports.append(f"127.0.0.1:{silent.getsockname()[1]}")
        hung = sentinel_group.url.replace("://", f"://{','.join(hung_ports)},", 1)
        env = {"REDIS_URL": hung, "CELERY_BROKER_URL": sentinel_group.url}
        with celery_worker(extra_env={**fault_stack.env, **env}):
            web = web_process("uvicorn", {**env, "REDIS_URL": sentinel_group.url})
            async with httpx.AsyncClient(timeout=30) as client:
                async with asyncio.timeout(FAILOVER_WAIT_SECONDS):
                    await _works(client, web, 1)


# -- each library's client, as settings make it -------------------------------------------------


async def test_each_client_the_settings_make_follows_a_failover(
    sentinel_group: SentinelGroup,
) -> None:
    """Django's cache, the channel layer, redis-py (sync and asyncio) and kombu's broker
    connection, each made from the sentinel URL as settings make it, work before a failover
    and again on the new master within the bound."""
    url = sentinel_group.url
    cache = RedisCache(
        [url],
        {"OPTIONS": {"pool_class": "mcp_app.services.redis_sentinel.CachePool"}},
    )
    layer = redis_sentinel.SentinelChannelLayer(
        hosts=[
            redis_sentinel.channel_layer_host(
                url, socket_timeout=5, socket_connect_timeout=2, **settings.REDIS_CLIENT_OPTIONS
            )
        ],
        prefix="sentinel-test:",
    )
    sync = redis_sentinel.sync_client(url, socket_timeout=2, socket_connect_timeout=2)
    aio = redis_sentinel.async_client(url, socket_timeout=2, socket_connect_timeout=2)
    broker_url, options = redis_sentinel.kombu_broker(url)

    def broker_round_trip(tag: str) -> str:
        with kombu.Connection(
            broker_url, transport=SentinelTransport, transport_options=options
        ) as connection:
            queue = connection.SimpleQueue("sentinel-test")
            try:
                queue.put({"tag": tag})
                message = queue.get(timeout=5)
                message.ack()
                return str(message.payload["tag"])
            finally:
                queue.close()

    async def round_trips(tag: str) -> dict[str, Any]:
        await asyncio.to_thread(cache.set, "sentinel-test", tag)
        channel = await layer.new_channel()
        await layer.send(channel, {"type": "test.tag", "tag": tag})
        sync.set("sentinel-test:sync", tag)
        await aio.set("sentinel-test:async", tag)
        return {
            "cache": await asyncio.to_thread(cache.get, "sentinel-test"),
            "layer": (await layer.receive(channel))["tag"],
            "sync": sync.get("sentinel-test:sync").decode(),
            "async": (await aio.get("sentinel-test:async")).decode(),
            "broker": await asyncio.to_thread(broker_round_trip, tag),
        }

    everyone = dict.fromkeys(["cache", "layer", "sync", "async", "broker"], "before")
    try:
        async with asyncio.timeout(20):
            assert await round_trips("before") == everyone
        new = await asyncio.to_thread(sentinel_group.failover)
        errors: list[str] = []

        async def all_work_again() -> bool:
            try:
                async with asyncio.timeout(10):
                    return await round_trips("after") == dict.fromkeys(everyone, "after")
            except Exception as exc:  # a stale pooled connection's first failure, then retried
                errors.append(repr(exc))
                return False

        await await_until(
            all_work_again,
            "every client working on the new master",
            timeout=FAILOVER_WAIT_SECONDS,
            interval=0.2,
            detail=lambda: "; ".join(errors[-3:]),
        )
        with contextlib.closing(sentinel_group.nodes[new].client()) as direct:
            assert direct.get("sentinel-test:sync") == b"after"
    finally:
        sync.close()
        await aio.aclose()
        await layer.flush()
        # Django's cache keeps its pools for the process's life; this one ends here.
        for pool in cache._cache._pools.values():
            pool.disconnect()
