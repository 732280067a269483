"""Redis over TLS (``rediss://``) with a private CA, for every Redis role of the product.

Real redis-servers with TLS on loopback: a throwaway CA (made here) signs their certificate
for 127.0.0.1, one server takes clients with or without a certificate, the other only
clients with one the CA signed (mutual TLS). Each also listens in plain text on another port,
for the test's own look at what landed there. Every client the product makes (redis-py sync and
asyncio, Django's cache, the channel layer, kombu's broker connection, the rate limiter's own
client) works with the CA given in the URL's query and is refused without it; a web process
and a Celery worker given only ``rediss://`` URLs serve limited calls, streamed background
calls, pushed edits and the API's throttles; a malformed TLS option stops the process at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import shutil
import ssl
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import kombu
import pytest
import redis
from channels_redis.core import RedisChannelLayer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from django.conf import settings
from django.core.cache.backends.redis import RedisCache

from mcp_app.services import redis_sentinel, redis_tls, resp
from mcp_app.services.celery_transport import SentinelTransport, Transport
from scripts import services
from tests.faults.conftest import FaultStack, Redis, WebProcess, plain_redis_args, run_manage
from tests.faults.test_invalidation_after_redis_restart import echo_description
from tests.faults.test_redis_sentinel import SEED, SLUG, _works
from tests.services.test_redis_sentinel_urls import _settings
from tests.support.waiting import await_until, wait_until
from tests.support.worker import celery_worker

CREATE_TOKEN = """
from django.contrib.auth.models import User
from mcp_app.services.api_tokens import api_token_create
user = User.objects.create_superuser({username!r}, password="unused-password-123")
print(api_token_create(user=user, name="tls")[1])
"""
AUTH_FAILURES = 3
MASTER = "mcphost-tls"


@dataclass(frozen=True)
class Pki:
    """A CA and what it signed (PEM files): a server certificate for 127.0.0.1 and a client's."""

    folder: Path

    def __getitem__(self, name: str) -> str:
        return str(self.folder / name)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(
    folder: Path, stem: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate
) -> None:
    (folder / f"{stem}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (folder / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def make_pki(folder: Path) -> Pki:
    now = datetime.datetime.now(datetime.UTC)
    valid = {"not_valid_before": now - datetime.timedelta(hours=1),
             "not_valid_after": now + datetime.timedelta(days=1)}  # fmt: skip
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder(subject_name=_name("mcphost test CA"), **valid)
        .issuer_name(_name("mcphost test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),  # fmt: skip
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    _write(folder, "ca", ca_key, ca)
    # A server's certificate is its client's too when it connects to another (a sentinel to
    # its master).
    server_and_client = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    for stem, usage in [
        ("server", server_and_client),
        ("client", [ExtendedKeyUsageOID.CLIENT_AUTH]),
    ]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder(subject_name=_name(f"mcphost test {stem}"), **valid)
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
            .sign(ca_key, hashes.SHA256())
        )
        _write(folder, stem, key, cert)
    return Pki(folder)


@dataclass
class TlsRedis:
    server: Redis
    tls_port: int
    pki: Pki

    def url(self, *, ca: bool = True, client_cert: bool = False, db: int = 0) -> str:
        query = []
        if ca:
            query.append(f"ssl_ca_certs={self.pki['ca.pem']}")
        if client_cert:
            query += [f"ssl_certfile={self.pki['client.pem']}",
                      f"ssl_keyfile={self.pki['client.key']}"]  # fmt: skip
        tail = f"?{'&'.join(query)}" if query else ""
        return f"rediss://127.0.0.1:{self.tls_port}/{db}{tail}"

    def plain(self) -> redis.Redis:
        """The test's own look, on the plain port."""
        return self.server.client()


def _tls_redis(workdir: Path, pki: Pki, auth_clients: str) -> TlsRedis:
    plain, tls = services.free_port(), services.free_port()
    args = [
        *plain_redis_args(workdir, plain), "--tls-port", str(tls),
        "--tls-cert-file", pki["server.pem"], "--tls-key-file", pki["server.key"],
        "--tls-ca-cert-file", pki["ca.pem"], "--tls-auth-clients", auth_clients,
    ]  # fmt: skip
    server = Redis(workdir, plain, args=args)
    server.start()
    return TlsRedis(server, tls, pki)


def _tls_sentinel(workdir: Path, pki: Pki, master: TlsRedis) -> TlsRedis:
    """A sentinel speaking TLS to its clients and to ``master`` (``tls-replication``)."""
    plain, tls = services.free_port(), services.free_port()
    workdir.mkdir(parents=True)
    conf = workdir / "sentinel.conf"
    conf.write_text(
        f"port {plain}\nbind 127.0.0.1\ndir {workdir}\ntls-port {tls}\n"
        f"tls-cert-file {pki['server.pem']}\ntls-key-file {pki['server.key']}\n"
        f"tls-ca-cert-file {pki['ca.pem']}\ntls-auth-clients optional\ntls-replication yes\n"
        f"sentinel monitor {MASTER} 127.0.0.1 {master.tls_port} 1\n"
    )
    server = Redis(workdir, plain, args=[str(conf), "--sentinel"])
    server.start()
    sentinel = TlsRedis(server, tls, pki)

    def watching() -> bool:
        with contextlib.closing(server.client()) as look:
            state = look.sentinel_master(MASTER)
        # INFO answered over TLS: the sentinel knows the master for what it is.
        return bool(state.get("role-reported") == "master" and state["info-refresh"] < 60_000)

    wait_until(watching, "the sentinel watching its master over TLS")
    return sentinel


@dataclass
class Servers:
    tls: TlsRedis  # client certificates optional
    mutual: TlsRedis  # client certificates required
    sentinel: TlsRedis  # watches ``tls`` as MASTER

    def url(self, kind: str, **given: Any) -> str:
        if kind == "sentinel":
            # The options of the rediss:// URL, for the sentinel and the master alike.
            query = self.tls.url(**given).partition("?")[2]
            tail = f"?{query}" if query else "?ssl_cert_reqs=required"
            return f"redis+sentinel://127.0.0.1:{self.sentinel.tls_port}/{MASTER}/0{tail}"
        server = self.mutual if kind == "mutual" else self.tls
        return server.url(client_cert=kind == "mutual", **given)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    workdir = Path(tempfile.mkdtemp(prefix="mcphost-redis-tls-"))
    started: list[TlsRedis] = []
    try:
        pki = make_pki(workdir)
        started.append(_tls_redis(workdir / "tls", pki, "optional"))
        started.append(_tls_redis(workdir / "mutual", pki, "yes"))
        started.append(_tls_sentinel(workdir / "sentinel", pki, started[0]))
        yield Servers(*started)
    finally:
        for server in started:
            server.server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# -- each client the product makes ------------------------------------------------------------


def _cache_round_trip(url: str, tag: str) -> Any:
    cache = RedisCache(
        [url],
        {"OPTIONS": {"pool_class": "mcp_app.services.redis_sentinel.CachePool",
                     "socket_connect_timeout": 2, "socket_timeout": 2}},
    )  # fmt: skip
    try:
        cache.set("tls-test:cache", tag)
        return cache.get("tls-test:cache")
    finally:
        for pool in cache._cache._pools.values():
            pool.disconnect()


async def _layer_round_trip(url: str, tag: str) -> Any:
    # The layer settings name for the URL.
    kind = (
        redis_sentinel.SentinelChannelLayer
        if redis_sentinel.is_sentinel_url(url)
        else RedisChannelLayer
    )
    layer = kind(
        hosts=[
            redis_sentinel.channel_layer_host(
                url, socket_timeout=5, socket_connect_timeout=2, **settings.REDIS_CLIENT_OPTIONS
            )
        ],
        prefix="tls-test:",
    )
    try:
        channel = await layer.new_channel()
        await layer.send(channel, {"type": "test.tag", "tag": tag})
        return (await layer.receive(channel))["tag"]
    finally:
        await layer.flush()


def _sync_round_trip(url: str, tag: str) -> Any:
    with contextlib.closing(
        redis_sentinel.sync_client(url, socket_timeout=2, socket_connect_timeout=2)
    ) as client:
        client.set("tls-test:sync", tag)
        return client.get("tls-test:sync").decode()


async def _async_round_trip(url: str, tag: str) -> Any:
    client = redis_sentinel.async_client(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        await client.set("tls-test:async", tag)
        return (await client.get("tls-test:async")).decode()
    finally:
        await client.aclose()


def _broker_round_trip(url: str, tag: str) -> Any:
    # As settings give Celery a URL: kombu's TLS options when a rediss:// URL has none, the
    # sentinel:// form of a sentinel URL.
    transport: type[Transport] | type[SentinelTransport] = Transport
    options: dict[str, Any] = {"socket_timeout": 2, "socket_connect_timeout": 2}
    if redis_sentinel.is_sentinel_url(url):
        url, sentinel_options = redis_sentinel.kombu_broker(url)
        transport, options = SentinelTransport, {**options, **sentinel_options}
    with kombu.Connection(
        url,
        transport=transport,
        ssl={"ssl_cert_reqs": ssl.CERT_REQUIRED},
        transport_options=options,
    ) as connection:
        connection.ensure_connection(max_retries=1)
        queue = connection.SimpleQueue("tls-test:queue")
        try:
            queue.put({"tag": tag})
            message = queue.get(timeout=5)
            message.ack()
            return message.payload["tag"]
        finally:
            queue.close()


async def _resp_round_trip(url: str, tag: str) -> Any:
    client = resp.Client(url, timeout=2.0)
    try:
        await client.pipeline([[b"SET", b"tls-test:resp", tag.encode()]])
        return (await client.pipeline([[b"GET", b"tls-test:resp"]]))[0].decode()
    finally:
        client.drop()


ROUND_TRIPS: dict[str, Callable[[str, str], Any]] = {
    "cache": _cache_round_trip,
    "layer": _layer_round_trip,
    "sync": _sync_round_trip,
    "async": _async_round_trip,
    "broker": _broker_round_trip,
    "resp": _resp_round_trip,
}


async def _run(round_trip: Callable[[str, str], Any], url: str, tag: str) -> Any:
    async with asyncio.timeout(20):
        if asyncio.iscoroutinefunction(round_trip):
            return await round_trip(url, tag)
        return await asyncio.to_thread(round_trip, url, tag)


async def _refusal(round_trip: Callable[[str, str], Any], url: str) -> str:
    """What the failed round trip said, its causes included."""
    try:
        await _run(round_trip, url, "refused")
    except Exception as exc:
        said, cause = [], exc
        while cause is not None and len(said) < 5:
            said.append(f"{type(cause).__name__}: {cause}")
            cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
        return " <- ".join(said)
    raise AssertionError(f"connected to {url}")


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
@pytest.mark.parametrize("kind", ["ca", "mutual", "sentinel"])
async def test_each_client_works_with_the_private_ca_in_the_url(
    servers: Servers, name: str, kind: str
) -> None:
    """With ``ssl_ca_certs`` (and the client's certificate and key where the server wants
    them) every client makes a verified TLS connection, to the sentinel and the master it
    names too, and its write is on that server."""
    server = servers.mutual if kind == "mutual" else servers.tls
    tag = f"{name}-{uuid.uuid4().hex}"
    assert await _run(ROUND_TRIPS[name], servers.url(kind), tag) == tag
    if name in ("sync", "async", "resp"):
        with contextlib.closing(server.plain()) as look:
            assert look.get(f"tls-test:{name}") == tag.encode()


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
@pytest.mark.parametrize("kind", ["ca", "sentinel"])
async def test_each_client_refuses_a_certificate_it_cannot_verify(
    servers: Servers, name: str, kind: str
) -> None:
    """Verification is on: without the private CA, the system's CAs do not vouch for the
    server (or the sentinel), and every client gives up on the handshake."""
    said = await _refusal(ROUND_TRIPS[name], servers.url(kind, ca=False))
    # redis-py's Sentinel client reports no master, its sentinels' errors by type alone.
    refused = "certificate verify failed" in said or (
        kind == "sentinel" and name != "resp" and "No master found" in said
    )
    assert refused, said


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
async def test_a_server_wanting_client_certificates_refuses_a_client_without(
    servers: Servers, name: str
) -> None:
    """The mutual-TLS round trips above did send the client's certificate: the same server
    refuses a client that verifies it but has none to show."""
    said = await _refusal(ROUND_TRIPS[name], servers.mutual.url(client_cert=False))
    assert "certificate verify failed" not in said, said


async def test_the_host_name_is_checked_unless_the_url_says_not_to(servers: Servers) -> None:
    """The certificate names 127.0.0.1 only: reached as ``localhost`` it does not match,
    for the limiter's client as for redis-py, until ``ssl_check_hostname=false``."""
    by_name = servers.tls.url().replace("127.0.0.1", "localhost")
    for name in ("sync", "resp"):
        said = await _refusal(ROUND_TRIPS[name], by_name)
        assert "match" in said, said
        unchecked = f"{by_name}&ssl_check_hostname=false"
        assert await _run(ROUND_TRIPS[name], unchecked, "unchecked") == "unchecked"


# -- settings -----------------------------------------------------------------------------------

BROKER_ROUND_TRIP = (
    "from mcpsite.celery import app\n"
    "with app.connection_for_write() as connection:\n"
    "    connection.ensure_connection(max_retries=1)\n"
    "    queue = connection.SimpleQueue('tls-test:settings')\n"
    "    queue.put({'tag': 'settings'})\n"
    "    message = queue.get(timeout=5)\n"
    "    message.ack()\n"
    "    print(message.payload['tag'])\n"
)


def test_celery_checks_a_bare_rediss_urls_certificate_against_the_system_cas(
    servers: Servers,
) -> None:
    """A ``rediss://`` broker URL without TLS options gets TLS with the certificate checked,
    as redis-py's clients do: against the system's CAs (here ``SSL_CERT_FILE``, which
    OpenSSL reads as the system's bundle), and refused when they do not vouch for it."""
    bare = {"CELERY_BROKER_URL": servers.tls.url(ca=False)}
    trusted = _settings({**bare, "SSL_CERT_FILE": servers.tls.pki["ca.pem"]}, BROKER_ROUND_TRIP)
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.stdout.strip().splitlines()[-1] == "settings"
    untrusted = _settings(bare, BROKER_ROUND_TRIP)
    assert untrusted.returncode != 0
    assert "certificate verify failed" in untrusted.stderr, untrusted.stderr[-2000:]


@pytest.mark.parametrize(
    ("name", "query", "error"),
    [
        ("REDIS_URL", "ssl_cert_reqs=CERT_REQUIRED", "ssl_cert_reqs='CERT_REQUIRED' is none of"),
        (
            "CELERY_BROKER_URL",
            "ssl_ca_certs=/nonexistent/ca.pem",
            "ssl_ca_certs=/nonexistent/ca.pem: no such file",
        ),
        ("MCP_RATE_LIMIT_REDIS_URL", "ssl_check_hostname=no", "ssl_check_hostname='no' is neither"),
        ("CACHE_REDIS_URL", "ssl_ciphers=HIGH", "unknown TLS options ssl_ciphers"),
    ],
)
def test_settings_refuse_a_malformed_tls_option_by_name(
    servers: Servers, name: str, query: str, error: str
) -> None:
    result = _settings({name: f"rediss://127.0.0.1:{servers.tls.tls_port}/0?{query}"})
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {name}: {error}" in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("rediss://h/0?ssl_cert_reqs=maybe", "ssl_cert_reqs='maybe' is none of"),
        (
            "rediss://h/0?ssl_certfile=/nonexistent/c.pem",
            "ssl_certfile=/nonexistent/c.pem: no such file",
        ),
        ("rediss://h/0?ssl_keyfile=/k.pem", "ssl_keyfile without ssl_certfile"),
        ("rediss://h/0?ssl_check_hostname=0", "neither true nor false"),
        ("rediss://h/0?ssl_password=x", "unknown TLS options ssl_password"),
        ("rediss://h/0?ssl_cert_reqs=none&ssl_cert_reqs=required", "given twice: ssl_cert_reqs"),
        ("redis://h/0?ssl_ca_certs=/ca.pem", "need a rediss:// or"),
        ("unix:///tmp/redis.sock?ssl_ca_certs=/ca.pem", r"need a rediss:// or redis\+sentinel://"),
        ("redis+sentinel://h/main?ssl_cert_reqs=yes", "ssl_cert_reqs='yes' is none of"),
    ],
)
def test_a_malformed_tls_option_is_refused_with_what_is_wrong(url: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        redis_tls.context(url)


def test_a_file_that_holds_no_certificate_is_refused(servers: Servers) -> None:
    # The key where the CA bundle should be.
    url = f"rediss://h/0?ssl_ca_certs={servers.tls.pki['ca.key']}"
    with pytest.raises(ValueError, match="TLS files"):
        redis_tls.context(url)


def test_kombu_gets_a_sentinel_urls_tls_options_for_the_master_and_the_sentinels() -> None:
    url = "redis+sentinel://h1:1,h2:2/main/0?ssl_cert_reqs=required&ssl_check_hostname=false"
    broker, options = redis_sentinel.kombu_broker(url)
    assert broker == (
        "sentinel://h1:1/0?ssl_cert_reqs=required&ssl_check_hostname=false;sentinel://h2:2/0"
    )
    sentinel_kwargs = options["sentinel_kwargs"]
    assert sentinel_kwargs["ssl"] is True and sentinel_kwargs["ssl_check_hostname"] is False


def test_a_url_without_tls_has_no_context() -> None:
    assert redis_tls.context("redis://h:6379/0") is None
    assert redis_tls.context("") is None


# -- a web process and a worker on TLS only -----------------------------------------------------


@pytest.mark.parametrize("kind", ["ca", "sentinel"])
async def test_a_web_process_and_a_worker_work_over_tls_only(
    servers: Servers,
    fault_stack: FaultStack,
    web_process: Callable[..., WebProcess],
    kind: str,
) -> None:
    """Every Redis URL is the TLS server's (or the TLS sentinel's that names it), with the
    private CA: a limited call is counted (its limit fails closed), a background call's
    progress and result cross the channel layer to an SSE stream, an edit saved elsewhere is
    pushed, the API's throttles count in the shared cache, and ``/readyz`` finds Redis and the
    worker's heartbeat; each role's keys are on that server."""
    with contextlib.closing(servers.tls.plain()) as look:
        look.flushall()  # what an earlier test left there is not this one's
    await asyncio.to_thread(run_manage, fault_stack.env, "shell", "-c", SEED)
    url = servers.url(kind)
    env = {
        "REDIS_URL": url,
        "CELERY_BROKER_URL": url,
        "MCP_RATE_LIMIT_REDIS_URL": url,
        "CACHE_REDIS_URL": url,
        "MCP_CACHE_RECHECK_SECONDS": "3600",  # edits arrive by the push alone
        "API_THROTTLE_AUTH_FAILURES": f"{AUTH_FAILURES}/day",
    }
    token = (
        await asyncio.to_thread(
            run_manage,
            fault_stack.env,
            "shell",
            "-c",
            CREATE_TOKEN.format(username=f"u{uuid.uuid4().hex}"),
        )
    ).split()[-1]
    with celery_worker(extra_env={**fault_stack.env, **env}) as worker:
        web = web_process("uvicorn", env)
        mcp = f"{web.base_url}/mcp/{SLUG}"
        async with httpx.AsyncClient(timeout=30) as client:
            async with asyncio.timeout(60):
                await _works(client, web, 1)

                text = f"Edited over TLS {uuid.uuid4().hex}"
                script = (
                    "from mcp_app.models import Tool\n"
                    "tool = Tool.objects.get(name='echo')\n"
                    f"tool.description = {text!r}\n"
                    "tool.save()\n"
                )
                await asyncio.to_thread(
                    run_manage, {**fault_stack.env, **env}, "shell", "-c", script
                )
            seen: list[str] = []

            async def edited() -> bool:
                seen.append(await echo_description(client, mcp))
                return seen[-1] == text

            await await_until(
                edited,
                "the edit pushed over TLS",
                interval=0.1,
                detail=lambda: f"still {seen[-1]!r}; worker log {worker.log_path}",
            )

            api = f"{web.base_url}/api/v1/endpoints/"
            listed = await client.get(api, headers={"authorization": f"Bearer {token}"})
            assert listed.status_code == 200, listed.text
            made_up = [
                (await client.get(api, headers={"authorization": f"Bearer mcpk_{n}"})).status_code
                for n in range(AUTH_FAILURES + 1)
            ]
            assert made_up == [401] * AUTH_FAILURES + [429]

            # The probe reads Redis, and the worker's heartbeat there, over TLS too.
            probes: list[Any] = []

            async def ready() -> bool:
                response = await client.get(f"{web.base_url}/readyz")
                probes.append((response.status_code, response.json()))
                return response.status_code == 200 and probes[-1][1]["failed"] == []

            await await_until(ready, "/readyz ready", detail=lambda: str(probes[-1:]))

        # Counted in the shared cache, not per process for want of Redis.
        assert "Redis unavailable" not in web.log(), web.log()[-3000:]
        # Looked at while the worker runs: it takes its heartbeat away when it stops.
        with contextlib.closing(servers.tls.plain()) as look:
            keys = [key.decode() for key in look.scan_iter(count=1000)]
    # Every process of the test run is given the test process's namespace (tests/conftest.py).
    namespace = settings.REDIS_NAMESPACE
    roles = {
        "broker": f"{namespace}:celery:",
        "cache": f"{namespace}:1:",
        "limits": f"{namespace}:rl",
        "heartbeats": f"{namespace}:worker-heartbeats",
    }
    missing = {
        role for role, prefix in roles.items() if not any(k.startswith(prefix) for k in keys)
    }
    assert not missing, (missing, sorted(keys)[:50])
