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
        "callback_port": CALLBACK_PORT,
        "configs": client_configs(
            name=endpoint.slug, url=url, tool=tool, oauth=endpoint.auth_mode == "oauth"
        ),
    }
    return render(request, "mcp_app/endpoint_connect.html", context)


# The MCP Inspector the connect page names: the version the conformance runs use
# (conformance/runner.py), pinned because older ones rewrite the endpoint's path (a 404).
INSPECTOR_VERSION = "2.12.0"


def client_configs(
    *, name: str, url: str, tool: Tool | None, oauth: bool = False
) -> list[dict[str, str]]:
    """Return ``{id, title, lead, code}`` blocks with each client's setup for ``url``."""
    return [
        {
            "id": "inspector",
            "title": "MCP Inspector",
            "lead": (
                'Run this, then choose transport "Streamable HTTP", paste the URL and press '
                "Connect."
            ),
            "code": f"npx @modelcontextprotocol/inspector@{INSPECTOR_VERSION}\n# URL: {url}",
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
            "lead": (
                "With the official SDK (pip install mcp): signs in through the browser, "
                "complete as shown."
                if oauth
                else "With the official SDK (pip install mcp):"
            ),
            "code": _python_snippet(url, tool, oauth=oauth),
        },
        {
            "id": "typescript",
            "title": "TypeScript SDK",
            "lead": (
                "With the official SDK (npm install @modelcontextprotocol/sdk): signs in "
                "through the browser, complete as shown."
                if oauth
                else "With the official SDK (npm install @modelcontextprotocol/sdk):"
            ),
            "code": _typescript_snippet(url, tool, oauth=oauth),
        },
    ]


def _json(value: Any) -> str:
    return json.dumps(value, indent=2)


# Where the examples' one-shot callback server listens for the browser's redirect.
CALLBACK_PORT = 33418
CALLBACK_URL = f"http://127.0.0.1:{CALLBACK_PORT}/callback"

_PYTHON_OAUTH = """\
import asyncio
import webbrowser
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

URL = {url}
REDIRECT_URI = "{callback}"


class MemoryStorage:
    \"\"\"The client's registration and tokens, kept for this run only.\"\"\"

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class BrowserSignIn:
    \"\"\"Opens the sign-in page, then serves one request on REDIRECT_URI.\"\"\"

    def __init__(self) -> None:
        self.query: dict[str, list[str]] = {{}}
        self.server: HTTPServer | None = None

    async def open(self, authorization_url: str) -> None:
        query = self.query

        class Callback(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query.update(parse_qs(urlsplit(self.path).query))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"Signed in; you can close this tab.")

        # Listening before the browser opens, so the redirect always finds it.
        self.server = HTTPServer(("127.0.0.1", {port}), Callback)
        print("Sign in at", authorization_url)
        webbrowser.open(authorization_url)

    async def wait(self) -> AuthorizationCodeResult:
        assert self.server is not None
        with self.server:
            await asyncio.to_thread(self.server.handle_request)
        first = {{key: values[0] for key, values in self.query.items()}}
        return AuthorizationCodeResult(
            code=first["code"], state=first.get("state"), iss=first.get("iss")
        )


async def main() -> None:
    sign_in = BrowserSignIn()
    auth = OAuthClientProvider(
        server_url=URL,
        client_metadata=OAuthClientMetadata(
            client_name="My MCP script",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(),
        redirect_handler=sign_in.open,
        callback_handler=sign_in.wait,
    )
    async with (
        httpx2.AsyncClient(auth=auth) as http,
        Client(streamable_http_client(URL, http_client=http)) as client,
    ):
{call}


asyncio.run(main())"""

_TYPESCRIPT = """\
// npm install @modelcontextprotocol/sdk; save as connect.mts (an ES module, for the
// top-level await) and run with: npx tsx connect.mts
import {{ Client }} from "@modelcontextprotocol/sdk/client/index.js";
import {{
  StreamableHTTPClientTransport,
}} from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const client = new Client({{ name: "my-mcp-script", version: "1.0.0" }});
await client.connect(new StreamableHTTPClientTransport(new URL({url})));
{call}
await client.close();"""

_TYPESCRIPT_OAUTH = """\
// npm install @modelcontextprotocol/sdk; save as connect.mts (an ES module, for the
// top-level await) and run with: npx tsx connect.mts
import {{ createServer }} from "node:http";
import {{ Client }} from "@modelcontextprotocol/sdk/client/index.js";
import {{
  StreamableHTTPClientTransport,
}} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {{
  UnauthorizedError,
  type OAuthClientProvider,
}} from "@modelcontextprotocol/sdk/client/auth.js";
import type {{
  OAuthClientInformationFull,
  OAuthClientMetadata,
  OAuthTokens,
}} from "@modelcontextprotocol/sdk/shared/auth.js";

const url = new URL({url});
const redirectUrl = "{callback}";

// Keeps the registration and tokens for this run only; prints the sign-in link and
// waits for the browser to come back to redirectUrl with the code.
class ConsoleSignIn implements OAuthClientProvider {{
  code?: Promise<string>;
  private info?: OAuthClientInformationFull;
  private saved?: OAuthTokens;
  private verifier = "";

  get redirectUrl() {{ return redirectUrl; }}
  get clientMetadata(): OAuthClientMetadata {{
    return {{
      client_name: "My MCP script",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    }};
  }}
  clientInformation() {{ return this.info; }}
  saveClientInformation(info: OAuthClientInformationFull) {{ this.info = info; }}
  tokens() {{ return this.saved; }}
  saveTokens(tokens: OAuthTokens) {{ this.saved = tokens; }}
  saveCodeVerifier(verifier: string) {{ this.verifier = verifier; }}
  codeVerifier() {{ return this.verifier; }}
  redirectToAuthorization(authorizationUrl: URL) {{
    this.code = new Promise((resolve) => {{
      const server = createServer((request, response) => {{
        const code = new URL(request.url ?? "/", redirectUrl).searchParams.get("code");
        response.end("Signed in; you can close this tab.");
        if (code) {{ server.close(); resolve(code); }}
      }}).listen({port}, "127.0.0.1");
    }});
    console.log("Sign in at", authorizationUrl.href);
  }}
}}

const signIn = new ConsoleSignIn();
const client = new Client({{ name: "my-mcp-script", version: "1.0.0" }});
try {{
  await client.connect(new StreamableHTTPClientTransport(url, {{ authProvider: signIn }}));
}} catch (error) {{
  if (!(error instanceof UnauthorizedError) || !signIn.code) throw error;
  const transport = new StreamableHTTPClientTransport(url, {{ authProvider: signIn }});
  await transport.finishAuth(await signIn.code);
  await client.connect(transport);
}}
{call}
await client.close();"""


def _python_snippet(url: str, tool: Tool | None, *, oauth: bool) -> str:
    if tool is None:
        call = "        tools = await client.list_tools()\n        print(tools)"
    else:
        name = python_literal(tool.name)
        arguments = python_literal(example_arguments(tool.input_schema))
        call = (
            f"        result = await client.call_tool({name}, {arguments})\n        print(result)"
        )
    if oauth:
        # An OAuth endpoint answers 401 until the client signs in: the SDK does it through an
        # OAuthClientProvider, which needs somewhere to keep tokens and a way to the browser.
        return _PYTHON_OAUTH.format(
            url=python_literal(url), callback=CALLBACK_URL, port=CALLBACK_PORT, call=call
        )
    return (
        "import asyncio\n\n"
        "from mcp import Client\n\n\n"
        "async def main() -> None:\n"
        f"    async with Client({python_literal(url)}) as client:\n"
        f"{call}\n\n\n"
        "asyncio.run(main())"
    )


def _typescript_snippet(url: str, tool: Tool | None, *, oauth: bool) -> str:
    if tool is None:
        call = "console.log(await client.listTools());"
    else:
        arguments = json.dumps(example_arguments(tool.input_schema), ensure_ascii=False)
        call = (
            f"console.log(await client.callTool({{ name: {json.dumps(tool.name)}, "
            f"arguments: {arguments} }}));"
        )
    template = _TYPESCRIPT_OAUTH if oauth else _TYPESCRIPT
    return template.format(
        url=json.dumps(url), callback=CALLBACK_URL, port=CALLBACK_PORT, call=call
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
