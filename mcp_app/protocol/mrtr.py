"""Sealed ``requestState`` for 2026-07-28 multi-round-trip requests (MRTR).

An ``input_required`` result hands the client an opaque state it must echo on the retry. The
client is not trusted with it (2026-07-28 basic/patterns/mrtr: treat it as attacker-controlled),
so it is sealed: an HMAC-SHA256 over a small JSON payload binding the endpoint, the
principal, the method, a digest of the original request (tool and arguments), an expiry, and
the answers gathered in earlier rounds, or, for a run the server keeps open between rounds
(services/continuations.py), the name of that run instead. ``unseal`` rejects anything
tampered with, expired, or presented for another request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mcp_app.protocol.errors import InvalidParams

VERSION = "v1"
# How long a client may take to answer before the state is refused.
DEFAULT_TTL_SECONDS = 600


@dataclass(frozen=True, slots=True)
class Binding:
    """What a state is valid for: a request must match all of it to be resumed."""

    endpoint: str
    principal: str
    method: str
    request_digest: str


@dataclass(frozen=True, slots=True)
class Unsealed:
    """What a valid state carries: earlier answers, or the run held open for the request."""

    answers: dict[str, Any]
    continuation: str = ""


def request_digest(name: str, arguments: Mapping[str, Any]) -> str:
    """A stable digest of the call a state belongs to (same tool, same arguments)."""
    canonical = orjson.dumps({"name": name, "arguments": arguments}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, body: str) -> str:
    return _b64(hmac.new(secret, f"{VERSION}.{body}".encode(), hashlib.sha256).digest())


def seal(
    *,
    secret: bytes,
    binding: Binding,
    answers: Mapping[str, Any],
    now: float,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    continuation: str = "",
) -> str:
    """Return the sealed state carrying ``answers`` for ``binding``, valid ``ttl_seconds``.

    ``continuation`` names the run the server holds open for this request, if any.
    """
    payload: dict[str, Any] = {
        "e": binding.endpoint,
        "p": binding.principal,
        "m": binding.method,
        "d": binding.request_digest,
        "x": int(now) + ttl_seconds,
        "a": dict(answers),
    }
    if continuation:
        payload["c"] = continuation
    body = _b64(orjson.dumps(payload))
    return f"{VERSION}.{body}.{_mac(secret, body)}"


def unseal(state: str, *, secret: bytes, binding: Binding, now: float) -> dict[str, Any]:
    """Return the answers a valid state carries.

    Raises:
        InvalidParams: as ``unseal_state``.
    """
    return unseal_state(state, secret=secret, binding=binding, now=now).answers


def unseal_state(state: str, *, secret: bytes, binding: Binding, now: float) -> Unsealed:
    """Return what a valid state carries.

    Raises:
        InvalidParams: the state is malformed, tampered with, expired, or belongs to another
            endpoint, principal, method or request.
    """
    parts = state.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        raise InvalidParams("requestState is not a state this server issued")
    _, body, mac = parts
    if not hmac.compare_digest(mac, _mac(secret, body)):
        raise InvalidParams("requestState has been tampered with")
    try:
        payload = orjson.loads(_unb64(body))
    except (ValueError, orjson.JSONDecodeError):
        raise InvalidParams("requestState is not a state this server issued") from None
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("a"), dict)
        or not isinstance(payload.get("c", ""), str)
    ):
        raise InvalidParams("requestState is not a state this server issued")
    if payload.get("x", 0) < now:
        raise InvalidParams("requestState has expired: call the tool again without it")
    issued_for = (payload.get("e"), payload.get("p"), payload.get("m"), payload.get("d"))
    if issued_for != (binding.endpoint, binding.principal, binding.method, binding.request_digest):
        raise InvalidParams("requestState belongs to another request")
    answers: dict[str, Any] = payload["a"]  # checked to be a dict above
    return Unsealed(answers, payload.get("c", ""))
