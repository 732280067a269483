"""Matching URIs against RFC 6570 templates, levels 1-3."""

from __future__ import annotations

import pytest

from mcp_app.protocol.uritemplate import TemplateCache, match, variables


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        # Level 1: simple strings, percent-decoded, never spanning "/".
        ("users://{id}/profile", "users://42/profile", {"id": "42"}),
        ("users://{id}/profile", "users://J%C3%BCrgen/profile", {"id": "Jürgen"}),
        ("users://{id}/profile", "users://a/b/profile", None),
        ("users://{id}/profile", "users://42/settings", None),
        ("users://{id}", "users://", {"id": ""}),
        # Level 2: reserved and fragment expansion may span segments.
        ("file:///{+path}", "file:///etc/app/config.toml", {"path": "etc/app/config.toml"}),
        ("file:///{+path}", "file:///a%20b/c", {"path": "a b/c"}),
        ("doc://x{#section}", "doc://x#intro/part", {"section": "intro/part"}),
        ("doc://x{#section}", "doc://x", {}),
        # Level 3: several variables per expression, every operator.
        ("map://{x,y}", "map://1,2", {"x": "1", "y": "2"}),
        ("map://{x,y}", "map://1", {"x": "1"}),
        ("file://f{.ext}", "file://f.json", {"ext": "json"}),
        ("repo://r{/owner,name}", "repo://r/octo/cat", {"owner": "octo", "name": "cat"}),
        ("repo://r{/owner,name}", "repo://r/octo", {"owner": "octo"}),
        ("m://x{;a,b}", "m://x;a=1;b=2", {"a": "1", "b": "2"}),
        ("m://x{;a,b}", "m://x;a=1;b", {"a": "1", "b": ""}),
        ("db://{table}/rows{?limit,offset}", "db://t/rows?limit=5&offset=10",
         {"table": "t", "limit": "5", "offset": "10"}),
        # Query variables come in any order, any subset; unknown pairs are ignored.
        ("db://{table}/rows{?limit,offset}", "db://t/rows?offset=10&x=1",
         {"table": "t", "offset": "10"}),
        ("db://{table}/rows{?limit,offset}", "db://t/rows", {"table": "t"}),
        ("s://q?fixed=1{&page}", "s://q?fixed=1&page=3", {"page": "3"}),
        ("s://q{?term}", "s://q?term=a%26b", {"term": "a&b"}),
        # Literals are literal, not regular expressions.
        ("a.b://{x}", "aXb://1", None),
        # Level 4 prefix modifier caps the value length.
        ("c://{code:3}", "c://abc", {"code": "abc"}),
        ("c://{code:3}", "c://abcd", None),
    ],
)  # fmt: skip
def test_uri_matching(template: str, uri: str, expected: dict[str, str] | None) -> None:
    assert match(template, uri) == expected


@pytest.mark.parametrize(
    "template", ["x://{", "x://}", "x://{}", "x://{a b}", "x://{=a}", "x://{path*}", "x://{a:0}"]
)
def test_invalid_or_unsupported_templates_raise_value_error(template: str) -> None:
    with pytest.raises(ValueError):
        match(template, "x://1")


def test_variables_are_listed_in_order_of_appearance() -> None:
    assert variables("db://{table}/rows/{id}{?limit,table}") == ("table", "id", "limit")


def test_a_template_cache_parses_each_template_once() -> None:
    cache = TemplateCache()
    assert cache.parse("users://{id}") is cache.parse("users://{id}")
    assert match("users://{id}", "users://7", cache) == {"id": "7"}
    assert variables("users://{id}/{tab}", cache) == ("id", "tab")
    with pytest.raises(ValueError):
        cache.parse("users://{id")
