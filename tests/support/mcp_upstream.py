"""What e2e tests of upstream MCP servers set up alike: the test upstream's process, its
Upstream row on loopback, and our tools that relay to it.

A test module makes its ``upstream`` fixture with ``upstream_process`` and builds its catalog
with ``upstream_row`` and ``upstream_tool`` (the rows an operator would create in the admin).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mcp_app.models import Tool, Upstream
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream

LOOPBACK = "127.0.0.1/32"


def upstream_process(tmp_path_factory: Any, name: str, **options: Any) -> Iterator[RunningUpstream]:
    """Run the test upstream (``run_mcp_upstream`` ``options``) with markers in a fresh
    directory named after ``name``; the body of a module's ``upstream`` fixture."""
    with run_mcp_upstream(tmp_path_factory.mktemp(name), **options) as running:
        yield running


def upstream_row(name: str, url: str, **fields: Any) -> Upstream:
    """An Upstream at ``url`` that may be reached on loopback (``fields`` set the rest)."""
    fields.setdefault("allow_networks", LOOPBACK)
    upstream = Upstream(name=name, url=url, **fields)
    upstream.full_clean()
    upstream.save()
    return upstream


def upstream_tool(name: str, upstream: str, remote: str) -> Tool:
    """Our tool ``name``, relaying to the tool ``remote`` of the upstream named ``upstream``."""
    tool = Tool(
        name=name,
        description=f"The upstream's {remote}.",
        kind=Tool.Kind.MCP_UPSTREAM,
        config={"upstream": upstream, "tool": remote},
        input_schema={"type": "object"},
    )
    tool.full_clean()
    tool.save()
    return tool
