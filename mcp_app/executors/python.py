"""Kind "python": tools (and resource-template resolvers) backed by registered Python callables.

A function's own input schema is enforced before it runs, whatever schema its tool row
publishes, and an exception of the function's own is a tool error (``isError: true``) naming the
exception, not a protocol error: the function is operator code failing on its input, which the
model can read and correct (2025-11-25 server/tools, "Error Handling").

Functions are declared with ``@mcp_tool_function`` / ``@mcp_resource_function`` in the modules
named by the ``MCP_PYTHON_TOOL_MODULES`` setting (default ``["mcp_app.builtin_tools"]``). Only
functions of listed modules are visible, so the operator decides what code the admin can expose;
a tool row only names a function (``{"function": "echo"}``), never code.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from django import forms
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from mcp_app.executors.base import (
    ConfigError,
    ConfigFormError,
    Executor,
    PreparedConfig,
    setting_list,
)
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.errors import McpError
from mcp_app.protocol.results import (
    CallCancelled,
    ContinueAsTask,
    InputRequired,
    ToolError,
    ToolResult,
)
from mcp_app.protocol.schemas import describe_error, first_error

logger = logging.getLogger(__name__)

DEFAULT_MODULES: tuple[str, ...] = ("mcp_app.builtin_tools",)
# How much of a function's exception message an error result carries.
EXCEPTION_MESSAGE_CHARS = 200
# Raised by the call context or by design: the tools/call handler owns their meaning.
_PASSED_THROUGH = (ToolError, InputRequired, ContinueAsTask, CallCancelled, McpError)

ToolCallable = Callable[[dict[str, Any], ToolCallContext], Any]
# (uri, variables) -> text, bytes, a list of contents dicts, or None for "nothing there".
ResourceCallable = Callable[
    [str, Mapping[str, str]],
    "str | bytes | Sequence[Mapping[str, Any]] | None | Awaitable[Any]",
]


@dataclass(frozen=True)
class ToolFunction:
    """A registered tool function and the defaults the admin prefills from it."""

    name: str
    function: ToolCallable
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    title: str = ""
    annotations: Mapping[str, bool] = field(default_factory=dict)

    @functools.cached_property
    def is_async(self) -> bool:
        # Asked on every call; inspect's answer unwraps partials and checks flags each time.
        return inspect.iscoroutinefunction(self.function)


@dataclass(frozen=True)
class ResourceFunction:
    name: str
    function: ResourceCallable
    description: str = ""


# Registrations by defining module; the settings decide which modules are visible.
_TOOLS_BY_MODULE: dict[str, dict[str, ToolFunction]] = {}
_RESOURCES_BY_MODULE: dict[str, dict[str, ResourceFunction]] = {}


def mcp_tool_function(
    name: str,
    *,
    description: str,
    input_schema: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
    title: str = "",
    annotations: Mapping[str, bool] | None = None,
) -> Callable[[ToolCallable], ToolCallable]:
    """Register ``function(arguments, ctx)`` as the python tool function ``name``.

    The function may be sync (run in a worker thread) or async, and returns text, a dict or
    list (structured content plus its JSON text), a ``ToolResult`` or ``None`` (no content). It
    raises ``ToolError`` for failures the caller should read.
    """

    def register(function: ToolCallable) -> ToolCallable:
        registry = _TOOLS_BY_MODULE.setdefault(function.__module__, {})
        registry[name] = ToolFunction(
            name=name,
            function=function,
            description=description,
            input_schema=input_schema or {"type": "object", "properties": {}},
            output_schema=output_schema,
            title=title,
            annotations=annotations or {},
        )
        return function

    return register


def mcp_resource_function(
    name: str, *, description: str = ""
) -> Callable[[ResourceCallable], ResourceCallable]:
    """Register ``function(uri, variables)`` as a resource-template resolver named ``name``."""

    def register(function: ResourceCallable) -> ResourceCallable:
        registry = _RESOURCES_BY_MODULE.setdefault(function.__module__, {})
        registry[name] = ResourceFunction(name=name, function=function, description=description)
        return function

    return register


def tool_modules() -> list[str]:
    """Return MCP_PYTHON_TOOL_MODULES; from the environment it is a comma-separated string."""
    return setting_list("MCP_PYTHON_TOOL_MODULES", DEFAULT_MODULES)


@functools.lru_cache
def tool_functions() -> dict[str, ToolFunction]:
    """Return the tool functions of the configured modules, by name.

    Raises:
        ImproperlyConfigured: a module cannot be imported, or two modules use one name.
    """
    return _collect(_TOOLS_BY_MODULE, "tool")


@functools.lru_cache
def resource_functions() -> dict[str, ResourceFunction]:
    """Return the resource functions of the configured modules, by name."""
    return _collect(_RESOURCES_BY_MODULE, "resource")


def _collect(by_module: Mapping[str, Mapping[str, Any]], what: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for module in tool_modules():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImproperlyConfigured(
                f"MCP_PYTHON_TOOL_MODULES lists {module!r}, which cannot be imported: {exc}"
            ) from exc
        for name, registration in by_module.get(module, {}).items():
            if name in found:
                raise ImproperlyConfigured(
                    f"Python {what} function {name!r} is registered by both {owner[name]} and "
                    f"{module}."
                )
            found[name] = registration
            owner[name] = module
    return found


@receiver(setting_changed)
def _reset_functions(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_PYTHON_TOOL_MODULES":
        tool_functions.cache_clear()
        resource_functions.cache_clear()


def _exception_summary(exc: Exception) -> str:
    # The first line only: a multi-line message tends to be a dump, not a reason.
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > EXCEPTION_MESSAGE_CHARS:
        text = text[: EXCEPTION_MESSAGE_CHARS - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def result_from_value(value: Any) -> ToolResult:
    """Turn what a tool function returned into a ``ToolResult``.

    Raises:
        TypeError: the value is not text, JSON data, a ToolResult or None.
    """
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult(content=[])
    if isinstance(value, str):
        return ToolResult.text(value)
    if isinstance(value, dict | list):
        # Structured results also carry their JSON as text, for clients that ignore
        # structuredContent (2025-06-18 server/tools "Structured Content").
        text = orjson.dumps(value).decode()
        return ToolResult(content=[{"type": "text", "text": text}], structured=value)
    if isinstance(value, bool | int | float):
        return ToolResult.text(orjson.dumps(value).decode())
    raise TypeError(f"tool function returned {type(value).__name__}, not text or JSON data")


# Model field of each MCP tool annotation hint (2025-03-26 server/tools "Tool annotations").
HINT_FIELDS = {
    "readOnlyHint": "read_only_hint",
    "destructiveHint": "destructive_hint",
    "idempotentHint": "idempotent_hint",
    "openWorldHint": "open_world_hint",
}


def tool_defaults(function_name: str) -> dict[str, Any]:
    """Return Tool field values declared by a registered python tool function.

    Raises:
        KeyError: no function of that name is registered.
    """
    function = tool_functions()[function_name]
    defaults: dict[str, Any] = {
        "title": function.title,
        "description": function.description,
        "input_schema": dict(function.input_schema),
        "output_schema": dict(function.output_schema) if function.output_schema else None,
    }
    for hint, field_name in HINT_FIELDS.items():
        if hint in function.annotations:
            defaults[field_name] = function.annotations[hint]
    return defaults


@dataclass(frozen=True, slots=True)
class PythonConfig(PreparedConfig):
    """``{"function": name}`` with the registration it names looked up."""

    registered: ToolFunction


def _function_choices() -> list[tuple[str, str]]:
    return [("", "---------")] + [
        (name, f"{name}: {function.description}")
        for name, function in sorted(tool_functions().items())
    ]


class FunctionSelect(forms.Select):
    """The function picker: each option's full text in its ``title``, as the stylesheet bounds
    the select's width (a 250-character description made it 1,774 px wide)."""

    def create_option(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(*args, **kwargs)
        option["attrs"]["title"] = str(option["label"])
        return option


class PythonConfigForm(forms.Form):
    # Choices are read on use: the registry follows MCP_PYTHON_TOOL_MODULES.
    function = forms.ChoiceField(
        choices=_function_choices,
        required=False,
        widget=FunctionSelect(attrs={"class": "mcp-function-picker"}),
        help_text=(
            "Python tools: the registered function to run. Leave description and input schema "
            "empty to fill them in from the function."
        ),
    )


class PythonExecutor(Executor[PythonConfig]):
    kind = "python"
    label = "Python function"
    config_form = PythonConfigForm

    def prepare(self, config: Mapping[str, Any]) -> PythonConfig:
        name = config.get("function")
        if not isinstance(name, str) or not name:
            raise ConfigError(
                "A Python tool needs a function: choose one of the registered functions."
            )
        try:
            return PythonConfig(registered=tool_functions()[name])
        except KeyError:
            known = ", ".join(sorted(tool_functions())) or "none"
            raise ConfigError(
                f"No python tool function named {name!r} is registered (available: {known})."
            ) from None

    async def run(
        self, prepared: PythonConfig, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        registered = prepared.registered
        # The row's schema may be looser than the function's (an operator's edit, or a row
        # saved with the no-argument schema): the function's own schema says what it needs.
        error = first_error(registered.input_schema, arguments, ctx.request.schemas)
        if error is not None:
            raise ToolError(f"Invalid arguments: {describe_error(error)}")
        function = registered.function
        # A copy: the function may mutate its arguments without touching the caller's.
        args = dict(arguments)
        try:
            if registered.is_async:
                value = await function(args, ctx)
            else:
                value = await asyncio.to_thread(function, args, ctx)
                if inspect.isawaitable(value):
                    value = await value
        except _PASSED_THROUGH:
            raise
        except Exception as exc:
            # The log keeps the traceback; the caller reads the exception, never the stack.
            logger.warning("Tool function failed", extra={"tool": registered.name}, exc_info=True)
            raise ToolError(f"{registered.name} failed: {_exception_summary(exc)}") from None
        return result_from_value(value)

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"function": config.get("function", "")}

    def config_from_form(
        self, data: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        name = data.get("function")
        if not name:
            raise ConfigFormError({"function": "Choose the python function this tool runs."})
        config = {"function": name}
        try:
            self.prepare(config)
        except ConfigError as exc:
            raise ConfigFormError({"function": exc.message}) from None
        return config

    def tool_defaults(self, config: Mapping[str, Any]) -> Mapping[str, Any]:
        name = config.get("function")
        # An unregistered function declares nothing; prepare() says why the config is wrong.
        return tool_defaults(name) if isinstance(name, str) and name in tool_functions() else {}
