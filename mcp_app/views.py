"""Staff pages outside the admin: the endpoint index and each endpoint's connect page.

The connect page gives ready-to-paste client configurations for one endpoint's public URL.
Views only read rows and render; nothing here writes.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.shortcuts import get_object_or_404, render
from django.templatetags.static import static

from mcp_app.models import Endpoint, Tool

_EXAMPLE_VALUES: dict[str, Any] = {
    "string": "hello",
    "integer": 1,
    "number": 1,
    "boolean": True,
    "array": [],
    "object": {},
}


def favicon(request: HttpRequest) -> HttpResponse:
    """Send /favicon.ico to the icon the pages name (browsers ask for it regardless)."""
    return HttpResponsePermanentRedirect(static("mcp_app/favicon.svg"))


@staff_member_required
def endpoint_index(request: HttpRequest) -> HttpResponse:
    endpoints = Endpoint.objects.order_by("slug")
    context = {"endpoints": endpoints, "nav": "endpoints"}
    return render(request, "mcp_app/endpoint_index.html", context)


@staff_member_required
def endpoint_connect(request: HttpRequest, slug: str) -> HttpResponse:
    endpoint = get_object_or_404(Endpoint, slug=slug)
    url = endpoint.public_url()
    tool = endpoint.tools.filter(enabled=True).order_by("name").first()
    context = {
        "nav": "endpoints",
        "endpoint": endpoint,
        "url": url,
        "tool": tool,
        "configs": client_configs(name=endpoint.slug, url=url, tool=tool),
    }
    return render(request, "mcp_app/endpoint_connect.html", context)


def client_configs(*, name: str, url: str, tool: Tool | None) -> list[dict[str, str]]:
    """Return ``{id, title, lead, code}`` blocks with each client's setup for ``url``."""
    return [
        {
            "id": "inspector",
            "title": "MCP Inspector",
            "lead": (
                'Run this, then choose transport "Streamable HTTP", paste the URL and press '
                "Connect."
            ),
            "code": f"npx @modelcontextprotocol/inspector\n# URL: {url}",
        },
        {
            "id": "claude-code",
            "title": "Claude Code",
            "lead": "Add the server to Claude Code from a terminal:",
            "code": f"claude mcp add --transport http {name} {url}",
        },
        {
            "id": "vscode",
            "title": "VS Code",
            "lead": "Put this in .vscode/mcp.json of your workspace:",
            "code": _json({"servers": {name: {"type": "http", "url": url}}}),
        },
        {
            "id": "cursor",
            "title": "Cursor",
            "lead": "Put this in ~/.cursor/mcp.json (or .cursor/mcp.json of a project):",
            "code": _json({"mcpServers": {name: {"url": url}}}),
        },
        {
            "id": "python",
            "title": "Python SDK",
            "lead": "With the official SDK (pip install mcp):",
            "code": _python_snippet(url, tool),
        },
    ]


def _json(value: Any) -> str:
    return json.dumps(value, indent=2)


def _python_snippet(url: str, tool: Tool | None) -> str:
    if tool is None:
        call = "        tools = await client.list_tools()\n        print(tools)"
    else:
        name = python_literal(tool.name)
        arguments = python_literal(example_arguments(tool.input_schema))
        call = (
            f"        result = await client.call_tool({name}, {arguments})\n        print(result)"
        )
    return (
        "import asyncio\n\n"
        "from mcp import Client\n\n\n"
        "async def main() -> None:\n"
        f"    async with Client({python_literal(url)}) as client:\n"
        f"{call}\n\n\n"
        "asyncio.run(main())"
    )


def python_literal(value: Any) -> str:
    """Render JSON data as Python source, with double-quoted strings as ruff formats them."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = ", ".join(f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items())
        return f"{{{items}}}"
    if isinstance(value, list):
        return f"[{', '.join(python_literal(item) for item in value)}]"
    return repr(value)  # bool, None, int, float are the same in Python source


def example_arguments(schema: Any) -> dict[str, Any]:
    """Return plausible values for the required top-level properties of an input schema."""
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties")
    required = schema.get("required")
    if not isinstance(properties, dict) or not isinstance(required, list):
        return {}
    example: dict[str, Any] = {}
    for name in required:
        spec = properties.get(name)
        if not isinstance(spec, dict):
            continue
        if "default" in spec:
            example[name] = spec["default"]
        elif isinstance(spec.get("enum"), list) and spec["enum"]:
            example[name] = spec["enum"][0]
        else:
            kind = spec.get("type")
            example[name] = _EXAMPLE_VALUES.get(kind if isinstance(kind, str) else "", "value")
    return example
