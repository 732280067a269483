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
* ``ask_fresh(tag, rounds)``: asks ``rounds`` names, each question with a fresh id in it (as
  the everything server's ``trigger-url-elicitation`` does), reports progress after each
  answer, and answers with them; each run adds a line to ``runs-<tag>``, and a cancelled run
  writes ``cancelled-<tag>``
* ``grow()``: adds the tool ``grown`` and sends ``notifications/tools/list_changed``
* ``die()``: the process exits mid-call
* ``headers()``: the Authorization and X-Api-Key headers it received, as structuredContent
* ``peer()``: the address and port the call's HTTP request came from (connection reuse)
* ``leak()``: echoes the credential it received (Authorization, X-Api-Key, the query) through
  every channel: progress, a log notification, an elicitation and a sampling question, the
  result's text, image, embedded resource, structuredContent and _meta
* ``leak_error()``: a JSON-RPC error whose message echoes the credential
* ``remember(value)``: keeps ``value`` (when not empty) in this MCP session and answers
  ``holds:<what the session holds>``, so tests can tell sessions apart
* ``ask_unrelated()``: sends a ping and a sampling request on the session's own stream
  (GET), related to no call, and writes what each got back to ``unrelated`` (JSON: "answered",
  "error <code>: <message>" or "no answer" after 5 s)
* ``tick()``: the resource ``up://ticker`` changed: tells every session subscribed to it
  (``--subscriptions``) on its own stream, and answers how many it told

Resources: ``up://readme`` (markdown text), ``up://pixel.png`` (a PNG, served as a blob).
Resource templates: ``up://notes/{topic}``: "Notes on <topic>".
With ``--extras`` (not listed otherwise, so tests of discovery see the usual offer): resource
template ``up://leak/{part}`` and prompt ``leak_prompt()`` echo the credential too, and
resource template ``up://remembered/{name}`` answers what ``remember`` keeps in the session.
With ``--more-tools`` (the same server after an upgrade): the tool ``added_later()`` too.
With ``--subscriptions``: the resource ``up://ticker`` ("tick <n>"), which clients may
subscribe to; each subscribe and unsubscribe is appended to ``subscriptions`` as
"<method> <uri>".
With ``--announce``: every session is told its tool list changed, five times a second for
ten seconds after it is initialized (on its own stream, so those sent before it is open are
lost), as an upstream restarted with other tools would.
With ``--upgraded``: ``echo`` listed with a title, a new description, annotations
(``destructiveHint: false``, ``readOnlyHint: true``) and ``_meta`` (``UPGRADED_ECHO``).
Prompts: ``review(code, language="python")``: one user message naming both.
Completions: ``topic`` of ``up://notes/{topic}`` and ``language`` of ``review``, by prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    Completion,
    EmbeddedResource,
    EmptyResult,
    Icon,
    ImageContent,
    NotificationParams,
    SamplingMessage,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
    ToolExecution,
    UnsubscribeRequestParams,
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


@server.tool(description="Asks names, each question new (a fresh id); counts its runs.")
async def ask_fresh(tag: str, rounds: int, ctx: Context) -> str:
    with (MARKERS / f"runs-{tag}").open("a") as runs:
        runs.write("run\n")
    names = []
    try:
        for number in range(1, rounds + 1):
            answer = await ctx.elicit(f"Name {number}, question {uuid.uuid4().hex}?", Name)
            accepted = answer.action == "accept" and answer.data is not None
            names.append(answer.data.name if accepted and answer.data else answer.action)
            await ctx.report_progress(number, rounds, f"answer {number}")
    except anyio.get_cancelled_exc_class():
        (MARKERS / f"cancelled-{tag}").write_text("yes")
        raise
    return "answers: " + ", ".join(names)


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


@server.tool(description="The address and port this call's HTTP request came from.")
def peer(ctx: Context) -> str:
    client = getattr(ctx.request_context.request, "client", None)
    return f"{client.host}:{client.port}" if client is not None else "unknown"


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


@server.tool(description="Pings and samples the client on the session's own stream.")
async def ask_unrelated(ctx: Context) -> str:
    session = ctx.request_context.session
    seen: dict[str, str] = {}
    for name, ask in (
        ("ping", session.send_ping),
        ("sampling", lambda: _sample_unrelated(session)),
    ):
        try:
            with anyio.fail_after(5):
                await ask()
            seen[name] = "answered"
        except MCPError as exc:
            seen[name] = f"error {exc.error.code}: {exc.error.message}"
        except TimeoutError:
            seen[name] = "no answer"
    (MARKERS / "unrelated").write_text(json.dumps(seen))
    return "asked"


async def _sample_unrelated(session: ServerSession) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sampling is deprecated as of 2026-07-28, not before
        await session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text="unrelated"))],
            max_tokens=20,
        )


TICKER = "up://ticker"
# The sessions subscribed to the ticker, by MCP session id, and how often it ticked.
_ticker_subscribers: dict[str | None, ServerSession] = {}
_ticks = [0]


@server.tool(description="Changes up://ticker and tells its subscribers.")
async def tick() -> int:
    _ticks[0] += 1
    told = 0
    for session_id, session in list(_ticker_subscribers.items()):
        try:
            await session.send_resource_updated(TICKER)
            told += 1
        except Exception:  # noqa: BLE001  (a session gone: it hears no more)
            _ticker_subscribers.pop(session_id, None)
    return told


def ticker() -> str:
    return f"tick {_ticks[0]}"


def _record_subscription(line: str) -> None:
    with (MARKERS / "subscriptions").open("a") as marker:
        marker.write(line + "\n")


async def on_subscribe(
    ctx: ServerRequestContext[Any], params: SubscribeRequestParams
) -> EmptyResult:
    _record_subscription(f"subscribe {params.uri}")
    if params.uri == TICKER:
        _ticker_subscribers[_session_id(ctx)] = ctx.session
    return EmptyResult()


async def on_unsubscribe(
    ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams
) -> EmptyResult:
    _record_subscription(f"unsubscribe {params.uri}")
    if params.uri == TICKER:
        _ticker_subscribers.pop(_session_id(ctx), None)
    return EmptyResult()


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    request = ctx.request
    return request.headers.get("mcp-session-id") if request is not None else None


def offer_subscriptions() -> None:
    """Serve ``up://ticker`` and resource subscriptions (``--subscriptions``)."""
    server.resource(TICKER, name="ticker", mime_type="text/plain")(ticker)
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)


_announcing: set[asyncio.Task[None]] = set()


async def on_initialized(ctx: ServerRequestContext[Any], params: NotificationParams) -> None:
    task = asyncio.get_running_loop().create_task(_announce(ctx.session))
    _announcing.add(task)
    task.add_done_callback(_announcing.discard)


async def _announce(session: ServerSession) -> None:
    for _ in range(50):
        with contextlib.suppress(Exception):  # no stream of its own yet: this one is lost
            await session.send_tool_list_changed()
        await asyncio.sleep(0.2)


def offer_announcements() -> None:
    """Tell every session its tools changed, shortly after it opens (``--announce``)."""
    server._lowlevel_server.add_notification_handler(
        "notifications/initialized", NotificationParams, on_initialized
    )


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
    subscriptions: bool = False,
    announce: bool = False,
    upgraded: bool = False,
) -> Iterator[RunningUpstream]:
    """Run this server as a subprocess on 127.0.0.1 until the block ends."""
    from tests.support.live import ROOT, free_port, wait_for_port

    port = port or free_port()
    args = [sys.executable, "-m", "tests.support.mcp_upstream_server", str(port)]
    args += ["--stateless"] * stateless + ["--json"] * json + ["--extras"] * extras
    args += ["--more-tools"] * more_tools + ["--subscriptions"] * subscriptions
    args += ["--announce"] * announce + ["--upgraded"] * upgraded
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
    parser.add_argument("--subscriptions", action="store_true")
    parser.add_argument("--announce", action="store_true")
    parser.add_argument("--upgraded", action="store_true")
    args = parser.parse_args()
    global _upgraded
    _upgraded = args.upgraded
    if args.extras:
        offer_extras()
    if args.more_tools:
        offer_more_tools()
    if args.subscriptions:
        offer_subscriptions()
    if args.announce:
        offer_announcements()
    app = server.streamable_http_app(stateless_http=args.stateless, json_response=args.json)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
