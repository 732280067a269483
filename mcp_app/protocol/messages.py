"""Typed request params, checked before a handler runs (style.md §6).

Each ``parse`` takes the raw ``params`` object of a request (``None`` when absent) and
returns a frozen dataclass, or raises ``InvalidParams`` naming the bad member. The modern
``_meta`` envelope is the ladder's business (``inbound.py``), so ``_meta`` is ignored here;
unknown members are ignored too, as JSON-RPC peers of later revisions may add some.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp_app.protocol.errors import InvalidParams
from mcp_app.protocol.storable import require_storable

T = TypeVar("T")
Params = Mapping[str, Any] | None


_KIND_NAMES: Mapping[type, str] = {str: "a string", dict: "an object"}


def _optional(params: Params, name: str, kind: type[T]) -> T | None:
    value = params.get(name) if params is not None else None
    if value is None:
        return None
    if not isinstance(value, kind):
        raise InvalidParams(f"params.{name} must be {_KIND_NAMES.get(kind, kind.__name__)}")
    return value


def _retry_fields(params: Params) -> tuple[dict[str, Any], str | None]:
    """``inputResponses`` and ``requestState`` of a 2026-07-28 retry (absent: none)."""
    input_responses = _optional(params, "inputResponses", dict)
    return input_responses or {}, _optional(params, "requestState", str)


def _required(params: Params, name: str, kind: type[T]) -> T:
    value = _optional(params, name, kind)
    if value is None:
        raise InvalidParams(f"params.{name} is required")
    return value


@dataclass(frozen=True, slots=True)
class EmptyParams:
    """Params of methods that take none beyond ``_meta`` (``ping``, ``server/discover``)."""

    @classmethod
    def parse(cls, params: Params) -> EmptyParams:
        return cls()


@dataclass(frozen=True, slots=True)
class ListParams:
    cursor: str | None = None

    @classmethod
    def parse(cls, params: Params) -> ListParams:
        return cls(cursor=_optional(params, "cursor", str))


@dataclass(frozen=True, slots=True)
class CallToolParams:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    # A 2026-07-28 retry after input_required: the client's answers and the sealed state.
    input_responses: Mapping[str, Any] = field(default_factory=dict)
    request_state: str | None = None
    # 2025-11-25 task augmentation (`{ttl?}`), kept raw: only a 2025-11-25 session reads it,
    # and other revisions must ignore it whatever it holds (ext-tasks: a v1 hint is tolerated).
    task: Any = None

    @classmethod
    def parse(cls, params: Params) -> CallToolParams:
        name = _required(params, "name", str)
        # Absent (or null) arguments mean "no arguments" (schema: `arguments?`).
        arguments = _optional(params, "arguments", dict)
        input_responses, request_state = _retry_fields(params)
        return cls(
            name=name,
            arguments=arguments if arguments is not None else {},
            input_responses=input_responses,
            request_state=request_state,
            task=params.get("task") if params is not None else None,
        )


@dataclass(frozen=True, slots=True)
class UriParams:
    """Params of ``resources/read``, ``resources/subscribe`` and ``resources/unsubscribe``."""

    uri: str

    @classmethod
    def parse(cls, params: Params) -> UriParams:
        return cls(uri=_required(params, "uri", str))


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InvalidParams(f"{where} must be an object whose values are strings")
    return value


@dataclass(frozen=True, slots=True)
class GetPromptParams:
    name: str
    arguments: Mapping[str, str] = field(default_factory=dict)
    # A 2026-07-28 retry after input_required (missing arguments asked from the user).
    input_responses: Mapping[str, Any] = field(default_factory=dict)
    request_state: str | None = None

    @classmethod
    def parse(cls, params: Params) -> GetPromptParams:
        name = _required(params, "name", str)
        raw = params.get("arguments") if params is not None else None
        input_responses, request_state = _retry_fields(params)
        return cls(
            name=name,
            arguments=_string_map(raw, "params.arguments"),
            input_responses=input_responses,
            request_state=request_state,
        )


@dataclass(frozen=True, slots=True)
class CompleteParams:
    """``completion/complete``: a reference, the argument being typed, earlier arguments."""

    ref_type: str
    ref: str  # the prompt name for ref/prompt, the URI (template) for ref/resource
    argument_name: str
    argument_value: str
    context_arguments: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, params: Params) -> CompleteParams:
        ref = _required(params, "ref", dict)
        argument = _required(params, "argument", dict)
        ref_type = ref.get("type")
        if ref_type == "ref/prompt":
            target = ref.get("name")
        elif ref_type == "ref/resource":
            target = ref.get("uri")
        else:
            raise InvalidParams('params.ref.type must be "ref/prompt" or "ref/resource"')
        if not isinstance(target, str):
            member = "name" if ref_type == "ref/prompt" else "uri"
            raise InvalidParams(f"params.ref.{member} must be a string")
        name, value = argument.get("name"), argument.get("value")
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidParams("params.argument needs string name and value members")
        context = _optional(params, "context", dict) or {}
        return cls(
            ref_type=ref_type,
            ref=target,
            argument_name=name,
            argument_value=value,
            context_arguments=_string_map(context.get("arguments"), "params.context.arguments"),
        )


@dataclass(frozen=True, slots=True)
class SetLevelParams:
    level: str

    @classmethod
    def parse(cls, params: Params) -> SetLevelParams:
        return cls(level=_required(params, "level", str))


@dataclass(frozen=True, slots=True)
class TaskIdParams:
    """``tasks/get``, ``tasks/result`` and ``tasks/cancel`` (both eras)."""

    task_id: str

    @classmethod
    def parse(cls, params: Params) -> TaskIdParams:
        task_id = _required(params, "taskId", str)
        # Looked up in the database, which refuses NUL in a query parameter.
        require_storable(task_id, "params.taskId")
        return cls(task_id=task_id)


@dataclass(frozen=True, slots=True)
class TaskUpdateParams:
    """``tasks/update`` (2026-07-28 tasks extension): answers to a task's input requests."""

    task_id: str
    input_responses: Mapping[str, Any]

    @classmethod
    def parse(cls, params: Params) -> TaskUpdateParams:
        task_id = _required(params, "taskId", str)
        input_responses = _required(params, "inputResponses", dict)
        # The task's row keeps the answers.
        require_storable(task_id, "params.taskId")
        require_storable(input_responses, "params.inputResponses")
        return cls(task_id=task_id, input_responses=input_responses)
