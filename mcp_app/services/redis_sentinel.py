"""Redis URLs that name a master watched by Redis Sentinel, and clients that follow that master.

Every Redis URL of the product (``REDIS_URL``, ``CELERY_BROKER_URL``,
``MCP_RATE_LIMIT_REDIS_URL``) may take this form instead of ``redis://``::

    redis+sentinel://[[user]:password@]host:port[,host:port...]/<master>[/<db>]
        [?sentinel_username=...&sentinel_password=...][&ssl_ca_certs=...&...]

The hosts are the sentinels (port 26379 when left out), ``<master>`` the name they monitor it
by, the user and password those of the master (and its replicas), ``sentinel_*`` those of the
sentinels when they ask for a password, TLS options (``services/redis_tls.py``) those of every
connection, to the sentinels and to the master alike (with any, all speak TLS). A client made
here asks a sentinel where the master is whenever it connects, and drops a connection that
finds a replica (``READONLY``) or loses the master, so it follows a failover
(docs/operations.md, "Redis with Sentinel").

This module turns such a URL into each library's own Sentinel configuration (redis-py,
channels_redis, kombu, Django's cache); the rate limiter's own client (``services/resp.py``)
reads it with ``parse``. Stdlib and redis-py only: settings import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.backoff
import redis.retry
import redis.sentinel
from channels_redis.core import RedisChannelLayer

from mcp_app.services import redis_tls

SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379
# How long asking one sentinel may take: the caller's own connect timeout when it is shorter.
# A sentinel answers a tiny question; a longer wait (the channel layer's 5 s connect timeout)
# would only make a hung first sentinel cost that much on every client made afresh.
SENTINEL_TIMEOUT_SECONDS = 1.0
# How often a client retries one sentinel that failed it: never, since asking the next
# sentinel is the retry. redis-py's default (10 retries with pauses growing to 1 s) made each
# dead sentinel cost about 4 s (a refused connection) or 11 timeouts (a silent host) before
# the next was asked, on every Sentinel client made afresh (a worker's channel layer makes
# one per background call) while the first sentinel of the URL was down.
SENTINEL_RETRIES = 0


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """What a ``redis+sentinel://`` URL says: where to ask, for which master, with which
    credentials."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    # The URL's TLS options (redis_tls.options), the same for the sentinels and the master.
    tls: tuple[tuple[str, str], ...] = ()

    def tls_kwargs(self) -> dict[str, Any]:
        """redis-py's TLS arguments, for the sentinels and the master alike; none without TLS."""
        return redis_tls.kwargs(dict(self.tls)) if self.tls else {}

    def master_kwargs(self) -> dict[str, Any]:
        """Connection arguments of the master (redis-py's names)."""
        kwargs: dict[str, Any] = {"db": self.db, **self.tls_kwargs()}
        if self.username:
            kwargs["username"] = self.username
        if self.password:
            kwargs["password"] = self.password
        return kwargs

    def sentinel_kwargs(
        self, timeout: float | None = None, *, asynchronous: bool = False
    ) -> dict[str, Any]:
        """Connection arguments of the sentinels (redis-py's ``sentinel_kwargs``), for its
        asyncio client with ``asynchronous`` (redis-py's two ``Retry`` classes differ)."""
        wait = SENTINEL_TIMEOUT_SECONDS if timeout is None else timeout
        retry = redis.asyncio.retry.Retry if asynchronous else redis.retry.Retry
        kwargs: dict[str, Any] = {
            "socket_timeout": wait,
            "socket_connect_timeout": wait,
            "retry": retry(redis.backoff.NoBackoff(), SENTINEL_RETRIES),
            **self.tls_kwargs(),
        }
        if self.sentinel_username:
            kwargs["username"] = self.sentinel_username
        if self.sentinel_password:
            kwargs["password"] = self.sentinel_password
        return kwargs


def is_sentinel_url(url: str) -> bool:
    return url.startswith(f"{SCHEME}://")


def parse(url: str) -> SentinelTarget | None:
    """The target of a ``redis+sentinel://`` URL; None for any other URL.

    Raises:
        ValueError: the URL has the scheme but not the form (the message says what is wrong).
    """
    if not is_sentinel_url(url):
        return None
    rest = url[len(SCHEME) + 3 :]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    credentials, _, hosts = netloc.rpartition("@")
    username = password = None
    if credentials:
        user, has_password, secret = credentials.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    sentinels = []
    for host in hosts.split(","):
        name, colon, port = host.strip().rpartition(":")
        if not colon:
            name, port = port, ""
        if not name:
            raise ValueError(f"{SCHEME} URL: a sentinel without a host in {host!r}")
        try:
            sentinels.append((name.strip("[]"), int(port) if port else DEFAULT_SENTINEL_PORT))
        except ValueError:
            raise ValueError(
                f"{SCHEME} URL: the port of sentinel {host!r} is not a number"
            ) from None
    segments = [unquote(part) for part in path.split("/") if part]
    if not segments or len(segments) > 2:
        raise ValueError(f"{SCHEME} URL: give the master's name as its path (/<master>[/<db>])")
    try:
        db = int(segments[1]) if len(segments) == 2 else 0
    except ValueError:
        raise ValueError(f"{SCHEME} URL: the database {segments[1]!r} is not a number") from None
    options = {key: values[-1] for key, values in parse_qs(query).items()}
    unknown = set(options) - {"sentinel_username", "sentinel_password"}
    unknown = {key for key in unknown if not key.startswith("ssl_")}
    if unknown:
        raise ValueError(f"{SCHEME} URL: unknown options {', '.join(sorted(unknown))}")
    tls = redis_tls.options(url)
    redis_tls.kwargs(tls)  # its values are checked
    return SentinelTarget(
        sentinels=tuple(sentinels),
        master=segments[0],
        db=db,
        username=username,
        password=password,
        sentinel_username=options.get("sentinel_username") or None,
        sentinel_password=options.get("sentinel_password") or None,
        tls=tuple(sorted(tls.items())),
    )


def _sentinel_wait(kwargs: dict[str, Any]) -> float:
    wait = kwargs.get("socket_connect_timeout") or kwargs.get("socket_timeout")
    return SENTINEL_TIMEOUT_SECONDS if wait is None else min(float(wait), SENTINEL_TIMEOUT_SECONDS)


class _SyncMasterClient(redis.Redis):
    """A client of the master that closes its connections to the sentinels with its own (a
    health check or a metrics scrape makes one per use)."""

    def close(self) -> None:
        super().close()
        pool = self.connection_pool
        if isinstance(pool, redis.sentinel.SentinelConnectionPool):
            for sentinel in pool.sentinel_manager.sentinels:
                sentinel.close()
                sentinel.connection_pool.disconnect()


class _AsyncMasterClient(redis.asyncio.Redis):
    """The asyncio twin of ``_SyncMasterClient``."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        pool = self.connection_pool
        if isinstance(pool, redis.asyncio.sentinel.SentinelConnectionPool):
            for sentinel in pool.sentinel_manager.sentinels:
                await sentinel.aclose()
                await sentinel.connection_pool.disconnect()


def sync_client(url: str, **kwargs: Any) -> redis.Redis:
    """redis-py's client of ``url`` (``redis.Redis.from_url``'s arguments); for a sentinel URL,
    one of the current master that finds it again after a failover."""
    target = parse(url)
    if target is None:
        return redis.Redis.from_url(url, **kwargs)
    sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]  # unannotated in redis-py
        list(target.sentinels), sentinel_kwargs=target.sentinel_kwargs(_sentinel_wait(kwargs))
    )
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]  # as above
        target.master, redis_class=_SyncMasterClient, **target.master_kwargs(), **kwargs
    )
    return client


def async_client(url: str, **kwargs: Any) -> redis.asyncio.Redis:
    """The asyncio twin of ``sync_client``."""
    target = parse(url)
    if target is None:
        return redis.asyncio.Redis.from_url(url, **kwargs)
    sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]  # as above
        list(target.sentinels),
        sentinel_kwargs=target.sentinel_kwargs(_sentinel_wait(kwargs), asynchronous=True),
    )
    client: redis.asyncio.Redis = sentinel.master_for(
        target.master, redis_class=_AsyncMasterClient, **target.master_kwargs(), **kwargs
    )
    return client


class _ClosingSentinelPool(redis.asyncio.sentinel.SentinelConnectionPool):
    """A pool of the master that closes its connections to the sentinels with its own."""

    async def disconnect(self, inuse_connections: bool = True) -> None:
        await super().disconnect(inuse_connections)
        for sentinel in self.sentinel_manager.sentinels:
            await sentinel.aclose()
            await sentinel.connection_pool.disconnect()


class SentinelChannelLayer(RedisChannelLayer):  # type: ignore[misc]  # channels_redis has no types
    """channels_redis's layer for a ``channel_layer_host`` of a sentinel URL.

    channels_redis makes a pool per event loop and closes it when the loop closes, but not
    its connections to the sentinels: a Celery worker, which runs each background call in an
    event loop of its own, would leave them behind call after call.
    """

    def create_pool(self, index: int) -> redis.asyncio.ConnectionPool:
        host = dict(self.hosts[index])
        if "master_name" not in host:
            pool: redis.asyncio.ConnectionPool = super().create_pool(index)
            return pool
        sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]  # redis-py
            host.pop("sentinels"), sentinel_kwargs=host.pop("sentinel_kwargs", None)
        )
        # SentinelConnectionPool.__init__ is unannotated in redis-py.
        return _ClosingSentinelPool(host.pop("master_name"), sentinel, **host)  # type: ignore[no-untyped-call]


def channel_layer_host(url: str, **kwargs: Any) -> dict[str, Any]:
    """One entry of channels_redis's ``hosts`` for ``url`` (its sentinel form for a sentinel
    URL, for ``SentinelChannelLayer``)."""
    target = parse(url)
    if target is None:
        return {"address": url, **kwargs}
    return {
        "sentinels": list(target.sentinels),
        "master_name": target.master,
        "sentinel_kwargs": target.sentinel_kwargs(_sentinel_wait(kwargs), asynchronous=True),
        **target.master_kwargs(),
        **kwargs,
    }


def kombu_broker(url: str) -> tuple[str, dict[str, Any]]:
    """kombu's broker URL and transport options for a sentinel URL: one ``sentinel://`` URL
    per sentinel (the first carries the master's credentials and database), the master's name
    and the sentinels' credentials as options."""
    target = parse(url)
    if target is None:
        raise ValueError(f"not a {SCHEME} URL")
    auth = ""
    if target.password:
        auth = f"{target.username or ''}:{target.password}@"
    # kombu reads the first URL's query as TLS options of its connections to the master.
    tls = f"?{urlencode(target.tls)}" if target.tls else ""
    urls = [
        f"sentinel://{auth if index == 0 else ''}{host}:{port}/{target.db}"
        + (tls if index == 0 else "")
        for index, (host, port) in enumerate(target.sentinels)
    ]
    options = {"master_name": target.master, "sentinel_kwargs": target.sentinel_kwargs()}
    return ";".join(urls), options


class _ClosingSyncSentinelPool(redis.sentinel.SentinelConnectionPool):
    """A pool of the master that closes its connections to the sentinels with its own."""

    def disconnect(self, inuse_connections: bool = True) -> None:
        super().disconnect(inuse_connections)
        for sentinel in self.sentinel_manager.sentinels:
            sentinel.close()
            sentinel.connection_pool.disconnect()


class CachePool:
    """Django's ``RedisCache`` ``pool_class`` for a sentinel URL: ``from_url`` makes a pool of
    connections to the current master (give ``LOCATION`` as a list: Django splits a string at
    commas)."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> redis.ConnectionPool:
        target = parse(url)
        if target is None:
            return redis.ConnectionPool.from_url(url, **options)
        sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]  # unannotated in redis-py
            list(target.sentinels), sentinel_kwargs=target.sentinel_kwargs(_sentinel_wait(options))
        )
        # SentinelConnectionPool.__init__ is unannotated in redis-py.
        return _ClosingSyncSentinelPool(  # type: ignore[no-untyped-call]
            target.master, sentinel, **target.master_kwargs(), **options
        )
