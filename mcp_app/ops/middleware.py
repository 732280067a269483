"""Request ids for Django's pages too (admin, sign-in, OAuth), as the MCP consumer has them.

The same rules as MCP requests (``services/request_ids.py``): the id goes into the log lines
of the request and back in the ``X-Request-Id`` response header.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from inspect import iscoroutinefunction
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

from mcp_app.services.request_ids import bind_request_id

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
