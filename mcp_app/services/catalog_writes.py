"""Catalog writes: creating endpoints, tools, resources, templates and prompts, and the rule
that a tool name is unique per endpoint."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from mcp_app.executors import get_executors
from mcp_app.executors.python import tool_defaults
from mcp_app.models import (
    Endpoint,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
)


def check_unique_tool_names(
    *, endpoint_ids: Iterable[int], tools: Sequence[tuple[int | None, str]]
) -> None:
    """Check that ``tools`` can join ``endpoint_ids`` without two tools sharing a name.

    ``tools`` are ``(pk or None for an unsaved tool, name)`` pairs being attached (or renamed);
    the endpoints' other tools are looked up in one query. A name must be unique per endpoint
    (2025-11-25 server/tools "Tool names"), so ``tools/call`` always knows which row to run.

    Raises:
        ValidationError: the messages name each clash.
    """
    counts: dict[str, int] = {}
    for _pk, name in tools:
        counts[name] = counts.get(name, 0) + 1
    problems = [
        f"Two of the selected tools are named {name!r}."
        for name, count in sorted(counts.items())
        if count > 1
    ]
    ids = sorted(set(endpoint_ids))
    if ids and tools:
        clashes = (
            Endpoint.tools.through.objects.filter(
                endpoint_id__in=ids, tool__name__in={name for _pk, name in tools}
            )
            .exclude(tool_id__in=[pk for pk, _name in tools if pk is not None])
            .values_list("endpoint__slug", "tool__name")
            .order_by("endpoint__slug", "tool__name")
            .distinct()
        )
        problems.extend(
            f"Endpoint {slug!r} already has another tool named {name!r}." for slug, name in clashes
        )
    if problems:
        raise ValidationError(problems)


def check_tools_attachable(*, endpoint_id: int, tool_ids: Iterable[int]) -> None:
    """Check that the tools ``tool_ids`` can be added to endpoint ``endpoint_id``.

    Raises:
        ValidationError: a name would appear twice on the endpoint.
    """
    tools = list(Tool.objects.filter(pk__in=list(tool_ids)).values_list("pk", "name"))
    check_unique_tool_names(endpoint_ids=[endpoint_id], tools=tools)


def tool_field_defaults(kind: str, config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Tool field values a config declares (a python function's description, schemas, hints).

    The kind's executor decides; an unknown kind declares nothing (validation says why).
    """
    executor = get_executors().get(kind)
    return executor.tool_defaults(config) if executor is not None else {}


def python_tool_defaults(function_name: str) -> dict[str, Any]:
    """Return Tool field values declared by a registered python tool function.

    Raises:
        KeyError: no function of that name is registered.
    """
    return tool_defaults(function_name)


@transaction.atomic
def endpoint_create(
    *, slug: str, title: str = "", description: str = "", instructions: str = "",
    allowed_origins: str = "", auth_mode: str = Endpoint.AuthMode.OAUTH,
) -> Endpoint:  # fmt: skip
    """Create an endpoint after full validation (OAuth-protected unless ``auth_mode`` says).

    Raises:
        ValidationError: a field is invalid (e.g. the slug is taken).
    """
    endpoint = Endpoint(
        slug=slug,
        title=title,
        description=description,
        instructions=instructions,
        allowed_origins=allowed_origins,
        auth_mode=auth_mode,
    )
    endpoint.full_clean()
    endpoint.save()
    return endpoint


@transaction.atomic
def tool_create(
    *, name: str, kind: str, config: Mapping[str, Any], endpoints: Iterable[Endpoint] = (),
    **fields: Any,
) -> Tool:  # fmt: skip
    """Create a tool and publish it on ``endpoints``.

    A tool takes what its config declares (a python function's description, schemas and
    hints) unless given in ``fields``.

    Raises:
        ValidationError: a field is invalid, or the name is taken on one of the endpoints.
    """
    values: dict[str, Any] = {**tool_field_defaults(kind, config), **fields}
    tool = Tool(name=name, kind=kind, config=dict(config), **values)
    tool.full_clean()
    tool.save()
    tool.endpoints.add(*endpoints)
    return tool


@transaction.atomic
def resource_create(
    *, uri: str, name: str, endpoints: Iterable[Endpoint] = (), **fields: Any
) -> Resource:
    """Create a resource and publish it on ``endpoints``.

    Raises:
        ValidationError: a field is invalid (e.g. the URI is taken).
    """
    resource = Resource(uri=uri, name=name, **fields)
    resource.full_clean()
    resource.save()
    resource.endpoints.add(*endpoints)
    return resource


@transaction.atomic
def resource_template_create(
    *, uri_template: str, name: str, kind: str, config: Mapping[str, Any],
    endpoints: Iterable[Endpoint] = (), **fields: Any,
) -> ResourceTemplate:  # fmt: skip
    """Create a resource template and publish it on ``endpoints``.

    Raises:
        ValidationError: a field is invalid.
    """
    template = ResourceTemplate(
        uri_template=uri_template, name=name, kind=kind, config=dict(config), **fields
    )
    template.full_clean()
    template.save()
    template.endpoints.add(*endpoints)
    return template


@transaction.atomic
def prompt_create(
    *, name: str, description: str, arguments: Sequence[Mapping[str, Any]] = (),
    messages: Sequence[Mapping[str, Any]] = (), endpoints: Iterable[Endpoint] = (),
    **fields: Any,
) -> Prompt:  # fmt: skip
    """Create a prompt with its ordered arguments and messages, published on ``endpoints``.

    ``arguments`` and ``messages`` hold PromptArgument / PromptMessage field values; their
    order becomes ``position``.

    Raises:
        ValidationError: a field is invalid.
    """
    prompt = Prompt(name=name, description=description, **fields)
    prompt.full_clean()
    prompt.save()
    for position, values in enumerate(arguments):
        argument = PromptArgument(prompt=prompt, position=position, **values)
        argument.full_clean()
        argument.save()
    for position, values in enumerate(messages):
        message = PromptMessage(prompt=prompt, position=position, **values)
        message.full_clean()
        message.save()
    prompt.endpoints.add(*endpoints)
    return prompt
