"""The client address of a Django request: what per-address limits key on.

``REMOTE_ADDR`` is the peer of the TCP connection. Behind a proxy that is the proxy, and the
client is named in ``X-Forwarded-For``, which anyone can send: the header is believed only
when the peer is in ``TRUSTED_PROXIES`` (CIDR networks, none by default). It is read from the
right, each hop added by the proxy before it, and the first address that is not itself a
trusted proxy is the client; everything to its left was written by the client and is
ignored. Every per-address limit (the API throttles, failed API authentications, client
registration) asks here, so a spoofed header never buys a fresh budget.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from functools import lru_cache

from django.conf import settings

# Answers are remembered (``_client_address``) for headers up to this long.
CACHED_FORWARDED_CHARS = 512

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@lru_cache(maxsize=4)
def _networks(spec: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in spec)


def _parse(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _trusted(address: Address, networks: Sequence[Network]) -> bool:
    return any(address in network for network in networks)


def client_address(meta: Mapping[str, str]) -> str:
    """The address of the client behind ``meta`` (a request's ``META``), normalised.

    ``REMOTE_ADDR`` unless it is a trusted proxy, in which case the right-most untrusted
    address of ``X-Forwarded-For``; a hop that is not an address ends the walk at the proxy
    that added it. ``""`` when the server gave no peer address.
    """
    forwarded = meta.get("HTTP_X_FORWARDED_FOR", "")
    resolve = _client_address if len(forwarded) <= CACHED_FORWARDED_CHARS else _resolve
    return resolve(meta.get("REMOTE_ADDR", ""), forwarded, tuple(settings.TRUSTED_PROXIES))


def _resolve(remote: str, forwarded: str, trusted: tuple[str, ...]) -> str:
    peer = _parse(remote)
    if peer is None:
        return remote
    networks = _networks(trusted)
    if not networks or not _trusted(peer, networks):
        return str(peer)
    for hop in reversed(forwarded.split(",") if forwarded else []):
        address = _parse(hop)
        if address is None:
            break
        peer = address
        if not _trusted(peer, networks):
            break
    return str(peer)


# Remembered: a rate-limited call asks on every request, and a client keeps its address.
# Bounded in entries and in their size, so a flood of made-up X-Forwarded-For values only
# turns the cache over.
_client_address = lru_cache(maxsize=1024)(_resolve)
