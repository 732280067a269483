"""The soak's client fleet: asyncio clients mixing both eras, with every exchange counted.

Each client loops until the end of the run: it picks an operation by weight, runs it, thinks
0.5-1.5 s. Every HTTP exchange is recorded (kind, when it was sent, when its status line
arrived or it failed, the status), so bench/soak.py can tell what happened inside and outside
the outage windows and compare the answered exchanges with the call log's rows. Deliberate
cancellations happen only after a status line arrived, so each cancelled request is counted.

Management traffic (issue #25) runs in the same loop against the same web processes: API
reads, conditional API writes, admin pages with a signed-in staff session and catalog imports.
Each of its exchanges names the statuses it expects (``EXPECTED``); it writes no call-log rows
(it never uses try-it), so only the MCP exchanges are compared with the call log.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import random
import re
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.faults.wire import MODERN_META, modern_headers, session_headers, tool_call
from tests.support.raw_mcp import JSON_HEADERS, sse_messages

REQUEST_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# A background call may wait out a lost job's start timeout (bench/soak.py) before its answer.
BACKGROUND_TIMEOUT = httpx.Timeout(90.0, connect=10.0)
THINK_SECONDS = (0.5, 1.5)
RAMP_SECONDS = 10.0
# Bounds a whole operation (a session makes several requests, each with its own timeout).
OPERATION_LIMIT_SECONDS = 150.0
CANCEL_SHARE = 0.3
DELETE_SHARE = 0.5

# Real catalog imports among imports; the others are dry runs.
REAL_IMPORT_SHARE = 0.1

# Operation -> weight. Background calls are few: the worker runs 8 at a time.
MCP_WEIGHTS = {
    "2026 tools/call echo": 40,
    "2026 tools/list": 15,
    "2025-11-25 session (calls, GET stream dropped, DELETE sometimes)": 25,
    "2026 background countdown (30 % cancelled by closing)": 2,
    "2025-11-25 background countdown (30 % notifications/cancelled)": 2,
}
MANAGEMENT_WEIGHTS = {
    "API reads (tools?enabled=true, endpoints, a tool with If-None-Match)": 5,
    "API conditional write (GET a tool, PATCH its description with If-Match)": 3,
    "API prompt created, then deleted with If-Match": 2,
    "admin pages (tool changelist, a tool's change page, /audit/)": 3,
    f"catalog import ({REAL_IMPORT_SHARE:.0%} real, the others dry runs)": 1,
}
WEIGHTS = {**MCP_WEIGHTS, **MANAGEMENT_WEIGHTS}

# Management exchange -> the statuses it may answer besides a 5xx (which the 5xx criterion
# judges, inside the outage windows or not). Anything else is a failure of its own criterion.
EXPECTED = {
    "API GET tools?enabled=true": {200},
    "API GET endpoints": {200},
    "API GET tool (If-None-Match)": {200, 304},
    "API GET tool (for If-Match)": {200},
    # Another client's PATCH or import may change the row between the GET and the PATCH.
    "API PATCH tool (If-Match)": {200, 412},
    "API POST prompt": {201},
    "API DELETE prompt (If-Match)": {204},
    "admin tool changelist": {200},
    "admin tool change page": {200},
    "admin /audit/": {200},
    "API catalog import (dry run)": {200},
    "API catalog import": {200},
}


@dataclass
class Management:
    """What the management operations use, set up by bench/soak.py before the load."""

    bases: list[str]  # the web processes' base URLs
    users: list[tuple[str, str, str]]  # staff superusers: (username, password, API key)
    tool_ids: list[int]  # the tools the writes and imports edit
    # Filled by Fleet.prime(): a session cookie per user, the endpoint's export.
    cookies: list[str] = field(default_factory=list)
    document: dict[str, Any] = field(default_factory=dict)


@dataclass
class Exchange:
    kind: str
    sent: float
    ended: float
    status: int | None = None
    error: str = ""
    broken: bool = False  # the body failed after the status line
    broken_at: float = 0.0
    surface: str = "mcp"  # "mcp", "api" or "admin"
    target: str = ""  # host:port of the web process


@dataclass
class Counts:
    exchanges: list[Exchange] = field(default_factory=list)
    rpc_errors: list[tuple[float, int]] = field(default_factory=list)
    tool_errors: list[tuple[float, str]] = field(default_factory=list)
    background_sent: int = 0
    background_cancelled: int = 0
    background_counted: int = 0
    get_streams: int = 0
    abandoned: int = 0
    operation_timeouts: int = 0
    harness_errors: list[str] = field(default_factory=list)


class Failed(Exception):
    """An exchange the operation cannot go on after (already counted)."""


class Fleet:
    def __init__(
        self, urls: list[str], *, clients: int, management: Management | None = None
    ) -> None:
        self.urls = urls
        self.clients = clients
        self.management = management
        self.counts = Counts()
        self.rng = random.Random(13)
        weights = WEIGHTS if management is not None else MCP_WEIGHTS
        self._ops = list(weights)
        self._weights = list(weights.values())
        self._client: httpx.AsyncClient | None = None
        # The last ETag each tool was seen with, for conditional reads.
        self._etags: dict[int, str] = {}

    # Exchanges.

    @contextlib.asynccontextmanager
    async def exchange(
        self,
        kind: str,
        method: str,
        url: str,
        headers: dict[str, str],
        body: Any = None,
        timeout: httpx.Timeout = REQUEST_TIMEOUT,
        surface: str = "mcp",
    ) -> AsyncIterator[httpx.Response]:
        """Send a request; yield its response once the status line arrived; record it all."""
        assert self._client is not None
        record = Exchange(
            kind, time.time(), 0.0, surface=surface, target=httpx.URL(url).netloc.decode()
        )
        self.counts.exchanges.append(record)
        request = self._client.build_request(
            method, url, headers=headers, json=body, timeout=timeout
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            record.ended, record.error = time.time(), f"{type(exc).__name__}: {exc}"[:200]
            raise Failed from exc
        record.ended, record.status = time.time(), response.status_code
        try:
            yield response
        except httpx.HTTPError as exc:
            record.broken, record.broken_at = True, time.time()
            record.error = f"{type(exc).__name__}: {exc}"[:200]
            raise Failed from exc
        finally:
            await response.aclose()

    def _note(self, message: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        if "error" in message:
            self.counts.rpc_errors.append((now, message["error"].get("code")))
        elif message.get("result", {}).get("isError"):
            text = message["result"].get("content", [{}])[0].get("text", "")
            self.counts.tool_errors.append((now, text[:100]))
        return message

    async def final(self, response: httpx.Response) -> dict[str, Any] | None:
        """The JSON-RPC response of a POST (JSON or SSE); None if the stream ended without one."""
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            async for message in sse_messages(response):
                if "id" in message and "method" not in message:
                    return self._note(message)
            return None
        body = await response.aread()
        try:
            return self._note(json.loads(body))
        except ValueError:
            return None

    async def post(
        self, kind: str, url: str, headers: dict[str, str], body: Any
    ) -> tuple[int, dict[str, Any] | None, httpx.Headers]:
        async with self.exchange(kind, "POST", url, headers, body) as response:
            message = await self.final(response) if response.status_code != 202 else None
            return response.status_code, message, response.headers

    # Operations.

    def url(self) -> str:
        return self.rng.choice(self.urls)

    async def modern_echo(self, n: int, url: str | None = None) -> None:
        await self.post(
            "2026 tools/call",
            url or self.url(),
            modern_headers("tools/call", "echo"),
            tool_call(n, "echo", {"message": f"soak {n}"}, **MODERN_META),
        )

    async def modern_list(self, n: int) -> None:
        body = {"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": {"_meta": MODERN_META}}
        await self.post("2026 tools/list", self.url(), modern_headers("tools/list"), body)

    async def open_session(self, url: str, n: int) -> str | None:
        body = {
            "jsonrpc": "2.0",
            "id": n,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "soak", "version": "1"},
            },
        }
        status, _, headers = await self.post("2025 initialize", url, JSON_HEADERS, body)
        session_id = headers.get("mcp-session-id")
        if status != 200 or not session_id:
            return None
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.post("2025 notification", url, session_headers(session_id), initialized)
        return session_id

    async def delete(self, url: str, session_id: str) -> None:
        async with self.exchange(
            "2025 DELETE", "DELETE", url, session_headers(session_id)
        ) as response:
            await response.aread()

    async def legacy_session(self, n: int) -> None:
        session_id = await self.open_session(self.url(), n)
        if session_id is None:
            return
        for k in range(self.rng.randint(1, 3)):
            # Sessions are rows: any web process serves them.
            await self.post(
                "2025 tools/call",
                self.url(),
                session_headers(session_id),
                tool_call(n * 10 + k, "echo", {"message": f"soak {n}"}),
            )
        if self.rng.random() < 0.5:
            body = {"jsonrpc": "2.0", "id": n * 10 + 5, "method": "tools/list", "params": {}}
            await self.post("2025 tools/list", self.url(), session_headers(session_id), body)
        if self.rng.random() < 0.5:
            headers = {**session_headers(session_id), "accept": "text/event-stream"}
            async with self.exchange("2025 GET stream", "GET", self.url(), headers) as stream:
                self.counts.get_streams += 1
                # Held a while, then dropped; it may also end by itself (Redis restart).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.rng.uniform(0.5, 5.0)):
                        async for _ in stream.aiter_raw():
                            pass
        if self.rng.random() < DELETE_SHARE:
            await self.delete(self.url(), session_id)

    async def modern_countdown(self, n: int) -> None:
        seconds = self.rng.randint(1, 3)
        cancel = self.rng.random() < CANCEL_SHARE
        self.counts.background_sent += 1
        body = tool_call(n, "countdown", {"seconds": seconds}, progressToken=f"p{n}", **MODERN_META)
        headers = modern_headers("tools/call", "countdown")
        async with self.exchange(
            "2026 countdown", "POST", self.url(), headers, body, BACKGROUND_TIMEOUT
        ) as response:
            if cancel:
                # 2026: closing the stream is the cancellation.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.cancel_after(seconds)):
                        self._counted(await self.final(response), seconds)
                        return
                self.counts.background_cancelled += 1
                return
            self._counted(await self.final(response), seconds)

    async def legacy_countdown(self, n: int) -> None:
        url = self.url()
        session_id = await self.open_session(url, n)
        if session_id is None:
            return
        seconds = self.rng.randint(1, 3)
        cancel = self.rng.random() < CANCEL_SHARE
        self.counts.background_sent += 1
        body = tool_call(n, "countdown", {"seconds": seconds}, progressToken=f"p{n}")
        headers = session_headers(session_id)
        async with self.exchange(
            "2025 countdown", "POST", url, headers, body, BACKGROUND_TIMEOUT
        ) as response:
            if cancel:
                await self._cancel_legacy(response, n, seconds, headers)
            else:
                self._counted(await self.final(response), seconds)
        if self.rng.random() < DELETE_SHARE:
            await self.delete(self.url(), session_id)

    async def _cancel_legacy(
        self, response: httpx.Response, n: int, seconds: int, headers: dict[str, str]
    ) -> None:
        # One reader for the whole stream (an SSE stream cannot be read twice): it goes on
        # while the cancellation is sent, and the stream then ends without a response.
        reader = asyncio.create_task(self.final(response))
        try:
            done, _ = await asyncio.wait({reader}, timeout=self.cancel_after(seconds))
            if not done:
                note = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": n, "reason": "soak"},
                }
                await self.post("2025 notification", self.url(), headers, note)
            message = await reader
            if message is None:
                self.counts.background_cancelled += 1
            self._counted(message, seconds)
        finally:
            reader.cancel()

    def cancel_after(self, seconds: int) -> float:
        """When to cancel, from the status line (sent with the first progress, after ~1 s)."""
        return self.rng.uniform(0.0, max(0.2, seconds - 1.2))

    def _counted(self, message: dict[str, Any] | None, seconds: int) -> None:
        if message and message.get("result", {}).get("structuredContent") == {"counted": seconds}:
            self.counts.background_counted += 1

    # Management operations (issue #25).

    def _user(self, n: int) -> tuple[Management, str, int]:
        """The setup, a web process's base URL and the user index of client number ``n``."""
        assert self.management is not None
        m = self.management
        return m, self.rng.choice(m.bases), (n // 1_000_000) % len(m.users)

    def _api_headers(self, n: int) -> tuple[Management, str, dict[str, str]]:
        m, base, user = self._user(n)
        return (
            m,
            base,
            {"authorization": f"Bearer {m.users[user][2]}", "accept": "application/json"},
        )

    async def _read(
        self, kind: str, method: str, url: str, headers: dict[str, str], body: Any = None
    ) -> tuple[int, httpx.Headers, bytes]:
        surface = "admin" if kind.startswith("admin") else "api"
        async with self.exchange(kind, method, url, headers, body, surface=surface) as response:
            content = await response.aread()
            return response.status_code, response.headers, content

    async def api_reads(self, n: int) -> None:
        m, base, headers = self._api_headers(n)
        await self._read(
            "API GET tools?enabled=true", "GET", f"{base}/api/v1/tools/?enabled=true", headers
        )
        await self._read("API GET endpoints", "GET", f"{base}/api/v1/endpoints/", headers)
        tool_id = self.rng.choice(m.tool_ids)
        conditional = dict(headers)
        if tool_id in self._etags:
            conditional["if-none-match"] = self._etags[tool_id]
        url = f"{base}/api/v1/tools/{tool_id}/"
        status, response_headers, _ = await self._read(
            "API GET tool (If-None-Match)", "GET", url, conditional
        )
        if status in (200, 304) and response_headers.get("etag"):
            self._etags[tool_id] = response_headers["etag"]

    async def api_write(self, n: int) -> None:
        m, base, headers = self._api_headers(n)
        url = f"{base}/api/v1/tools/{self.rng.choice(m.tool_ids)}/"
        status, response_headers, _ = await self._read(
            "API GET tool (for If-Match)", "GET", url, headers
        )
        etag = response_headers.get("etag")
        if status != 200 or not etag:
            return
        await self._read(
            "API PATCH tool (If-Match)",
            "PATCH",
            url,
            {**headers, "if-match": etag},
            {"description": f"Edited by the soak's client {n // 1_000_000} ({n})."},
        )

    async def api_prompt(self, n: int) -> None:
        _, base, headers = self._api_headers(n)
        body = {
            "name": f"soak-prompt-{n}",
            "description": "A throwaway prompt of the soak.",
            "messages": [{"role": "user", "kind": "text", "text": "Hello from the soak."}],
        }
        status, response_headers, content = await self._read(
            "API POST prompt", "POST", f"{base}/api/v1/prompts/", headers, body
        )
        if status != 201:
            return
        prompt_id = json.loads(content)["id"]
        await self._read(
            "API DELETE prompt (If-Match)",
            "DELETE",
            f"{self._user(n)[1]}/api/v1/prompts/{prompt_id}/",
            {**headers, "if-match": response_headers.get("etag", "")},
        )

    async def admin_pages(self, n: int) -> None:
        m, base, user = self._user(n)
        headers = {"cookie": m.cookies[user], "accept": "text/html"}
        await self._read("admin tool changelist", "GET", f"{base}/admin/mcp_app/tool/", headers)
        tool_id = self.rng.choice(m.tool_ids)
        await self._read(
            "admin tool change page", "GET", f"{base}/admin/mcp_app/tool/{tool_id}/change/", headers
        )
        await self._read("admin /audit/", "GET", f"{base}/audit/", headers)

    async def catalog_import(self, n: int) -> None:
        m, base, headers = self._api_headers(n)
        real = self.rng.random() < REAL_IMPORT_SHARE
        document = copy.deepcopy(m.document)
        tools = [t for t in document["tools"] if t["name"].startswith("managed")]
        tool = self.rng.choice(tools)
        tool["description"] = f"Imported by the soak's client {n // 1_000_000} ({n})."
        document["tools"] = [tool]
        kind = "API catalog import" if real else "API catalog import (dry run)"
        body = {"document": document, "prune": False, "dry_run": not real}
        await self._read(kind, "POST", f"{base}/api/v1/catalog/import/", headers, body)

    async def _sign_in(self, base: str, username: str, password: str) -> str:
        """Sign in through the admin's login form; the Cookie header of the session."""
        async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT) as http:
            page = await http.get(f"{base}/admin/login/?next=/admin/")
            page.raise_for_status()
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            if token is None:
                raise RuntimeError("no CSRF token on the admin's login page")
            fields = {
                "csrfmiddlewaretoken": token.group(1),
                "username": username,
                "password": password,
                "next": "/admin/",
            }
            done = await http.post(f"{base}/admin/login/?next=/admin/", data=fields)
            if done.status_code != 302 or "sessionid" not in http.cookies:
                raise RuntimeError(f"admin sign-in of {username} failed: HTTP {done.status_code}")
            return "; ".join(f"{name}={value}" for name, value in http.cookies.items())

    async def _prime_management(self) -> None:
        assert self.management is not None
        m = self.management
        m.cookies = [await self._sign_in(m.bases[0], u, p) for u, p, _ in m.users]
        headers = {"authorization": f"Bearer {m.users[0][2]}"}
        async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT) as http:
            for base in m.bases:
                # One request of each surface per web process, so each loaded its views first.
                for path in ("/api/v1/tools/", "/admin/mcp_app/tool/"):
                    cookie = {"cookie": m.cookies[0]} if path.startswith("/admin") else headers
                    response = await http.get(f"{base}{path}", headers=cookie)
                    response.raise_for_status()
            endpoints = await http.get(f"{m.bases[0]}/api/v1/endpoints/", headers=headers)
            endpoint_id = endpoints.json()["results"][0]["id"]
            export = await http.get(
                f"{m.bases[0]}/api/v1/endpoints/{endpoint_id}/export/?format=json", headers=headers
            )
            export.raise_for_status()
            m.document = export.json()

    # The run.

    async def _client_loop(self, number: int, deadline: float) -> None:
        operations = {
            "2026 tools/call echo": self.modern_echo,
            "2026 tools/list": self.modern_list,
            "2025-11-25 session (calls, GET stream dropped, DELETE sometimes)": self.legacy_session,
            "2026 background countdown (30 % cancelled by closing)": self.modern_countdown,
            "2025-11-25 background countdown (30 % notifications/cancelled)": self.legacy_countdown,
        }
        operations.update(
            zip(
                MANAGEMENT_WEIGHTS,
                (
                    self.api_reads,
                    self.api_write,
                    self.api_prompt,
                    self.admin_pages,
                    self.catalog_import,
                ),
                strict=True,
            )
        )
        await asyncio.sleep(self.rng.uniform(0, RAMP_SECONDS))
        n = number * 1_000_000
        while time.time() < deadline:
            n += 100
            operation = self.rng.choices(self._ops, self._weights)[0]
            try:
                async with asyncio.timeout(OPERATION_LIMIT_SECONDS):
                    await operations[operation](n)
            except Failed:
                pass
            except TimeoutError:
                self.counts.operation_timeouts += 1
            except Exception as exc:  # noqa: BLE001 - a fleet bug must not end the client
                self.counts.harness_errors.append(f"{operation}: {type(exc).__name__}: {exc}"[:200])
            await asyncio.sleep(self.rng.uniform(*THINK_SECONDS))

    async def prime(self) -> None:
        """One request of each era per web process, so each loaded its endpoint first."""
        async with self._session():
            for url in self.urls:
                await self.modern_echo(1, url)
                await self.open_session(url, 2)
            self.counts = Counts()
        if self.management is not None:
            await self._prime_management()

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[None]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=self.clients * 2)
        async with httpx.AsyncClient(limits=limits) as client:
            self._client = client
            try:
                yield
            finally:
                self._client = None

    async def run(self, seconds: float, *, stop_seconds: float) -> None:
        deadline = time.time() + seconds
        async with self._session():
            tasks = [
                asyncio.create_task(self._client_loop(i, deadline)) for i in range(self.clients)
            ]
            # Operations running at the deadline finish (their own timeouts bound them).
            _, pending = await asyncio.wait(tasks, timeout=seconds + stop_seconds)
            for task in pending:
                task.cancel()
            self.counts.abandoned = len(pending)
            await asyncio.gather(*pending, return_exceptions=True)

    # Figures.

    def figures(self, windows: list[tuple[float, float]], t0: float) -> dict[str, Any]:
        def inside(start: float, end: float) -> bool:
            return any(start <= w_end and end >= w_start for w_start, w_end in windows)

        def at(t: float) -> bool:
            return inside(t, t)

        every = self.counts.exchanges
        # The call-log figures are the MCP exchanges'; the 5xx and failure figures every one's.
        ex = [e for e in every if e.surface == "mcp"]
        answered = [e for e in ex if e.status is not None]
        # An exchange abandoned at the end has no end time: it counts as unanswered.
        failed = [e for e in every if e.status is None and e.ended]
        abandoned = [e for e in ex if e.status is None and not e.ended]
        fives = [e for e in every if e.status is not None and e.status >= 500]
        fives_out = [e for e in fives if not inside(e.sent, e.ended)]
        failed_out = [e for e in failed if not inside(e.sent, e.ended)]
        broken = [e for e in every if e.status is not None and e.broken]
        broken_out = [e for e in broken if not inside(e.sent, e.broken_at)]
        samples = [
            f"t={e.sent - t0:.1f}-{(e.ended or e.sent) - t0:.1f} {e.kind} ({e.target}): "
            + (f"HTTP {e.status}" if e.status and not e.broken else e.error)
            for e in sorted(fives_out + failed_out + broken_out, key=lambda e: e.sent)[:8]
        ]
        fives_in_ids = {id(e) for e in fives} - {id(e) for e in fives_out}
        fives_out_ids = {id(e) for e in fives_out}
        management: dict[str, dict[str, Any]] = {}
        unexpected_samples: list[str] = []
        for kind, expected in EXPECTED.items():
            of_kind = [e for e in every if e.kind == kind]
            unexpected = [
                e
                for e in of_kind
                if e.status is not None and e.status < 500 and e.status not in expected
            ]
            management[kind] = {
                "surface": "admin" if kind.startswith("admin") else "api",
                "expected": sorted(expected),
                "sent": len(of_kind),
                "by_status": dict(sorted(Counter(e.status for e in of_kind if e.status).items())),
                "5xx_inside": sum(1 for e in of_kind if id(e) in fives_in_ids),
                "5xx_outside": sum(1 for e in of_kind if id(e) in fives_out_ids),
                "no_status": sum(1 for e in of_kind if e.status is None),
                "unexpected": len(unexpected),
            }
            unexpected_samples += [
                f"t={e.sent - t0:.1f} {kind}: HTTP {e.status}" for e in unexpected[:3]
            ]
        tool_out = [text for t, text in self.counts.tool_errors if not at(t)]
        return {
            "weights": WEIGHTS,
            "sent": len(ex),
            "answered": len(answered),
            "sent_all": len(every),
            "answered_all": sum(1 for e in every if e.status is not None),
            "sent_by_surface": dict(Counter(e.surface for e in every)),
            "management": management,
            "unexpected": sum(m["unexpected"] for m in management.values()),
            "unexpected_samples": unexpected_samples[:8],
            "by_status": dict(Counter(e.status for e in answered)),
            "by_kind": dict(Counter(e.kind for e in ex)),
            "5xx_inside": len(fives) - len(fives_out),
            "5xx_outside": len(fives_out),
            "errors_inside": len(failed) - len(failed_out),
            "errors_outside": len(failed_out),
            "broken_inside": len(broken) - len(broken_out),
            "broken_outside": len(broken_out),
            "rpc_errors_inside": sum(1 for t, _ in self.counts.rpc_errors if at(t)),
            "rpc_errors_outside": sum(1 for t, _ in self.counts.rpc_errors if not at(t)),
            "rpc_error_codes": dict(Counter(code for _, code in self.counts.rpc_errors)),
            "tool_errors_inside": len(self.counts.tool_errors) - len(tool_out),
            "tool_errors_outside": len(tool_out),
            "tool_error_samples": Counter(text for _, text in self.counts.tool_errors).most_common(
                5
            ),
            "background_sent": self.counts.background_sent,
            "background_cancelled": self.counts.background_cancelled,
            "background_counted": self.counts.background_counted,
            "get_streams": self.counts.get_streams,
            "abandoned": self.counts.abandoned,
            "abandoned_exchanges": len(abandoned),
            "mcp_failed": sum(1 for e in failed if e.surface == "mcp"),
            "operation_timeouts": self.counts.operation_timeouts,
            "harness_errors": len(self.counts.harness_errors),
            "harness_error_samples": Counter(self.counts.harness_errors).most_common(3),
            "error_samples": samples,
        }
