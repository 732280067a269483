"""Serves uploaded icons at ``/icons/<sha256>.<ext>`` (``mcp_app.services.icons`` stores them).

The URL names the bytes, so an answer never changes: caches may keep it for a year without
asking again. Icons are public, as the lists and server cards that name them are to anyone
who may read those: a client fetches an icon without credentials, and any origin may embed
or read it. The answer is an image and nothing else: its type is the one read from its bytes
at upload, ``nosniff`` stops a browser from guessing another, and the CSP forbids everything
should one render it as a document anyway.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from mcp_app.services.icons import ICON_PATH_PREFIX, icon_for_path

CACHE_CONTROL = "public, max-age=31536000, immutable"
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; sandbox"


@csrf_exempt  # a write is refused with 405 below; nothing here reads cookies
def icon_view(request: HttpRequest, name: str) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    image = icon_for_path(ICON_PATH_PREFIX + name)
    if image is None:
        return HttpResponse(
            b"Not found\n", status=404, content_type="text/plain; charset=utf-8",
            headers={"X-Content-Type-Options": "nosniff"},
        )  # fmt: skip
    etag = f'"{image.sha256}"'
    headers = {
        "Cache-Control": CACHE_CONTROL,
        "ETag": etag,
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "Cross-Origin-Resource-Policy": "cross-origin",
        "Access-Control-Allow-Origin": "*",
    }
    if etag in request.headers.get("If-None-Match", ""):
        return HttpResponse(status=304, headers=headers)
    data = bytes(image.data)
    response = HttpResponse(
        b"" if request.method == "HEAD" else data, content_type=image.mime_type, headers=headers
    )
    response["Content-Length"] = str(len(data))
    return response
