"""An upstream that echoes its credential never gets it to our clients, the call log or our logs.

The upstream is the official SDK's server (``tests/support/mcp_upstream_server.py``): its
``leak`` tools, resource and prompt echo the Authorization and X-Api-Key headers and the query
they received through every channel MCP has (progress, log notification, elicitation and
sampling questions, result text, image, embedded resource, structuredContent, _meta, a
JSON-RPC error, resource contents, prompt messages). One upstream row per credential kind
(bearer, basic, API key in a header or the query, OAuth client credentials) calls it, through
a live Daphne process whose log output is kept; the SDK client calls in both eras. Then
everything the client saw, the call-log rows, both exports, the audit detail pages and the
server's log are searched for every form of every secret.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from django.contrib.auth.models import Permission, User
from django.db import connections
from django.test import Client as DjangoClient
from django.test import override_settings
from django.urls import reverse
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_app.models import CallLog, Prompt, Resource, Tool, Upstream
from mcp_app.services.credentials import credential_create
from tests.support.catalog import make_endpoint
from tests.support.live import SECRET_KEY, asgi_server, flush_database, free_port, wait_until_idle
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream
from tests.support.upstream import OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, run_upstream

pytestmark = pytest.mark.django_db
BASIC_USER = "mcphost-user"
# Each credential kind's secret; the OAuth access tokens the token server issues are
# "access-<n>-<scope>" (searched for by pattern).
SECRETS = {
    "bearer": "bearer-secret-7f3a9c",
    "basic": "basic-secret-c9d1e5",
    "header": "header-secret-e2a84b",
    "query": "query-secret-f4b61d",
    "oauth": OAUTH_CLIENT_SECRET,
}
ACCESS_TOKEN = re.compile(r"access-\d+-leaky")
KINDS = tuple(SECRETS)
DEAD_PATH = "/internal-mcp-path-5d2c"


def secret_forms() -> list[str]:
    """Every form a secret of ours may take when echoed."""
    basic = base64.b64encode(f"{BASIC_USER}:{SECRETS['basic']}".encode()).decode()
    forms = [*SECRETS.values(), basic]
    # The image block carries the echo base64-encoded.
    return forms + [base64.b64encode(form.encode()).decode()[:12] for form in forms]


def leaks_in(text: str) -> list[str]:
    found = [form for form in secret_forms() if form in text]
    return found + ACCESS_TOKEN.findall(text)


@dataclass
class Web:
    url: str
    log: Path
    dead_port: int


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    with run_mcp_upstream(tmp_path_factory.mktemp("e2e-upstream-secrets"), extras=True) as running:
        yield running


@pytest.fixture(scope="module")
def web(upstream: RunningUpstream, django_db_setup: None, django_db_blocker: Any) -> Iterator[Web]:
    """A Daphne process logging at DEBUG (its output kept), and the rows it serves."""
    dead_port = free_port()
    with run_upstream() as token_server:
        with (
            django_db_blocker.unblock(),
            override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS=""),
        ):
            credentials = {
                "bearer": credential_create(
                    name="leak-bearer", kind="bearer", secret=SECRETS["bearer"]
                ),
                "basic": credential_create(
                    name="leak-basic", kind="basic", secret=SECRETS["basic"], username=BASIC_USER
                ),
                "header": credential_create(
                    name="leak-header",
                    kind="api_key_header",
                    secret=SECRETS["header"],
                    header_name="X-Api-Key",
                ),
                "query": credential_create(
                    name="leak-query",
                    kind="api_key_query",
                    secret=SECRETS["query"],
                    query_param="api_key",
                ),
                "oauth": credential_create(
                    name="leak-oauth",
                    kind="oauth_client_credentials",
                    secret=OAUTH_CLIENT_SECRET,
                    client_id=OAUTH_CLIENT_ID,
                    token_url=token_server.url("/token"),
                    scopes="leaky",
                ),
            }
            endpoint = make_endpoint("e2e-leak")
            for kind, credential in credentials.items():
                up = Upstream.objects.create(
                    name=f"leak-{kind}",
                    url=upstream.url,
                    credential=credential,
                    allow_networks="127.0.0.1/32",
                )
                for remote in ("leak", "leak_error"):
                    tool = Tool(
                        name=f"{remote}_{kind}",
                        description=f"The upstream's {remote}.",
                        kind=Tool.Kind.MCP_UPSTREAM,
                        config={"upstream": up.name, "tool": remote},
                        input_schema={"type": "object"},
                        capture_mode=Tool.Capture.FULL,
                    )
                    tool.full_clean()
                    tool.save()
                    endpoint.tools.add(tool)
                resource = Resource(uri=f"ours://leak/{kind}", name=f"leak-{kind}", upstream=up)
                resource.remote_uri = f"up://leak/{kind}"
                resource.full_clean()
                resource.save()
                endpoint.resources.add(resource)
                prompt = Prompt(name=f"leak_prompt_{kind}", description="Echoes.", upstream=up)
                prompt.remote_name = "leak_prompt"
                prompt.full_clean()
                prompt.save()
                endpoint.prompts.add(prompt)
            # Nothing listens there: the client learns the upstream's name, not where it is.
            dead = Upstream.objects.create(
                name="leak-dead",
                url=f"http://127.0.0.1:{dead_port}{DEAD_PATH}",
                credential=credentials["bearer"],
                allow_networks="127.0.0.1/32",
                connect_timeout=2,
                call_timeout=5,
            )
            tool = Tool(
                name="dead_echo",
                description="An upstream that is not there.",
                kind=Tool.Kind.MCP_UPSTREAM,
                config={"upstream": dead.name, "tool": "echo"},
                input_schema={"type": "object"},
            )
            tool.full_clean()
            tool.save()
            endpoint.tools.add(tool)
        with asgi_server("daphne", {"MCP_LOG_LEVEL": "DEBUG"}) as url:
            port = url.rsplit(":", 1)[1]
            log = Path(tempfile.gettempdir()) / f"mcphost-daphne-{port}.log"
            yield Web(url=url, log=log, dead_port=dead_port)
            wait_until_idle(url)
    flush_database(django_db_blocker)


@dataclass
class Seen:
    """Everything the SDK client was handed, as text."""

    parts: list[str] = field(default_factory=list)

    def add(self, value: Any) -> None:
        dump = getattr(value, "model_dump_json", None)
        self.parts.append(dump(by_alias=True) if dump else json.dumps(value, default=str))

    @property
    def text(self) -> str:
        return "\n".join(self.parts)


async def call_everything(url: str, mode: str, seen: Seen) -> None:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.add([progress, total, message])

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen.add(params)

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.add(params)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        seen.add(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="fine"),
            model="test-model",
            stop_reason="endTurn",
        )

    async with (
        asyncio.timeout(60),
        Client(
            url,
            mode=mode,
            logging_callback=on_log,
            log_level="debug" if mode != "legacy" else None,
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
        ) as client,
    ):
        if mode == "legacy":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated in 2026-07-28, not in this session
                await client.set_logging_level("debug")
        for kind in KINDS:
            result = await client.call_tool(f"leak_{kind}", {}, progress_callback=on_progress)
            assert not result.is_error, result.content
            seen.add(result)
            failed = await client.call_tool(f"leak_error_{kind}", {})
            assert failed.is_error
            seen.add(failed)
            seen.add(await client.read_resource(f"ours://leak/{kind}"))
            seen.add(await client.get_prompt(f"leak_prompt_{kind}", {}))
        try:
            dead = await client.call_tool("dead_echo", {"text": "x"})
        except MCPError as exc:
            dead_text = exc.error.message
        else:
            dead_text = dead.content[0].text
        seen.add(dead_text)
    assert "'leak-dead'" in dead_text and DEAD_PATH not in dead_text


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_no_channel_gets_an_upstream_credential_to_the_client(web, mode):
    seen = Seen()
    await call_everything(f"{web.url}/mcp/e2e-leak", mode, seen)
    text = seen.text
    # The upstream did echo (the redaction mark stands where the secrets were) ...
    for channel in ("progress", "log", "logger", "elicit", "sample", "system", "result"):
        assert f"{channel} authorization=" in text, channel
    assert "embedded authorization=" in text and "error authorization=" in text
    assert "resource bearer authorization=" in text
    assert "prompt authorization=" in text
    assert "[redacted]" in text
    # ... and no form of any secret reached the client.
    assert leaks_in(text) == []
    assert str(web.dead_port) not in text and DEAD_PATH not in text


def call_log_text() -> str:
    rows = list(CallLog.objects.filter(endpoint__slug="e2e-leak").values())
    assert rows
    return json.dumps(rows, default=str)


async def test_the_call_log_exports_audit_pages_and_log_keep_no_secret(web):
    for mode in ("legacy", "2026-07-28"):
        await call_everything(f"{web.url}/mcp/e2e-leak", mode, Seen())
    await asyncio.to_thread(wait_until_idle, web.url)

    def scan() -> None:
        stored = call_log_text()
        # The 2026 input_required results carrying the questions are recorded too.
        assert "elicit authorization=" in stored
        assert leaks_in(stored) == []
        assert str(web.dead_port) not in stored and DEAD_PATH not in stored
        auditor = User.objects.create_user("leak-auditor", is_staff=True)
        auditor.user_permissions.add(
            *Permission.objects.filter(
                codename__in=["audit_calls", "view_call_payloads", "manage_every_team"]
            )
        )
        browser = DjangoClient()
        browser.force_login(auditor)
        for name in ("audit_export_csv", "audit_export_jsonl"):
            response = browser.get(reverse(f"mcp_app:{name}"), {"endpoint": "e2e-leak"})
            assert response.status_code == 200
            exported = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
            assert "authorization=" in exported, name
            assert leaks_in(exported) == [], name
        pks = CallLog.objects.filter(endpoint__slug="e2e-leak").values_list("pk", flat=True)
        for pk in pks:
            page = browser.get(reverse("mcp_app:audit_detail", args=[pk]))
            assert page.status_code == 200
            assert leaks_in(page.content.decode()) == [], pk

    def scan_and_close() -> None:
        try:
            scan()
        finally:
            connections.close_all()  # this thread's own connection

    await asyncio.to_thread(scan_and_close)
    logged = web.log.read_text(errors="replace")
    # The operator's log names where the dead upstream is, without secrets.
    assert DEAD_PATH in logged
    assert leaks_in(logged) == []
