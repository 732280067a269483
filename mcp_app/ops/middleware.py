"""Django middleware of the service's own: request ids, and 503 for a database outage.

Request ids follow the MCP consumer's rules (``services/request_ids.py``): the id goes into
the log lines of the request and back in the ``X-Request-Id`` response header.

A page, an API call or a sign-in that cannot reach PostgreSQL (refused, timed out, or no
pooled connection free within ``DATABASE_POOL_TIMEOUT``) answers 503 with ``Retry-After``,
as the MCP endpoint does, never a 500: it says "come back shortly", not "a bug".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from inspect import iscoroutinefunction
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.utils.decorators import sync_and_async_middleware
from django.utils.deprecation import MiddlewareMixin

from mcp_app.services.request_ids import bind_request_id

logger = logging.getLogger(__name__)

# About how long a PostgreSQL restart or a burst that filled the pool lasts.
RETRY_AFTER_SECONDS = 5
_UNAVAILABLE = "The database is unavailable or busy; retry shortly."

_HEADERS = (("x-request-id", "X-Request-Id"), ("traceparent", "Traceparent"))


def _bind(request: HttpRequest) -> str:
    headers = {name: [request.headers[key]] for name, key in _HEADERS if key in request.headers}
    return bind_request_id(headers)


@sync_and_async_middleware
def request_id_middleware(get_response: Callable[[HttpRequest], Any]) -> Any:
    if iscoroutinefunction(get_response):
        aget_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]] = get_response

        async def amiddleware(request: HttpRequest) -> HttpResponseBase:
            request_id = _bind(request)
            response = await aget_response(request)
            response.headers.setdefault("X-Request-Id", request_id)
            return response

        return amiddleware

    def middleware(request: HttpRequest) -> HttpResponseBase:
        request_id = _bind(request)
        response = get_response(request)
        response.headers.setdefault("X-Request-Id", request_id)
        return response

    return middleware


class DatabaseOutageMiddleware(MiddlewareMixin):
    """Turn a database outage raised by a view into 503 with ``Retry-After``.

    The management API answers its error body (docs/api.md); other pages a short text.
    """

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        # The class only: a psycopg message may carry the server's address.
        logger.warning("Database unavailable: %s", type(exception).__name__)
        response: HttpResponse
        if request.path.startswith("/api/"):
            body = {"type": "unavailable", "detail": _UNAVAILABLE, "errors": []}
            response = JsonResponse(body, status=503)
        else:
            response = HttpResponse(_UNAVAILABLE, status=503, content_type="text/plain")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
