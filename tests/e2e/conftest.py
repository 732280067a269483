"""Fixtures for end-to-end tests: a real Daphne process and the official ``mcp`` SDK client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcp_app.models import (
    Endpoint,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
)
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import (  # noqa: F401  (fixtures)
    flush_database,
    live_server_url,
    uvicorn_server_url,
)

MODES = ["legacy", "2026-07-28"]


def _catalog() -> Endpoint:
    endpoint = make_endpoint(
        "e2e", title="End to end", instructions="Tools for the end-to-end tests."
    )
    tools = [
        make_python_tool("echo", "echo"),
        make_python_tool("add", "add"),
        make_python_tool("current_time", "current_time"),
        make_python_tool("sleep_with_progress", "sleep_with_progress"),
    ]
    greet = Tool(
        name="greet",
        description="Greets someone by name.",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "Hello {{ name }}!", "output": "text"},
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1}},
            "required": ["name"],
        },
    )
    profile = Tool(
        name="profile",
        title="Profile card",
        description="Builds a profile object.",
        kind=Tool.Kind.TEMPLATE,
        config={"template": '{"name": "{{ name }}", "age": {{ age }}}', "output": "json"},
        input_schema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"age": {"type": "integer", "minimum": 0}},
            "properties": {"name": {"type": "string"}, "age": {"$ref": "#/$defs/age"}},
            "required": ["name", "age"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
        },
    )
    for tool in (greet, profile):
        tool.full_clean()
        tool.save()
        tools.append(tool)
    endpoint.tools.add(*tools)

    readme = Resource.objects.create(
        uri="e2e://readme",
        name="readme",
        title="Read me",
        mime_type="text/markdown",
        text="# Hello\n",
    )
    notes = ResourceTemplate.objects.create(
        uri_template="e2e://notes/{topic}",
        name="notes",
        mime_type="text/plain",
        kind=ResourceTemplate.Kind.TEMPLATE,
        config={"template": "Notes about {{ topic }}"},
        completions={"topic": ["django", "channels", "celery"]},
    )
    endpoint.resources.add(readme)
    endpoint.resource_templates.add(notes)

    prompt = Prompt.objects.create(
        name="summarize", title="Summarize", description="Summarize a topic."
    )
    PromptArgument.objects.create(
        prompt=prompt,
        position=0,
        name="topic",
        required=True,
        completion_values="django\ndjango-channels\ncelery",
    )
    PromptArgument.objects.create(prompt=prompt, position=1, name="style", required=False)
    PromptMessage.objects.create(
        prompt=prompt,
        position=0,
        role="user",
        kind="text",
        text="Summarize {topic} in a {style} style.",
    )
    PromptMessage.objects.create(
        prompt=prompt,
        position=1,
        role="assistant",
        kind="text",
        text="Here is a summary of {topic}:",
    )
    endpoint.prompts.add(prompt)
    return endpoint


def _many_tools(count: int) -> Endpoint:
    endpoint = make_endpoint("e2e-many", title="Many tools")
    tools = Tool.objects.bulk_create(
        Tool(
            name=f"tool_{i:04d}",
            description=f"Echo number {i}.",
            kind=Tool.Kind.PYTHON,
            config={"function": "echo"},
            input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
        )
        for i in range(count)
    )
    endpoint.tools.add(*tools)
    return endpoint


@pytest.fixture(scope="module")
def e2e_url(live_server_url: str, django_db_blocker: Any) -> Iterator[str]:  # noqa: F811
    with django_db_blocker.unblock():
        _catalog()
        _many_tools(250)
    yield f"{live_server_url}/mcp/e2e"
    flush_database(django_db_blocker)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param
