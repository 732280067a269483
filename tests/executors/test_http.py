"""The "http" executor against a real local upstream: mapping, failures, retries, limits.

The upstream listens on 127.0.0.1, which the SSRF guard refuses by default: every config here
reaches it through its allow-list (``LOCAL``), as an operator would.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import override_settings

from mcp_app.executors import get_executor
from mcp_app.executors.base import ConfigError, HttpAuth
from mcp_app.executors.http.config import placeholder_names
from mcp_app.executors.netguard import NetworkPolicy
from mcp_app.executors.redaction import Redactor
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import NO_STRUCTURED, ToolError, ToolResult
from tests.support.live import free_port
from tests.support.upstream import PNG, Upstream, run_upstream

http = get_executor("http")
LOCAL = {"allow_networks": ["127.0.0.1/32"]}


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with run_upstream() as server:
        yield server


@dataclass
class FixedCredential:
    """Resolvers that hand every credential name the same request parts, and note the asks."""

    auth: HttpAuth
    asked: list[tuple[str, NetworkPolicy]] = field(default_factory=list)

    async def credential(self, name: str, policy: NetworkPolicy) -> HttpAuth:
        self.asked.append((name, policy))
        return self.auth


async def call(
    ctx: ToolCallContext,
    config: Mapping[str, Any],
    arguments: Mapping[str, Any] | None = None,
    auth: HttpAuth | None = None,
) -> ToolResult:
    """Prepare ``config`` and run it; with ``auth``, as the credential "api" resolved to it."""
    prepared = http.prepare({**LOCAL, **config, **({"credential": "api"} if auth else {})})
    if auth is not None:
        prepared = await http.resolve(prepared, FixedCredential(auth))
    return await http.run(prepared, arguments or {}, ctx)


async def echo(
    ctx: ToolCallContext, upstream: Upstream, path: str = "/echo", **config: Any
) -> dict[str, Any]:
    arguments = config.pop("arguments", {})
    auth = config.pop("auth", None)
    result = await call(ctx, {"url": upstream.url(path), **config}, arguments, auth)
    assert not result.is_error, result.content
    return result.structured


# Mapping of the response


async def test_json_response_becomes_structured_content_and_pretty_text(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    result = await call(ctx, {"url": upstream.url("/json")})

    document = {"data": {"items": [{"id": 1, "name": "one"}, {"id": 2}]}}
    assert result == ToolResult(
        content=[{"type": "text", "text": json.dumps(document, indent=2)}], structured=document
    )


async def test_a_json_list_is_returned_as_is(ctx: ToolCallContext, upstream: Upstream) -> None:
    result = await call(ctx, {"url": upstream.url("/json-list")})

    assert result.structured == [1, 2, 3]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("data.items[0].name", "one"),
        ("data.items[-1]", {"id": 2}),
        ("data", {"items": [{"id": 1, "name": "one"}, {"id": 2}]}),
    ],
)
async def test_select_returns_the_part_at_the_dotted_path(
    ctx: ToolCallContext, upstream: Upstream, path: str, expected: Any
) -> None:
    result = await call(ctx, {"url": upstream.url("/json"), "select": path})

    assert result.structured == expected
    assert result.content == [{"type": "text", "text": json.dumps(expected, indent=2)}]


async def test_select_of_a_missing_path_is_a_tool_error(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    with pytest.raises(ToolError, match=r"nothing at 'data.items\[5\]'"):
        await call(ctx, {"url": upstream.url("/json"), "select": "data.items[5]"})


async def test_text_response_becomes_text_content(ctx: ToolCallContext, upstream: Upstream) -> None:
    result = await call(ctx, {"url": upstream.url("/text")})

    assert result == ToolResult(content=[{"type": "text", "text": "plain words\n"}])
    assert result.structured is NO_STRUCTURED


async def test_image_response_becomes_base64_image_content(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    result = await call(ctx, {"url": upstream.url("/image")})

    data = base64.b64encode(PNG).decode()
    assert result.content == [{"type": "image", "data": data, "mimeType": "image/png"}]


async def test_binary_response_becomes_an_embedded_blob_without_query(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    result = await call(ctx, {"url": upstream.url("/binary?key=k")})

    resource = {
        "uri": upstream.url("/binary"),
        "mimeType": "application/octet-stream",
        "blob": base64.b64encode(bytes(range(16))).decode(),
    }
    assert result.content == [{"type": "resource", "resource": resource}]


async def test_an_empty_body_reports_the_status(ctx: ToolCallContext, upstream: Upstream) -> None:
    result = await call(ctx, {"url": upstream.url("/empty"), "method": "DELETE"})

    assert result == ToolResult.text("HTTP 204 No Content (empty body)")


async def test_invalid_json_is_a_tool_error(ctx: ToolCallContext, upstream: Upstream) -> None:
    with pytest.raises(ToolError, match="sent invalid JSON"):
        await call(ctx, {"url": upstream.url("/bad-json")})


@pytest.mark.parametrize(("code", "reason"), [(500, "Internal Server Error"), (404, "Not Found")])
async def test_an_unexpected_status_is_an_error_result_with_an_excerpt(
    ctx: ToolCallContext, upstream: Upstream, code: int, reason: str
) -> None:
    result = await call(ctx, {"url": upstream.url(f"/status/{code}?token=abc")})

    assert result == ToolResult.error(
        f"HTTP {code} {reason} from {upstream.url(f'/status/{code}')}: upstream failed; you sent ''"
    )


async def test_expected_statuses_can_include_an_error_code(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    result = await call(ctx, {"url": upstream.url("/status/404"), "expected_status": [404]})

    assert not result.is_error
    assert result.content[0]["text"].startswith("upstream failed")


# What is sent


async def test_url_placeholders_are_percent_encoded_path_segments(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    received = await echo(ctx, upstream, "/echo/{name}/x", arguments={"name": "a/../b c?d#e"})

    assert received["raw_path"] == "/echo/a%2F..%2Fb%20c%3Fd%23e/x"


async def test_query_mapping_encodes_values_repeats_lists_and_skips_absent_arguments(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    query = {"q": "{query}", "tag": "{tags}", "opt": "{absent}", "fixed": "1", "n": "{n}"}
    arguments = {"query": "x&y=z é", "tags": ["a", "b"], "n": 3}

    received = await echo(ctx, upstream, "/echo?keep=1", query=query, arguments=arguments)

    assert received["query"] == {
        "keep": ["1"], "q": ["x&y=z é"], "tag": ["a", "b"], "fixed": ["1"], "n": ["3"]
    }  # fmt: skip


async def test_header_mapping_sends_argument_values(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    received = await echo(
        ctx, upstream, headers={"X-Tag": "tag-{tag}", "X-Flag": "{flag}"},
        arguments={"tag": "blue", "flag": True},
    )  # fmt: skip

    assert received["headers"]["x-tag"] == "tag-blue"
    assert received["headers"]["x-flag"] == "true"
    assert received["headers"]["host"] == upstream.base_url.removeprefix("http://")


async def test_a_header_value_with_a_line_break_is_refused(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    with pytest.raises(ToolError, match="line break"):
        await call(
            ctx,
            {"url": upstream.url("/echo"), "headers": {"X-Tag": "{tag}"}},
            {"tag": "a\r\nInjected: yes"},
        )


async def test_body_arguments_sends_the_arguments_as_json(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    arguments = {"name": "Ann", "tags": [1, 2]}

    received = await echo(ctx, upstream, method="POST", body="arguments", arguments=arguments)

    assert received["method"] == "POST"
    assert json.loads(received["body"]) == arguments
    assert received["headers"]["content-type"] == "application/json"


async def test_json_body_template_inserts_values_and_interpolates_strings(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    template = {
        "user": {"name": "{name}", "age": "{age}", "note": "{absent}"},
        "greeting": "Hello {name}, {{literal}}",
        "list": ["{age}", "{absent}", 7],
    }

    received = await echo(
        ctx, upstream, method="PUT", body="json", body_template=template,
        arguments={"name": "Ann", "age": 41},
    )  # fmt: skip

    assert json.loads(received["body"]) == {
        "user": {"name": "Ann", "age": 41},
        "greeting": "Hello Ann, {literal}",
        "list": [41, None, 7],
    }


async def test_form_body_is_url_encoded(ctx: ToolCallContext, upstream: Upstream) -> None:
    received = await echo(
        ctx, upstream, method="POST", body="form",
        body_template={"name": "{name}", "kind": "fixed", "opt": "{absent}"},
        arguments={"name": "A&B = c"},
    )  # fmt: skip

    assert received["body"] == "name=A%26B+%3D+c&kind=fixed"
    assert received["headers"]["content-type"] == "application/x-www-form-urlencoded"


async def test_a_url_placeholder_without_argument_is_a_tool_error(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    with pytest.raises(ToolError, match="needs the argument 'id'"):
        await call(ctx, {"url": upstream.url("/echo/{id}")}, {})


async def test_credential_headers_and_query_are_sent(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    auth = HttpAuth(
        headers={"Authorization": "Bearer tok-1"}, query={"key": "k-1"}, secrets=("tok-1", "k-1")
    )

    received = await echo(ctx, upstream, auth=auth)

    # Redaction goes by value: these slots held exactly the credential's secrets.
    assert received["headers"]["authorization"] == "Bearer [redacted]"
    assert received["query"] == {"key": ["[redacted]"]}


# Retries, timeouts, limits


async def test_idempotent_requests_are_retried_on_503(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    result = await call(ctx, {"url": upstream.url("/flaky/get?fail=2"), "retries": 2})

    assert result.structured == {"attempt": 3}
    assert upstream.hits["/flaky/get"] == 3


async def test_retries_stop_at_the_configured_count(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    result = await call(
        ctx, {"url": upstream.url("/flaky/few?fail=5&status=502"), "retries": 1, "method": "PUT"}
    )

    assert result.is_error
    assert result.content[0]["text"].startswith("HTTP 502 Bad Gateway")
    assert upstream.hits["/flaky/few"] == 2


async def test_post_is_never_retried(ctx: ToolCallContext, upstream: Upstream) -> None:
    result = await call(
        ctx, {"url": upstream.url("/flaky/post?fail=1"), "retries": 3, "method": "POST"}
    )

    assert result.is_error
    assert upstream.hits["/flaky/post"] == 1


async def test_a_500_is_not_retried(ctx: ToolCallContext, upstream: Upstream) -> None:
    result = await call(ctx, {"url": upstream.url("/flaky/500?fail=1&status=500"), "retries": 3})

    assert result.is_error
    assert upstream.hits["/flaky/500"] == 1


async def test_a_refused_connection_is_a_tool_error_after_retries(ctx: ToolCallContext) -> None:
    url = f"http://127.0.0.1:{free_port()}/x?secret=1"

    with pytest.raises(ToolError) as caught:
        await call(ctx, {"url": url, "retries": 1})

    assert caught.value.message == (f"Could not reach {url.split('?')[0]} (ConnectError).")


async def test_a_slow_upstream_times_out(ctx: ToolCallContext, upstream: Upstream) -> None:
    with pytest.raises(ToolError, match=r"did not answer within 0.2 s"):
        await call(ctx, {"url": upstream.url("/slow"), "timeout": 0.2})


@override_settings(MCP_HTTP_MAX_RESPONSE_BYTES=1000)
@pytest.mark.parametrize("path", ["/large?bytes=5000", "/large-chunked?bytes=50000"])
async def test_a_response_above_the_size_cap_is_a_tool_error(
    ctx: ToolCallContext, upstream: Upstream, path: str
) -> None:
    with pytest.raises(ToolError, match="larger than the limit of 1000 bytes"):
        await call(ctx, {"url": upstream.url(path)})


@override_settings(MCP_HTTP_MAX_RESPONSE_BYTES=1000)
async def test_a_response_at_the_size_cap_is_read(ctx: ToolCallContext, upstream: Upstream) -> None:
    result = await call(ctx, {"url": upstream.url("/large?bytes=1000")})

    assert result.content == [{"type": "text", "text": "x" * 1000}]


# Redirects


async def test_redirects_are_followed(ctx: ToolCallContext, upstream: Upstream) -> None:
    result = await call(ctx, {"url": upstream.url("/redirect?to=/json&status=307")})

    assert result.structured["data"]["items"][0]["id"] == 1


async def test_303_turns_a_post_into_a_get_without_body(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    received = await echo(
        ctx, upstream, "/redirect?to=/echo/after&status=303", method="POST", body="arguments",
        arguments={"a": 1},
    )  # fmt: skip

    assert (received["method"], received["path"], received["body"]) == ("GET", "/echo/after", "")


async def test_a_redirect_loop_ends_with_a_tool_error(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    with pytest.raises(ToolError, match="More than 5 redirects"):
        await call(ctx, {"url": upstream.url("/redirect-loop")})


async def test_a_cross_origin_redirect_drops_the_authorization_header(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    other = upstream.base_url.replace("127.0.0.1", "localhost") + "/echo"
    auth = HttpAuth(headers={"Authorization": "Bearer tok-2"}, secrets=("tok-2",))

    received = await echo(
        ctx, upstream, f"/redirect?to={other}", auth=auth,
        allow_hosts=["localhost"],
    )  # fmt: skip

    assert "authorization" not in received["headers"]
    assert received["headers"]["host"] == other.removeprefix("http://").removesuffix("/echo")


# Configuration


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, 'need a "url"'),
        ({"url": "ftp://example.com/x"}, "must start with http"),
        ({"url": "https://{host}/x"}, "scheme and host cannot contain placeholders"),
        ({"url": "https://u:p@example.com/"}, "credential, not the URL"),
        ({"url": "https://example.com/{"}, "unmatched or empty brace"),
        ({"url": "https://example.com/{}"}, "unmatched or empty brace"),
        ({"url": "https://example.com/", "method": "TRACE"}, "method must be one of"),
        ({"url": "https://example.com/", "method": None}, "DELETE, OPTIONS, not null."),
        ({"url": "https://example.com/", "query": {"q": 1}}, "query must be an object"),
        ({"url": "https://example.com/", "headers": {"Host": "x"}}, "cannot be set"),
        ({"url": "https://example.com/", "headers": {"A B": "x"}}, "not a valid header name"),
        ({"url": "https://example.com/", "body": "xml"}, "body must be one of"),
        ({"url": "https://example.com/", "body": None}, "not null."),
        ({"url": "ftp://example.com/x"}, 'a host, not "ftp://example.com/x".'),
        ({"url": "https://example.com/", "body": "json"}, "needs a body_template"),
        ({"url": "https://example.com/", "body": "form", "body_template": [1]}, "object of str"),
        ({"url": "https://example.com/", "body_template": {}}, 'only with body "json"'),
        ({"url": "https://example.com/", "timeout": 0}, "timeout must be"),
        ({"url": "https://example.com/", "retries": 9}, "retries must be"),
        ({"url": "https://example.com/", "expected_status": ["2xy"]}, "neither a status"),
        ({"url": "https://example.com/", "expected_status": []}, "non-empty list"),
        ({"url": "https://example.com/", "select": "a..b"}, "not a dotted path"),
        ({"url": "https://example.com/", "allow_networks": ["10.0.0.1/8"]}, "allow_networks"),
        ({"url": "https://example.com/", "resolved_credential": "x"}, "Unknown config keys"),
        ({"url": "https://example.com/", "extra": 1}, "Unknown config keys: extra"),
    ],
)
def test_invalid_configs_are_refused_with_a_reason(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        http.prepare(config)

    assert message in caught.value.message


def test_placeholder_names_cover_url_query_headers_and_body() -> None:
    config = {
        "url": "https://example.com/{a}/{{b}}",
        "query": {"q": "{c}"},
        "headers": {"X": "pre-{d}"},
        "body": "json",
        "body_template": {"x": ["{e}", "{f} {a}"]},
    }

    assert placeholder_names(config) == {"a", "c", "d", "e", "f"}


# Secrets


async def test_secrets_are_redacted_from_error_excerpts_and_never_logged(
    ctx: ToolCallContext, upstream: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cret/token+value"
    auth = HttpAuth(headers={"Authorization": f"Bearer {secret}"}, secrets=(secret,))
    caplog.set_level(logging.DEBUG)

    result = await call(ctx, {"url": upstream.url("/status/500")}, auth=auth)

    assert result.content[0]["text"].endswith("you sent 'Bearer [redacted]'")
    assert secret not in caplog.text


async def test_an_echoed_api_key_is_redacted_from_text_and_structured_content(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    secret = "k3y/with+chars&more"
    auth = HttpAuth(query={"key": secret}, secrets=(secret,))

    result = await call(ctx, {"url": upstream.url("/echo")}, auth=auth)

    assert result.structured["query"] == {"key": ["[redacted]"]}
    assert result.structured["raw_path"] == "/echo?key=[redacted]"
    shown = json.dumps([result.content, result.structured])
    for form in (secret, "k3y/with%2Bchars%26more", "k3y%2Fwith%2Bchars%26more"):
        assert form not in shown


async def test_a_secret_with_quotes_is_redacted_from_the_pretty_printed_text(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    secret = 'pa"ss\\word'
    auth = HttpAuth(headers={"X-Key": secret}, secrets=(secret,))

    result = await call(ctx, {"url": upstream.url("/echo")}, auth=auth)

    assert result.structured["headers"]["x-key"] == "[redacted]"
    assert json.dumps(secret)[1:-1] not in result.content[0]["text"]


def test_binary_blocks_are_redacted_inside_their_base64() -> None:
    redactor = Redactor(("s3cret",))
    blob = base64.b64encode(b"\x00\x01s3cret\x02").decode()
    result = ToolResult(
        content=[
            {"type": "image", "data": blob, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "u", "blob": blob}},
        ]
    )

    redacted = redactor.result(result)

    expected = base64.b64encode(b"\x00\x01[redacted]\x02").decode()
    assert redacted.content[0]["data"] == expected
    assert redacted.content[1]["resource"]["blob"] == expected


async def test_secrets_are_redacted_from_tool_errors(ctx: ToolCallContext) -> None:
    secret = "abc-secret-xyz"
    auth = HttpAuth(secrets=(secret,))

    with pytest.raises(ToolError) as caught:
        await call(
            ctx,
            {"url": "http://127.0.0.1:9/{path}", "retries": 0},
            {"path": secret},
            auth,
        )

    assert secret not in caught.value.message
    assert "[redacted]" in caught.value.message


async def test_an_unresolved_credential_is_a_tool_error(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    with pytest.raises(ToolError, match="credential 'api' was not resolved"):
        await call(ctx, {"url": upstream.url("/json"), "credential": "api"})


async def test_resolve_asks_for_the_credential_through_the_merged_allow_list() -> None:
    resolvers = FixedCredential(HttpAuth(headers={"X-Key": "k"}, secrets=("k",)))
    config = {"url": "https://api.example.com/", "credential": "api", **LOCAL}
    prepared = http.prepare(config)

    with override_settings(MCP_HTTP_ALLOWED_NETWORKS="10.9.0.0/16"):
        resolved = await http.resolve(prepared, resolvers)

    assert resolvers.asked == [
        ("api", NetworkPolicy.build(networks=["127.0.0.1/32", "10.9.0.0/16"]))
    ]
    assert resolved.auth == resolvers.auth
    assert prepared.auth is None  # the snapshot's copy stays without the secret


async def test_a_config_without_credential_resolves_to_itself() -> None:
    resolvers = FixedCredential(HttpAuth())
    prepared = http.prepare({"url": "https://api.example.com/"})

    assert await http.resolve(prepared, resolvers) is prepared
    assert resolvers.asked == []


def test_http_auth_repr_shows_no_secret() -> None:
    auth = HttpAuth(headers={"Authorization": "Bearer zzz"}, query={"k": "yyy"}, secrets=("zzz",))

    assert "zzz" not in repr(auth) and "yyy" not in repr(auth)
