"""Rate limits of the management API, and what they count in when Redis fails.

- ``UserRateThrottle`` / ``AnonRateThrottle``: DRF's, keyed by user or by client address
  (``auth.addresses.client_address``: ``X-Forwarded-For`` only from ``TRUSTED_PROXIES``),
  with rates read per request from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``.
- Failed authentications (``API_THROTTLE_AUTH_FAILURES``, e.g. ``20/minute``): an address
  past that many bearer tokens refused within the window gets 429 for every bearer token it
  sends until the window ends, checked before the token is looked up, so a flood of made-up
  tokens stops costing database queries. Counted in fixed windows with an atomic increment:
  concurrent failures all count.

Counts live in Django's cache (Redis with ``REDIS_URL``, or ``CACHE_REDIS_URL`` when set;
shared by every web process). While
Redis fails, each process counts in its own memory instead (the limits then hold per process,
not per site), says so in one log line per outage and counts the fallback in
``mcphost_api_throttle_local_counts``; it tries Redis again every ``RETRY_SECONDS``. A Redis
outage therefore never turns an API request into a 500.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.exceptions import ImproperlyConfigured
from redis.exceptions import RedisError
from rest_framework import throttling
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.settings import api_settings

from mcp_app.auth.addresses import client_address
from mcp_app.services import metrics

logger = logging.getLogger(__name__)

T = TypeVar("T")

# After Redis fails, this process counts in memory for this long before trying Redis again:
# an unreachable Redis costs one request per process this often, not every request.
RETRY_SECONDS = 5.0
# Keys a process keeps in memory while Redis is down; the oldest are culled beyond this.
LOCAL_ENTRIES = 10_000
AUTH_FAILURE_KEY = "mcphost:api-auth-failures:{address}:{window}"


class FallbackCounters:
    """Django's default cache, or this process's memory while that cache's Redis fails."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._local = LocMemCache("mcphost-throttle-fallback", {"MAX_ENTRIES": LOCAL_ENTRIES})
        self._lock = threading.Lock()
        self._failing = False
        self._retry_at = 0.0

    def _use(self, operation: Callable[[BaseCache], T]) -> T:
        if self._clock() >= self._retry_at:
            try:
                result = operation(caches["default"])
            except RedisError:
                with self._lock:
                    self._retry_at = self._clock() + RETRY_SECONDS
                    if not self._failing:
                        logger.warning("API throttles count per process: Redis unavailable")
                    self._failing = True
            else:
                if self._failing:
                    with self._lock:
                        if self._failing:
                            logger.warning("API throttles count in Redis again")
                        self._failing = False
                return result
        metrics.API_THROTTLE_LOCAL.inc()
        return operation(self._local)

    def get(self, key: str, default: Any = None) -> Any:
        return self._use(lambda cache: cache.get(key, default))

    def set(self, key: str, value: Any, timeout: float) -> None:
        self._use(lambda cache: cache.set(key, value, timeout))

    def incr(self, key: str, timeout: float) -> int:
        """Add one to ``key`` (created with ``timeout`` if missing); return the new count."""

        def increment(cache: BaseCache) -> int:
            cache.add(key, 0, timeout)
            try:
                return cache.incr(key)
            except ValueError:  # expired between add and incr: this is the first count
                cache.set(key, 1, timeout)
                return 1

        return self._use(increment)


counters = FallbackCounters()


class _Rates:
    """Rates read when a throttle is made (per request), so a changed setting applies."""

    scope: str

    def get_rate(self) -> str | None:
        # Strings such as "60/min" (the stubs say numbers).
        rates: dict[str, Any] = api_settings.DEFAULT_THROTTLE_RATES
        rate: str | None = rates.get(self.scope)
        return rate

    def get_ident(self, request: Request) -> str:
        return client_address(request.META)


class UserRateThrottle(_Rates, throttling.UserRateThrottle):  # type: ignore[misc]
    cache = counters  # type: ignore[assignment]  # the get/set of a BaseCache, not a subclass


class AnonRateThrottle(_Rates, throttling.AnonRateThrottle):  # type: ignore[misc]
    cache = counters  # type: ignore[assignment]  # the get/set of a BaseCache, not a subclass


_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _auth_failure_rate() -> tuple[int, int] | None:
    """``(failures, window seconds)`` of ``API_THROTTLE_AUTH_FAILURES``; None when it is off.

    The format is DRF's (``20/minute``, ``100/hour``); empty or ``0/...`` turns it off.
    """
    rate = str(getattr(settings, "API_THROTTLE_AUTH_FAILURES", "") or "").strip()
    if not rate:
        return None
    number, _, period = rate.partition("/")
    try:
        limit, seconds = int(number), _PERIODS[period.strip()[:1]]
    except (ValueError, KeyError):
        raise ImproperlyConfigured(
            f"API_THROTTLE_AUTH_FAILURES must look like 20/minute, not {rate!r}"
        ) from None
    return (limit, seconds) if limit > 0 else None


def _auth_failure_key(address: str, now: float, seconds: int) -> str:
    return AUTH_FAILURE_KEY.format(address=address, window=int(now // seconds))


def auth_failures_check(request: Request) -> None:
    """Refuse a bearer token from an address past its failed-authentication budget.

    Raises:
        Throttled: 429, with the seconds until the window ends as Retry-After.
    """
    rate = _auth_failure_rate()
    if rate is None:
        return
    limit, seconds = rate
    now = time.time()
    key = _auth_failure_key(client_address(request.META), now, seconds)
    if (counters.get(key) or 0) >= limit:
        metrics.API_AUTH_THROTTLED.inc()
        raise Throttled(
            max(1, math.ceil(seconds - now % seconds)),
            "Too many failed authentications from this address.",
        )


def auth_failure_record(request: Request) -> None:
    """Count one failed bearer authentication of the request's client address."""
    if rate := _auth_failure_rate():
        key = _auth_failure_key(client_address(request.META), time.time(), rate[1])
        counters.incr(key, rate[1])
