"""``redis+sentinel://`` URLs (issue #30): what they name, what each library is given, and a
clear refusal of a malformed one before anything connects. Settings are read in subprocesses:
they come from the environment once, at import."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest
import redis

from mcp_app.services import redis_sentinel
from mcp_app.services.redis_sentinel import SentinelTarget
from scripts import services
from tests.support.live import ROOT


def test_a_full_url_names_the_sentinels_the_master_and_both_credentials() -> None:
    url = (
        "redis+sentinel://app:s%40cret@10.0.0.1:26380,10.0.0.2,10.0.0.3:26381/main/3"
        "?sentinel_username=watch&sentinel_password=w%26pw"
    )
    assert redis_sentinel.parse(url) == SentinelTarget(
        sentinels=(("10.0.0.1", 26380), ("10.0.0.2", 26379), ("10.0.0.3", 26381)),
        master="main",
        db=3,
        username="app",
        password="s@cret",
        sentinel_username="watch",
        sentinel_password="w&pw",
    )


def test_a_plain_url_is_not_a_sentinel_url() -> None:
    assert redis_sentinel.parse("redis://127.0.0.1:6379/0") is None
    assert redis_sentinel.parse("") is None


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("redis+sentinel://h1:26379", "master's name"),
        ("redis+sentinel://h1:26379/main/x", "database 'x'"),
        ("redis+sentinel://h1:port/main", "port of sentinel"),
        ("redis+sentinel://h1,,h2/main", "without a host"),
        ("redis+sentinel://h1/main?password=x", "unknown options password"),
    ],
)
def test_a_malformed_url_is_refused_with_what_is_wrong(url: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        redis_sentinel.parse(url)


def test_kombu_gets_one_sentinel_url_each_and_the_master_as_an_option() -> None:
    url = "redis+sentinel://:pw@h1:1,h2:2/main/2?sentinel_password=spw"
    broker, options = redis_sentinel.kombu_broker(url)
    assert broker == "sentinel://:pw@h1:1/2;sentinel://h2:2/2"
    assert options["master_name"] == "main"
    assert options["sentinel_kwargs"]["password"] == "spw"


@pytest.mark.parametrize(
    ("given", "asked"),
    [({"socket_timeout": 30, "socket_connect_timeout": 5}, 1.0), ({"socket_timeout": 0.25}, 0.25),
     ({}, 1.0)],
)  # fmt: skip
def test_a_sentinel_is_asked_within_a_second_or_the_callers_shorter_timeout(
    given: dict[str, float], asked: float
) -> None:
    # The channel layer connects to the master within 5 s; a hung sentinel must not cost that
    # on each client a worker makes afresh.
    host = redis_sentinel.channel_layer_host("redis+sentinel://h1,h2/main", **given)
    options = host["sentinel_kwargs"]
    assert (options["socket_timeout"], options["socket_connect_timeout"]) == (asked, asked)
    assert host.get("socket_connect_timeout") == given.get("socket_connect_timeout")


SHOW = (
    "import json; from django.conf import settings as s; print(json.dumps({"
    "'layer': s.CHANNEL_LAYERS['default'], 'cache': s.CACHES['default'],"
    "'broker': [s.CELERY_BROKER_URL, s.CELERY_BROKER_WRITE_URL,"
    " s.CELERY_BROKER_TRANSPORT_OPTIONS]}, default=str))"
)


def _settings(env: dict[str, str], code: str = SHOW) -> subprocess.CompletedProcess[str]:
    dropped = ("REDIS_URL", "CELERY_BROKER_URL", "CACHE_REDIS_URL")
    base = {k: v for k, v in os.environ.items() if k not in dropped}
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_settings_give_every_use_the_sentinel_form() -> None:
    url = "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/main/1"
    result = _settings({"REDIS_URL": url, "CELERY_BROKER_URL": url})
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout.strip().splitlines()[-1])
    layer = shown["layer"]
    assert layer["BACKEND"] == "mcp_app.services.redis_sentinel.SentinelChannelLayer"
    host = layer["CONFIG"]["hosts"][0]
    assert host["master_name"] == "main" and host["db"] == 1
    assert shown["cache"]["LOCATION"] == [url]
    assert shown["cache"]["OPTIONS"]["pool_class"] == "mcp_app.services.redis_sentinel.CachePool"
    broker, write_url, options = shown["broker"]
    assert broker == write_url == "sentinel://127.0.0.1:26379/1;sentinel://127.0.0.1:26380/1"
    assert options["master_name"] == "main"


@pytest.mark.parametrize(
    "name", ["REDIS_URL", "CELERY_BROKER_URL", "MCP_RATE_LIMIT_REDIS_URL", "CACHE_REDIS_URL"]
)
def test_settings_refuse_a_malformed_sentinel_url_by_name(name: str) -> None:
    result = _settings({name: "redis+sentinel://127.0.0.1:26379"})
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {name}: redis+sentinel URL" in result.stderr


def test_the_cache_may_live_on_a_redis_of_its_own() -> None:
    """``CACHE_REDIS_URL`` moves Django's cache (the API's throttles, DCR's limits) to another
    Redis: a key the cache writes is there, not on ``REDIS_URL``'s."""
    main = os.environ.get("REDIS_URL") or pytest.fail("the test command sets REDIS_URL")
    code = (
        "from django.core.cache import cache; cache.set('split-roles', 1, 60); "
        "print(cache.make_key('split-roles'))"
    )
    with services.redis() as own:
        result = _settings({"REDIS_URL": main, "CACHE_REDIS_URL": own}, code)
        assert result.returncode == 0, result.stderr
        key = result.stdout.strip().splitlines()[-1]
        with (
            contextlib.closing(redis.Redis.from_url(own)) as cache_redis,
            contextlib.closing(redis.Redis.from_url(main)) as main_redis,
        ):
            assert cache_redis.exists(key) == 1
            assert main_redis.exists(key) == 0
