"""One error body for every failure: ``{"type", "detail", "errors": [{"path", "message"}]}``.

``path`` is the dotted field path within the request body (``arguments.0.name``,
``config.url``); ``""`` for the request as a whole. Django ``ValidationError``s raised below
the serializers (model checks, the tool-name guard) become 400s, never 500s.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from mcp_app.api.parsers import PayloadTooLarge
from mcp_app.services.references import RowInUseError


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "Other rows still use it."
    default_code = "conflict"


class InUse(Conflict):
    """A delete refused because rows still use the row: ``errors`` lists each of them."""

    default_code = "in_use"

    def __init__(self, error: RowInUseError) -> None:
        super().__init__(str(error))
        self.references = error.references


class DraftConflictError(Conflict):
    """A draft's publish (or its check) refused because live rows changed where the draft
    changes them too: ``errors`` lists each conflict; nothing was published."""

    default_detail = "Live rows changed since the draft was made; nothing was published."
    default_code = "draft_conflict"

    def __init__(self, conflicts: list[str]) -> None:
        super().__init__()
        self.conflicts = conflicts


class PreconditionFailed(exceptions.APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The resource changed since you read it (If-Match does not match its ETag)."
    default_code = "precondition_failed"


def django_errors(exc: DjangoValidationError) -> dict[str, Any] | list[str]:
    if hasattr(exc, "error_dict"):
        return {
            ("non_field_errors" if name == "__all__" else name): [
                m for e in errs for m in e.messages
            ]
            for name, errs in exc.error_dict.items()
        }
    return list(exc.messages)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    exc = _as_api_exception(exc)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(django_errors(exc))
    elif isinstance(exc, ProtectedError):
        # A PROTECT foreign key refused the delete (services.references should refuse first).
        users = sorted({str(row) for row in exc.protected_objects})[:10]
        exc = Conflict(f"Other rows still use it: {', '.join(users)}.")
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    body: dict[str, Any]
    if isinstance(exc, exceptions.ValidationError):
        body = {
            "type": "invalid",
            "detail": "The request is invalid.",
            "errors": list(_flatten(exc.detail, "")),
        }
    else:
        detail = exc.detail
        body = {
            "type": exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code,
            "detail": str(detail),
            "errors": [],
        }
        if isinstance(exc, InUse):
            # One entry per row that uses it: "tool 'fetch' (config.credential)".
            body["errors"] = [
                {"path": "", "message": str(reference), "code": "in_use"}
                for reference in exc.references
            ]
        elif isinstance(exc, DraftConflictError):
            body["errors"] = [
                {"path": "", "message": message, "code": "conflict"} for message in exc.conflicts
            ]
    response.data = body
    return response


def _flatten(detail: Any, path: str) -> Any:
    if isinstance(detail, dict) and set(detail) == {"message", "code"}:
        # A Django form's error as get_json_data() gives it (the call log's filter form).
        yield {"path": path, "message": str(detail["message"]), "code": str(detail["code"])}
    elif isinstance(detail, dict):
        for key, value in detail.items():
            name = "" if key in ("non_field_errors", "__all__") else str(key)
            yield from _flatten(value, f"{path}.{name}".strip(".") if name else path)
    elif isinstance(detail, list):
        if all(isinstance(item, str) for item in detail):
            for item in detail:
                yield {"path": path, "message": str(item), "code": getattr(item, "code", "invalid")}
        else:
            for index, item in enumerate(detail):
                yield from _flatten(item, f"{path}.{index}".strip("."))
    else:
        yield {"path": path, "message": str(detail), "code": getattr(detail, "code", "invalid")}


def _as_api_exception(exc: Exception) -> Exception:
    """Django's own failures as the API's: every one answers the error body, never HTML.

    DRF turns Http404 and PermissionDenied into responses but leaves their bodies its own
    (``{"detail"}``); a body over Django's size limit and too many form fields are
    ``SuspiciousOperation``s that Django would answer with its HTML 400 page.
    """
    api_exc: Exception = exc
    if isinstance(exc, Http404):
        api_exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        api_exc = exceptions.PermissionDenied(*exc.args)
    elif isinstance(exc, RequestDataTooBig):
        api_exc = PayloadTooLarge()
    elif isinstance(exc, SuspiciousOperation):
        api_exc = exceptions.ParseError(str(exc) or "The request is malformed.")
    return api_exc


# What a request under /api/ that never reached a view gets (mcpsite/urls.py's handlers).
_PAGE_ERRORS = {
    400: ("parse_error", "The request is malformed."),
    403: ("permission_denied", "You do not have permission to perform this action."),
    404: ("not_found", "Not found."),
    500: ("server_error", "The server failed; the failure is logged."),
}


def api_error_response(
    request: HttpRequest, status_code: int, exception: Exception | None = None
) -> HttpResponse:
    """The error body for a failure Django answers itself (an unknown URL under /api/, a body
    too large to read, an uncaught error): the same shape and content type as every other."""
    if isinstance(exception, RequestDataTooBig):
        status_code = PayloadTooLarge.status_code
        error_type, detail = PayloadTooLarge.default_code, str(PayloadTooLarge.default_detail)
    else:
        error_type, detail = _PAGE_ERRORS[status_code]
    return JsonResponse({"type": error_type, "detail": detail, "errors": []}, status=status_code)
