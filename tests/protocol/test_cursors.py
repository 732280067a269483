"""Pagination cursors: opaque, tamper-evident, stable under catalog edits."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo, ToolDef
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.cursors import decode_cursor, encode_cursor, paginate
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import InvalidParams

MakeContext = Callable[..., RequestContext]
SECRET = b"k"
KEYS = [f"item-{i:03d}" for i in range(10)]


def page_of(
    cursor: str | None, items: list[str] = KEYS, size: int = 4
) -> tuple[list[str], str | None]:
    page, next_cursor = paginate(
        items, lambda key: key, cursor, list_name="things", page_size=size, secret=SECRET
    )
    return list(page), next_cursor


def test_cursor_round_trips_its_key() -> None:
    cursor = encode_cursor("things", "item-003", SECRET)
    assert decode_cursor(cursor, "things", SECRET) == "item-003"


def test_pages_cover_the_list_once_in_order() -> None:
    seen: list[str] = []
    cursor = None
    while True:
        page, cursor = page_of(cursor)
        seen.extend(page)
        if cursor is None:
            break
    assert seen == KEYS


def test_last_full_page_has_no_next_cursor() -> None:
    assert page_of(None, KEYS[:4]) == (KEYS[:4], None)


@pytest.mark.spec("2025-11-25", "server/utilities/pagination", "cursors are stable")
def test_cursor_resumes_after_its_key_when_items_are_added_or_removed() -> None:
    first, cursor = page_of(None)
    assert first == KEYS[:4]
    # An item before the boundary disappears and one is inserted before it: nothing after
    # the boundary is skipped or repeated, unlike an offset.
    edited = sorted([k for k in KEYS if k != "item-001"] + ["item-000a"])
    page, _ = page_of(cursor, edited)
    assert page == KEYS[4:8]


def test_cursor_survives_the_removal_of_its_own_key() -> None:
    _, cursor = page_of(None)
    page, _ = page_of(cursor, [k for k in KEYS if k != "item-003"])
    assert page == KEYS[4:8]


@pytest.mark.spec("2025-11-25", "server/utilities/pagination", "invalid cursor is -32602")
@pytest.mark.parametrize(
    "cursor",
    [
        "garbage",
        "a.b.c",
        "!!!.???",
        encode_cursor("things", "item-003", b"another secret"),
        encode_cursor("other-list", "item-003", SECRET),
    ],
)
def test_foreign_or_garbled_cursor_is_invalid_params(cursor: str) -> None:
    with pytest.raises(InvalidParams):
        page_of(cursor)


def test_tampered_cursor_is_invalid_params() -> None:
    cursor = encode_cursor("things", "item-003", SECRET)
    body, mac = cursor.split(".")
    forged = base64.urlsafe_b64encode(b'{"l":"things","k":"item-000"}').rstrip(b"=").decode()
    with pytest.raises(InvalidParams):
        page_of(f"{forged}.{mac}")


def test_empty_cursor_starts_at_the_beginning() -> None:
    assert page_of("")[0] == KEYS[:4]


async def test_250_tools_paginate_fully_without_duplicates_or_gaps(make_ctx: MakeContext) -> None:
    tools = tuple(
        ToolDef(name=f"tool-{i:04d}", description="", input_schema={"type": "object"})
        for i in reversed(range(250))
    )
    catalog = CatalogSnapshot(endpoint=EndpointInfo(slug="big"), tools=tools)
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        ctx = make_ctx("2026-07-28", catalog=catalog, page_size=100)
        result = await handle_request(ctx, "tools/list", {"cursor": cursor} if cursor else None)
        pages += 1
        names.extend(tool["name"] for tool in result["tools"])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert pages == 3
    assert names == [f"tool-{i:04d}" for i in range(250)]


async def test_cursor_of_one_list_is_refused_by_another(make_ctx: MakeContext) -> None:
    ctx = make_ctx(page_size=1)
    tools = await handle_request(ctx, "tools/list", None)
    with pytest.raises(InvalidParams):
        await handle_request(ctx, "prompts/list", {"cursor": tools["nextCursor"]})


async def test_non_string_cursor_is_invalid_params(make_ctx: MakeContext) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(make_ctx(), "tools/list", {"cursor": 5})
