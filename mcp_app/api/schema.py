"""The API's OpenAPI schema: built once per process, and drf-spectacular's output completed
(postprocessing hooks, ``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``).

- ``SchemaView`` serves ``/api/schema/`` from one document built on first use under a lock:
  generating it per request cost a second each, and drf-spectacular's generator is not
  thread-safe (concurrent first requests after a start failed with 500s).
- ``any_json_value`` writes nullable JSON fields as ``{}``.
- ``error_responses`` documents the error answers of every operation (the one error body of
  errors.py) and the conditional-request headers (``ETag``, ``If-Match``, ``If-None-Match``).
"""

from __future__ import annotations

import threading
from typing import Any, Final

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.views import SpectacularAPIView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from mcp_app.api.parsers import MAX_DEPTH, check_query

_lock = threading.Lock()
_document: dict[str, Any] | None = None


def schema_document() -> dict[str, Any]:
    """The schema of the API, generated on first use and kept for the process's life."""
    global _document
    with _lock:
        if _document is None:
            # drf-spectacular leaves its generator unannotated.
            generator = SchemaGenerator()  # type: ignore[no-untyped-call]
            _document = generator.get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
        return _document


class SchemaView(SpectacularAPIView):
    """``/api/schema/``: the one document of ``schema_document`` (the API's code does not
    change while the process runs, so neither does its schema)."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        check_query(request.query_params)
        super().initial(request, *args, **kwargs)

    def handle_exception(self, exc: Exception) -> Response:
        # An error is the API's error body, in JSON, not an OpenAPI document's media type.
        response: Response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response

    def _get_schema_response(self, request: Request) -> Response:
        filename = self._get_filename(request, None)  # type: ignore[no-untyped-call]  # unannotated
        return Response(
            data=schema_document(),
            headers={"Content-Disposition": f'inline; filename="{filename}"'},
        )


def any_json_value(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Write a nullable JSON field as ``{}`` (any value), not ``oneOf: [{}, null]``.

    drf-spectacular renders a nullable JSONField as ``oneOf`` of "anything" and null, which
    null matches twice, so a null value would break the schema's own rule (OpenAPI 3.1,
    JSON Schema 2020-12 ``oneOf``: exactly one).
    """
    rewritten: dict[str, Any] = _rewrite(result)
    return rewritten


def _rewrite(node: Any) -> Any:
    if isinstance(node, dict):
        one_of = node.get("oneOf")
        if (
            isinstance(one_of, list)
            and len(one_of) == 2
            and {} in one_of
            and ({"type": "null"} in one_of)
        ):
            rest = {key: value for key, value in node.items() if key != "oneOf"}
            return _rewrite(rest)
        return {key: _rewrite(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_rewrite(item) for item in node]
    return node


ERROR_SCHEMA: Final = {
    "type": "object",
    "description": (
        "Every failure's body (docs/api.md, Errors): `type` names the failure, `errors` the "
        "fields at fault (empty unless the request was invalid)."
    ),
    "properties": {
        "type": {"type": "string", "examples": ["invalid", "not_found", "precondition_failed"]},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": 'Dotted path in the request ("config.url"); "" for all.',
                    },
                    "message": {"type": "string"},
                    "code": {"type": "string"},
                },
                "required": ["path", "message", "code"],
            },
        },
    },
    "required": ["type", "detail", "errors"],
}
ERRORS: Final = {
    "400": f"Invalid: a field, a query parameter, unparsable JSON, a NUL character or an "
    f"unpaired surrogate anywhere, or objects nested deeper than {MAX_DEPTH} levels.",
    "401": "Not authenticated: no or an unknown token.",
    "403": "Permission denied: the token's user lacks the model permission (or the scope).",
    "404": "No such row.",
    "406": "The Accept header names no format this operation answers.",
    "409": "In use: other rows still use this one (errors lists them); nothing was deleted.",
    "412": "Precondition failed: If-Match names an ETag the row no longer has.",
    "413": "The request body is larger than the server accepts (docs/api.md, Limits).",
    "415": "The request body's Content-Type is not one this operation reads.",
    "429": "Throttled: too many requests; Retry-After says when to try again.",
    "502": "The upstream MCP server could not be reached or listed (detail says why).",
}
ETAG_HEADER: Final = {
    "ETag": {
        "description": "A digest of the row's JSON: send it back as If-Match to update or "
        "delete only that version, or as If-None-Match to read only when it changed.",
        "schema": {"type": "string"},
    }
}
IF_MATCH: Final = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": "The ETag of the version this write expects; another one answers 412.",
    "schema": {"type": "string"},
}
IF_NONE_MATCH: Final = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "An ETag of the version the client holds; unchanged answers 304.",
    "schema": {"type": "string"},
}


def error_responses(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Document the answers besides success of every operation, and the ETag headers.

    Which errors an operation can answer follows from what it is: every one checks the
    token, its permission, the query string and the throttle (400, 401, 403, 406, 429); one
    naming a row can miss it, and a list can be given an invalid cursor (404); one with a
    body can be refused for its size or type (413, 415); a delete can be refused while rows
    use the row (409). Views with ETags (``views.ConditionalMixin``) answer them on reads and
    writes, refuse a stale If-Match (412) and answer an unchanged If-None-Match with 304.
    """
    from mcp_app.api.views import ConditionalMixin  # the views import the settings' hooks

    # (path, method) -> the viewset action it runs, for the views that answer ETags.
    conditional = {
        # The schema's paths name the primary key "id" (SCHEMA_COERCE_PATH_PK).
        (path.replace("{pk}", "{id}"), method.lower()): getattr(callback, "actions", {}).get(
            method.lower(), ""
        )
        for path, _regex, method, callback in generator.endpoints
        if issubclass(getattr(callback, "cls", object), ConditionalMixin)
    }
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            codes = ["400", "401", "403", "406", "429"]
            parameters = {parameter.get("name") for parameter in operation.get("parameters", [])}
            if "{" in path or "cursor" in parameters:  # an unknown row, an invalid cursor
                codes.append("404")
            if "requestBody" in operation:
                codes += ["413", "415"]
                _json_bodies(path, operation["requestBody"])
            if method == "delete":
                codes.append("409")
            if (path, method) in conditional:
                _conditional(conditional[path, method], operation, codes)
            responses = operation["responses"]
            for code in sorted(codes):
                responses.setdefault(code, {"$ref": f"#/components/responses/Error{code}"})
    result["components"]["responses"] = {
        f"Error{code}": {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for code, description in ERRORS.items()
    }
    return result


def _json_bodies(path: str, request_body: dict[str, Any]) -> None:
    # Bodies are JSON (docs/api.md); the catalog import also takes its file as multipart.
    # The parsers still read forms (the browsable API's), but clients are not told to send them.
    keep = {"application/json", *(("multipart/form-data",) if path.endswith("/import/") else ())}
    request_body["content"] = {
        media_type: content
        for media_type, content in request_body.get("content", {}).items()
        if media_type in keep
    }


def _conditional(action: str, operation: dict[str, Any], codes: list[str]) -> None:
    responses = operation["responses"]
    parameters = operation.setdefault("parameters", [])
    if action in ("update", "partial_update", "destroy", "revert", "sync_apply"):
        parameters.append(IF_MATCH)
        codes.append("412")
    if action in ("sync", "sync_apply"):
        codes.append("502")  # they list the upstream
    if action == "retrieve":
        parameters.append(IF_NONE_MATCH)
        responses.setdefault("304", {"description": "Not modified: If-None-Match matched."})
    if action in (
        "retrieve", "create", "update", "partial_update", "enable", "disable", "revert",
        "sync_apply",
    ):  # fmt: skip
        for code, response in responses.items():
            if code in ("200", "201"):
                response.setdefault("headers", {}).update(ETAG_HEADER)
