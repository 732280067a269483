"""The SSRF guard: outbound HTTP that only reaches vetted public addresses (or allow-listed ones).

``send`` is the one guarded request of the product: it resolves the host once (through the
context's ``Resolver``), checks every address it resolves to, and connects to a checked
address: the URL is rewritten to the IP while the ``Host`` header and the TLS server name (SNI,
certificate check) stay the hostname, so a DNS answer that changes between the check and the
connection (DNS rebinding) cannot redirect the request, and a refusal names the address that
resolution gave. It follows no redirect. HTTP tools, OpenAPI URL import, credential token
fetches, upstream OAuth discovery and client metadata documents use ``GuardedClient`` (``send``
per hop, redirects followed hop by hop, bodies capped); the upstream relay
(``executors.mcp_upstream``) calls ``send`` on its long-lived session clients, whose pooled
connections it keeps. Every client here shares one TLS context (``tls_context``).

Refused unless allow-listed: loopback, private, link-local, shared (CGNAT), multicast, reserved
and unspecified addresses, and the cloud metadata addresses (``METADATA_ADDRESSES``), which are
let through only by naming that exact address in an allow-list. The operator's allow-list for
every outbound request is ``MCP_HTTP_ALLOWED_NETWORKS`` (``global_policy``); a tool or an
upstream adds its own. Nothing here knows about tool kinds, upstreams or credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import certifi
import httpx

from mcp_app.conf import get_conf
from mcp_app.protocol.results import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# Answers a host name (never a literal IP) and port with its addresses; raises OSError or
# UnicodeError when the name does not resolve.
Resolver = Callable[[str, int], Awaitable[Sequence[IPAddress]]]

# Instance metadata services (AWS, GCP, Azure, OpenStack: 169.254.169.254; AWS IPv6; Alibaba;
# Oracle). Most are link-local or shared space anyway; they are named so that a broad
# allow-listed network (an operator's 169.254.0.0/16, say) never opens them by accident.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(address)
    for address in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "192.0.0.192")
)
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
SCHEMES = ("http", "https")
# Headers that carry credentials; dropped when a redirect leaves the original origin.
_SENSITIVE_HEADERS = ("authorization", "cookie", "proxy-authorization")


# The last sentence of a refusal; a caller that knows better advice replaces it.
ADVICE = "An operator can allow-list the host or network."


class BlockedAddressError(Exception):
    """The request would reach an address the policy refuses; nothing was sent."""


class ResponseTooLargeError(Exception):
    """The response body is longer than the caller's cap; reading stopped there."""


class TooManyRedirectsError(Exception):
    """The redirect chain is longer than the caller's bound."""


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    """Where requests may go besides public addresses.

    ``allow_hosts`` are hostnames or literal IPs (compared case-insensitively) whose every
    address is accepted; ``allow_networks`` accept any address they contain.
    """

    allow_hosts: frozenset[str] = frozenset()
    allow_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def build(cls, hosts: Iterable[str] = (), networks: Iterable[str] = ()) -> NetworkPolicy:
        """Build a policy from strings.

        Raises:
            ValueError: a network is not CIDR notation (``10.1.0.0/16``, ``::1/128``).
        """
        return cls(
            allow_hosts=frozenset(normalise_host(host) for host in hosts if host.strip()),
            allow_networks=tuple(parse_network(network) for network in networks if network),
        )

    def merged(self, other: NetworkPolicy) -> NetworkPolicy:
        return NetworkPolicy(
            allow_hosts=self.allow_hosts | other.allow_hosts,
            allow_networks=self.allow_networks + other.allow_networks,
        )

    def allows(self, host: str, address: IPAddress) -> bool:
        """Return whether ``address`` (which ``host`` resolved to) may be contacted."""
        address = _unmapped(address)
        # A listed host is trusted by name (a listed IP only as the URL's literal host); a
        # different name resolving to the same address is judged by the networks.
        if host in self.allow_hosts:
            return True
        if address in METADATA_ADDRESSES:
            # Only a network naming exactly this address opens a metadata service.
            return any(network.num_addresses == 1 and address in network
                       for network in self.allow_networks)  # fmt: skip
        if any(address in network for network in self.allow_networks):
            return True
        return is_public(address)


def normalise_host(host: str) -> str:
    """Lower-case ``host`` and drop IPv6 brackets and a trailing dot."""
    return host.strip().strip("[]").rstrip(".").lower()


def parse_network(value: str) -> IPNetwork:
    """Parse CIDR notation (a bare address means that one address).

    Raises:
        ValueError: not an address or network; host bits set (``10.0.0.1/8``).
    """
    return ipaddress.ip_network(value.strip(), strict=True)


def is_public(address: IPAddress) -> bool:
    """Return whether ``address`` is globally routable unicast (not metadata, not multicast)."""
    address = _unmapped(address)
    return address.is_global and not address.is_multicast and address not in METADATA_ADDRESSES


def _unmapped(address: IPAddress) -> IPAddress:
    # ::ffff:127.0.0.1 reaches 127.0.0.1: judge the IPv4 address it carries.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def global_policy() -> NetworkPolicy:
    """Return the MCP_HTTP_ALLOWED_NETWORKS allow-list, which every outbound request honours.

    Raises:
        ToolError: the setting holds something that is not a network (the check reports it).
    """
    value = get_conf().MCP_HTTP_ALLOWED_NETWORKS
    networks = value.split(",") if isinstance(value, str) else list(value)
    try:
        return NetworkPolicy.build(networks=[network.strip() for network in networks])
    except ValueError:
        raise ToolError("MCP_HTTP_ALLOWED_NETWORKS is misconfigured.") from None


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """Resolve ``host`` with the system's resolver (getaddrinfo), without blocking the loop."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return _addresses(infos)


# The resolver ``send`` asks, per context (a test answers names itself, ``resolver_used``).
_resolver: contextvars.ContextVar[Resolver] = contextvars.ContextVar(
    "netguard_resolver", default=system_resolver
)


@contextlib.contextmanager
def resolver_used(resolver: Resolver) -> Iterator[None]:
    """Resolve host names with ``resolver`` in this context and the tasks it starts."""
    token = _resolver.set(resolver)
    try:
        yield
    finally:
        _resolver.reset(token)


def _addresses(infos: Iterable[tuple[Any, ...]]) -> list[IPAddress]:
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))


async def resolve_checked(host: str, port: int, policy: NetworkPolicy) -> list[IPAddress]:
    """Resolve ``host`` once and return the addresses to connect to, every one checked.

    A literal IP is checked without any lookup. One refused address refuses the host: a name
    that resolves to a public and a private address could be answered either way later.

    Raises:
        BlockedAddressError: an address is refused, or the name does not resolve.
    """
    name = normalise_host(host)
    literal = _literal(name)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = list(await _resolver.get()(name, port))
        except (OSError, UnicodeError) as exc:
            raise BlockedAddressError(f"The host {name!r} does not resolve.") from exc
        if not addresses:
            raise BlockedAddressError(f"The host {name!r} does not resolve.")
    if refused := _refused(name, addresses, policy, literal=literal is not None):
        raise BlockedAddressError(refused)
    return addresses


def refusal(url: str, policy: NetworkPolicy) -> str | None:
    """Return why ``send`` would refuse a request to ``url`` right now, or None.

    For an operator saving a configuration (a blocking lookup with the system's resolver): the
    message is the one a request would get. A name that does not resolve here is not
    reported, as it may resolve where the requests run.
    """
    name = normalise_host(urlsplit(url).hostname or "")
    if not name:
        return None
    literal = _literal(name)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = _addresses(socket.getaddrinfo(name, None, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError):
            return None
    return _refused(name, addresses, policy, literal=literal is not None)


def _literal(name: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _refused(
    name: str, addresses: Sequence[IPAddress], policy: NetworkPolicy, *, literal: bool
) -> str | None:
    for address in addresses:
        if not policy.allows(name, address):
            shown = name if literal else f"{name!r} ({address})"
            return f"Requests to {shown} are not allowed: it is not a public address. {ADVICE}"
    return None


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One certificate-checking context for every guarded client: each client building its
    own loads the CA bundle again (about 0.7 MiB and 16 ms, docs/performance.md)."""
    return ssl.create_default_context(cafile=certifi.where())


def guarded_client(timeout: httpx.Timeout) -> httpx.AsyncClient:
    """Return a client for ``send``: no redirects followed, the shared TLS context, and no
    environment proxies (a proxy would connect to an address this guard never checked)."""
    return httpx.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=timeout, verify=tls_context()
    )


async def send(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    policy: NetworkPolicy,
    *,
    headers: Mapping[str, str],
    content: bytes | None = None,
) -> httpx.Response:
    """Send one request to a vetted address of ``url``'s host; redirects are not followed.

    ``client`` is a ``guarded_client``. The response is returned unread (streamed): the caller
    reads and closes it, so its connection goes back to ``client``'s pool.

    Raises:
        BlockedAddressError: not http(s), or an address is refused (nothing was sent).
        httpx.HTTPError: connection failures and timeouts.
    """
    if url.scheme not in SCHEMES or not url.host:
        raise BlockedAddressError(
            f"Only http and https URLs are allowed, not {safe_url(str(url))}."
        )
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = await resolve_checked(url.host, port, policy)
    request_headers = {**headers, "Host": url.netloc.decode("ascii")}
    extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
    # Each vetted address in resolver order until one accepts ("localhost" may list ::1
    # first while the server listens on 127.0.0.1 only).
    for position, address in enumerate(addresses, start=1):
        request = client.build_request(
            method,
            url.copy_with(host=str(address)),
            headers=request_headers,
            content=content,
            extensions=extensions,
        )
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError:
            if position == len(addresses):
                raise
    raise AssertionError("resolve_checked returns at least one address")  # pragma: no cover


@dataclass(slots=True)
class FetchedResponse:
    """A finished response: status, headers, the (capped) body, and the URL it came from."""

    status: int
    reason: str
    headers: httpx.Headers
    content: bytes
    url: str
    redirects: int = 0
    history: list[str] = field(default_factory=list)

    @property
    def content_type(self) -> str:
        value: str = self.headers.get("content-type", "")
        return value.split(";", 1)[0].strip().lower()


class GuardedClient:
    """A ``guarded_client`` that follows redirects hop by hop, each hop a ``send``, and caps
    response bodies. Use as an async context manager."""

    def __init__(
        self,
        policy: NetworkPolicy,
        *,
        max_response_bytes: int,
        max_redirects: int = 5,
        timeout: float = 30.0,
    ) -> None:
        self.policy = policy
        self.max_response_bytes = max_response_bytes
        self.max_redirects = max_redirects
        self._client = guarded_client(httpx.Timeout(timeout))

    async def __aenter__(self) -> GuardedClient:
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._client.__aexit__(*exc_info)

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> FetchedResponse:
        """Send a request, following redirects hop by hop with each hop re-checked.

        Raises:
            BlockedAddressError: a hop would reach a refused address (nothing sent there).
            TooManyRedirectsError: more than ``max_redirects`` redirects.
            ResponseTooLargeError: a body exceeds ``max_response_bytes``.
            httpx.HTTPError: connection failures and timeouts.
        """
        history: list[str] = []
        current_headers = dict(headers or {})
        origin = _origin(httpx.URL(url))
        while True:
            response = await self._send_once(method, url, current_headers, content)
            location = response.headers.get("location")
            if response.status not in REDIRECT_STATUSES or not location:
                response.history = history
                response.redirects = len(history)
                return response
            if len(history) >= self.max_redirects:
                raise TooManyRedirectsError(
                    f"More than {self.max_redirects} redirects, last to {safe_url(location)}."
                )
            history.append(url)
            url = urljoin(url, location)
            # 303 always, and 301/302 after a POST as browsers do, turn into a GET without body.
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method, content = ("HEAD" if method == "HEAD" else "GET"), None
                current_headers = {
                    key: value
                    for key, value in current_headers.items()
                    if key.lower() not in ("content-type", "content-length")
                }
            if _origin(httpx.URL(url)) != origin:
                current_headers = {
                    key: value
                    for key, value in current_headers.items()
                    if key.lower() not in _SENSITIVE_HEADERS
                }

    async def _send_once(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> FetchedResponse:
        response = await send(
            self._client, method, httpx.URL(url), self.policy, headers=headers, content=content
        )
        try:
            body = await _read_capped(response, self.max_response_bytes)
        finally:
            await response.aclose()
        return FetchedResponse(
            status=response.status_code,
            reason=response.reason_phrase,
            headers=response.headers,
            content=body,
            url=url,
        )


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ResponseTooLargeError(f"The response is larger than the limit of {limit} bytes.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ResponseTooLargeError(f"The response is larger than the limit of {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


def safe_url(url: str) -> str:
    """Return ``url`` without query, fragment or user info (a query may hold an API key)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "an invalid URL"
    return str(parsed.copy_with(query=None, fragment=None, username=None, password=None))
