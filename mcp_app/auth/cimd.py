"""Client ID Metadata Documents: fetch a client's metadata through our SSRF guard.

DOT resolves a URL-shaped ``client_id`` by calling ``CIMD_METADATA_FETCHER().fetch(client_id)``
and caches the resulting Application until the document's max-age has passed. This fetcher
goes through ``executors.netguard`` like every other outbound request of the product: https
only, public addresses only (checked and pinned, so DNS rebinding cannot redirect it), no
redirects, a size cap and a timeout. Failures raise DOT's ``CIMDError`` and the client is then
simply unknown.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
from asgiref.sync import async_to_sync
from oauth2_provider.cimd import CIMDError
from oauth2_provider.settings import oauth2_settings

from mcp_app.executors import netguard

_MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)", re.IGNORECASE)


def check_client_id_url(client_id: str) -> None:
    """The shape the CIMD draft requires of a client id URL (section 3).

    Raises:
        CIMDError: not https, no host or path, user info, a fragment, or dot segments.
    """
    try:
        parts = urlsplit(client_id)
        _port = parts.port
    except ValueError as exc:
        raise CIMDError("client_id is not a valid URL") from exc
    if parts.scheme != "https" or not parts.hostname:
        raise CIMDError("client_id must be an https URL with a host")
    if parts.username or parts.password or parts.fragment:
        raise CIMDError("client_id must not carry user info or a fragment")
    if parts.path in ("", "/") or any(seg in (".", "..") for seg in parts.path.split("/")):
        raise CIMDError("client_id needs a path without dot segments")


def max_age(cache_control: str) -> int:
    """Seconds to trust a document, from its Cache-Control, within DOT's configured bounds."""
    floor = int(oauth2_settings.CIMD_METADATA_MIN_AGE_SECONDS)
    ceiling = int(oauth2_settings.CIMD_METADATA_MAX_AGE_SECONDS)
    lowered = cache_control.lower()
    if "no-store" in lowered or "no-cache" in lowered:
        return floor
    match = _MAX_AGE.search(cache_control)
    age = int(match.group(1)) if match else ceiling
    return max(floor, min(age, ceiling))


class GuardedMetadataFetcher:
    """``CIMD_METADATA_FETCHER``: ``fetch(client_id) -> (metadata, max_age_seconds)``."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        check_client_id_url(client_id)
        return async_to_sync(self._fetch)(client_id)

    async def _fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        client = netguard.GuardedClient(
            netguard.NetworkPolicy(),
            max_response_bytes=int(oauth2_settings.CIMD_MAX_DOCUMENT_SIZE),
            max_redirects=0,
            timeout=float(oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS),
        )
        try:
            async with client:
                response = await client.request(
                    "GET", client_id, headers={"Accept": "application/json"}
                )
        except (
            netguard.BlockedAddressError,
            netguard.ResponseTooLargeError,
            netguard.TooManyRedirectsError,
            httpx.HTTPError,
        ) as exc:
            raise CIMDError(f"could not fetch the client metadata document: {exc}") from exc
        metadata = parse_document(response.status, response.content_type, response.content)
        return metadata, max_age(response.headers.get("cache-control", ""))


def parse_document(status: int, content_type: str, body: bytes) -> dict[str, Any]:
    """The metadata object of a fetched document.

    Raises:
        CIMDError: not a 200, not JSON, or not a JSON object.
    """
    if status != 200:
        raise CIMDError(f"the client metadata document answered HTTP {status}")
    if content_type != "application/json" and not (
        content_type.startswith("application/") and content_type.endswith("+json")
    ):
        raise CIMDError("the client metadata document is not JSON")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CIMDError("the client metadata document is not valid JSON") from exc
    if not isinstance(data, dict):
        raise CIMDError("the client metadata document must be a JSON object")
    return data
