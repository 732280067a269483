"""An upstream MCP server for the mcp_upstream tests: the official SDK's MCPServer under uvicorn.

Run as ``python -m tests.support.mcp_upstream_server PORT [--stateless] [--json]``;
``UPSTREAM_MARKER_DIR`` names a directory where tools leave files the tests read (a
cancellation seen, the headers a call carried). Tools:

* ``echo(text)``: the text; ``add(a, b)``: structured ``{"sum": ...}``
* ``mixed()``: a text, an image and an embedded resource, with structuredContent and _meta
* ``fails()``: an ``isError`` result
* ``progress(steps)``: reports ``steps`` progress values and an info log, then "done"
* ``wait_for_cancel()``: waits (up to 30 s) and writes ``cancelled`` when cancelled
* ``slow(seconds)``: answers "slept" after ``seconds`` (a slow tool on a healthy server)
* ``report()``: "done"; listed with icons, ``_meta`` and ``execution.taskSupport: optional``
* ``ask_name()``: elicits a name from the client and greets it
* ``ask_model(prompt)``: samples the client's model and returns its answer
* ``grow()``: adds the tool ``grown`` and sends ``notifications/tools/list_changed``
* ``die()``: the process exits mid-call
* ``headers()``: the Authorization and X-Api-Key headers it received, as structuredContent
* ``leak()``: echoes the credential it received (Authorization, X-Api-Key, the query) through
  every channel: progress, a log notification, an elicitation and a sampling question, the
  result's text, image, embedded resource, structuredContent and _meta
* ``leak_error()``: a JSON-RPC error whose message echoes the credential
* ``remember(value)``: keeps ``value`` (when not empty) in this MCP session and answers
  ``holds:<what the session holds>``, so tests can tell sessions apart

Resources: ``up://readme`` (markdown text), ``up://pixel.png`` (a PNG, served as a blob).
Resource templates: ``up://notes/{topic}``: "Notes on <topic>".
With ``--extras`` (not listed otherwise, so tests of discovery see the usual offer): resource
template ``up://leak/{part}`` and prompt ``leak_prompt()`` echo the credential too, and
resource template ``up://remembered/{name}`` answers what ``remember`` keeps in the session.
With ``--more-tools`` (the same server after an upgrade): the tool ``added_later()`` too.
With ``--upgraded``: ``echo`` listed with a title, a new description, annotations
(``destructiveHint: false``, ``readOnlyHint: true``) and ``_meta`` (``UPGRADED_ECHO``).
Prompts: ``review(code, language="python")``: one user message naming both.
Completions: ``topic`` of ``up://notes/{topic}`` and ``language`` of ``review``, by prefix.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    Completion,
    EmbeddedResource,
    Icon,
    ImageContent,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
    ToolExecution,
)
from pydantic import BaseModel

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
MARKERS = Path(os.environ.get("UPSTREAM_MARKER_DIR", "."))

server = MCPServer("test-upstream")


@server.tool(description="Returns the text.")
def echo(text: str) -> str:
    return text


@server.tool(description="Adds two integers.")
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@server.tool(description="Every content type at once.")
def mixed() -> CallToolResult:
    return CallToolResult(
        content=[
            TextContent(type="text", text="hello"),
            ImageContent(type="image", data=PNG, mime_type="image/png"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="up://doc", mime_type="text/plain", text="doc"),
            ),
        ],
        structured_content={"ok": True},
        _meta={"upstream": "yes"},
    )


@server.tool(description="Always fails.")
def fails() -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text="it broke")], is_error=True)


@server.tool(description="Reports progress, logs, then answers.")
async def progress(steps: int, ctx: Context) -> str:
    await ctx.info("starting")
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return "done"


@server.tool(description="Reports progress once, then waits until cancelled.")
async def wait_for_cancel(ctx: Context) -> str:
    await ctx.report_progress(1, None, "waiting")
    try:
        await anyio.sleep(30)
    except anyio.get_cancelled_exc_class():
        (MARKERS / "cancelled").write_text("yes")
        raise
    return "not cancelled"


@server.tool(description="Answers after a while.")
async def slow(seconds: float) -> str:
    await anyio.sleep(seconds)
    return "slept"


@server.tool(
    description="Builds a report (may run as a task).",
    icons=[Icon(src="https://example.com/report.png", mime_type="image/png", sizes=["48x48"])],
    meta={"com.example/owner": "reports"},
)
def report() -> str:
    return "done"


# The decorator has no ``execution``: the listing adds report's task support.
_list_tools = server.list_tools
# What --upgraded changes in echo's definition (the same server after an upgrade).
UPGRADED_ECHO = {
    "title": "Echo",
    "description": "Returns the text, unchanged.",
    "annotations": ToolAnnotations(destructive_hint=False, read_only_hint=True),
    "meta": {"com.example/version": "2"},
}
_upgraded = False


async def _list_tools_with_tasks() -> list[Tool]:
    tools = []
    for tool in await _list_tools():
        if tool.name == "report":
            tool = tool.model_copy(update={"execution": ToolExecution(task_support="optional")})
        if tool.name == "echo" and _upgraded:
            tool = tool.model_copy(update=UPGRADED_ECHO)
        tools.append(tool)
    return tools


server.list_tools = _list_tools_with_tasks  # type: ignore[method-assign]


class Name(BaseModel):
    name: str


@server.tool(description="Asks the client for a name (elicitation), then greets it.")
async def ask_name(ctx: Context) -> str:
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action == "accept" and answer.data is not None:
        return f"Hello {answer.data.name}!"
    return f"No name ({answer.action})"


@server.tool(description="Asks the client's model (sampling) and returns its answer.")
async def ask_model(prompt: str, ctx: Context) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sampling is deprecated as of 2026-07-28, not before
        answer = await ctx.request_context.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
            max_tokens=20,
            related_request_id=ctx.request_id,
        )
    return f"model said: {answer.content.text}"


@server.tool(description="Adds a tool named `grown` and tells clients the list changed.")
async def grow(ctx: Context) -> str:
    if "grown" not in {tool.name for tool in await server.list_tools()}:
        server.add_tool(echo, name="grown", description="Grown at run time.")
    await ctx.request_context.session.send_tool_list_changed()
    return "grown"


@server.tool(description="Exits the process mid-call.")
def die() -> str:
    os._exit(3)


@server.tool(description="The credential headers this call carried.")
def headers(ctx: Context) -> dict[str, Any]:
    seen = dict(ctx.headers or {})
    (MARKERS / "headers").write_text(repr(sorted(seen.items())))
    return {"authorization": seen.get("authorization"), "x_api_key": seen.get("x-api-key")}


def _received(ctx: Context) -> str:
    """The credential this request carried, in every place a credential goes."""
    seen = dict(ctx.headers or {})
    url = getattr(ctx.request_context.request, "url", None)
    query = getattr(url, "query", "") or ""
    return (
        f"authorization={seen.get('authorization')} x-api-key={seen.get('x-api-key')} query={query}"
    )


@server.tool(description="Echoes the credential it received through every channel.")
async def leak(ctx: Context) -> CallToolResult:
    seen = _received(ctx)
    await ctx.report_progress(1, 2, f"progress {seen}")
    await ctx.log("info", {"said": f"log {seen}"}, logger_name=f"logger {seen}")
    await ctx.elicit(f"elicit {seen}", Name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sampling is deprecated as of 2026-07-28, not before
        await ctx.request_context.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=f"sample {seen}"))],
            max_tokens=20,
            system_prompt=f"system {seen}",
            related_request_id=ctx.request_id,
        )
    return CallToolResult(
        content=[
            TextContent(type="text", text=f"result {seen}"),
            ImageContent(
                type="image", data=base64.b64encode(seen.encode()).decode(), mime_type="image/png"
            ),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri="up://leaked", mime_type="text/plain", text=f"embedded {seen}"
                ),
            ),
        ],
        structured_content={"seen": seen, seen: "as a key"},
        _meta={"seen": seen},
    )


@server.tool(description="Fails with a JSON-RPC error echoing the credential.")
def leak_error(ctx: Context) -> str:
    raise MCPError(-32001, f"error {_received(ctx)}")


# What each MCP session keeps (remember), by the session id the client sends.
_remembered: dict[str | None, str] = {}


@server.tool(description="Keeps value (unless empty) in this session; answers what it holds.")
def remember(value: str, ctx: Context) -> str:
    session = dict(ctx.headers or {}).get("mcp-session-id")
    if value:
        _remembered[session] = value
    return f"holds:{_remembered.get(session, '')}"


def leak_resource(part: str, ctx: Context) -> str:
    return f"resource {part} {_received(ctx)}"


def leak_prompt(ctx: Context) -> str:
    return f"prompt {_received(ctx)}"


def remembered_resource(name: str, ctx: Context) -> str:
    return f"holds:{_remembered.get(dict(ctx.headers or {}).get('mcp-session-id'), '')}"


def offer_extras() -> None:
    """Serve the extra resource templates and prompt (``--extras``)."""
    server.resource("up://leak/{part}", name="leak", mime_type="text/plain")(leak_resource)
    server.prompt(description="Echoes the credential it received.")(leak_prompt)
    server.resource("up://remembered/{name}", name="remembered", mime_type="text/plain")(
        remembered_resource
    )


def offer_more_tools() -> None:
    """Serve one tool more (``--more-tools``)."""
    server.tool(description="A tool of a later version.")(added_later)


def added_later() -> str:
    return "new"


@server.resource(
    "up://readme", name="readme", description="The upstream's readme.", mime_type="text/markdown"
)
def readme() -> str:
    return "# Upstream readme"


@server.resource("up://pixel.png", name="pixel", mime_type="image/png")
def pixel() -> bytes:
    return base64.b64decode(PNG)


@server.resource("up://notes/{topic}", name="notes", mime_type="text/plain")
def notes(topic: str) -> str:
    return f"Notes on {topic}"


# What completion/complete offers, by (reference, argument): prefix-filtered.
COMPLETIONS = {
    ("up://notes/{topic}", "topic"): ["python", "pytest", "rust"],
    ("review", "language"): ["python", "rust", "ruby"],
}


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion:
    key = getattr(ref, "uri", None) or getattr(ref, "name", None)
    offered = COMPLETIONS.get((key, argument.name), [])
    return Completion(values=[v for v in offered if v.startswith(argument.value)])


@server.prompt(description="Asks for a review of some code.")
def review(code: str, language: str = "python") -> str:
    return f"Review this {language} code: {code}"


@dataclass
class RunningUpstream:
    """A running server: its MCP URL, port, the marker directory, and the process."""

    url: str
    port: int
    markers: Path
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def run_mcp_upstream(
    markers: Path,
    *,
    port: int | None = None,
    stateless: bool = False,
    json: bool = False,
    extras: bool = False,
    more_tools: bool = False,
    upgraded: bool = False,
) -> Iterator[RunningUpstream]:
    """Run this server as a subprocess on 127.0.0.1 until the block ends."""
    from tests.support.live import ROOT, free_port, wait_for_port

    port = port or free_port()
    args = [sys.executable, "-m", "tests.support.mcp_upstream_server", str(port)]
    args += ["--stateless"] * stateless + ["--json"] * json + ["--extras"] * extras
    args += ["--more-tools"] * more_tools + ["--upgraded"] * upgraded
    env = {**os.environ, "UPSTREAM_MARKER_DIR": str(markers)}
    process = subprocess.Popen(args, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        yield RunningUpstream(f"http://127.0.0.1:{port}/mcp", port, markers, process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--extras", action="store_true")
    parser.add_argument("--more-tools", action="store_true")
    parser.add_argument("--upgraded", action="store_true")
    args = parser.parse_args()
    global _upgraded
    _upgraded = args.upgraded
    if args.extras:
        offer_extras()
    if args.more_tools:
        offer_more_tools()
    app = server.streamable_http_app(stateless_http=args.stateless, json_response=args.json)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
