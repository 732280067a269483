"""One page of a catalog list (tools, prompts, resources, templates), shaped per revision.

The four ``*/list`` methods differ only in which items they page through and how an item is
shaped. A page is the same for every request at the same catalog version, revision, cursor
and page size, so it is shaped once and kept on the snapshot: a client listing an endpoint of
10,000 tools pays for serialising its page, not for shaping it again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.cursors import paginate
from mcp_app.protocol.messages import ListParams

T = TypeVar("T")


def list_page(
    ctx: RequestContext,
    params: ListParams,
    *,
    items: Sequence[T],
    key: Callable[[T], str],
    list_name: str,
    result_key: str,
    shape: Callable[[T, str], dict[str, Any]],
    variant: str = "",
) -> dict[str, Any]:
    """Return the page of ``items`` after ``params.cursor`` as ``{result_key: [...]}``.

    The shaped items are shared by every request served from this snapshot: callers must not
    mutate them. ``variant`` names what else than the revision ``shape`` depends on (the
    client's capabilities), so pages shaped differently are kept apart.

    Raises:
        InvalidParams: the cursor is invalid (``protocol.cursors.decode_cursor``).
    """
    memo_key = (list_name, ctx.version, params.cursor or "", ctx.page_size, variant)
    page = ctx.catalog.remembered(memo_key)
    if page is None:
        found, next_cursor = paginate(
            items,
            key,
            params.cursor,
            list_name=list_name,
            page_size=ctx.page_size,
            secret=ctx.cursor_secret,
        )
        page = ([shape(item, ctx.version) for item in found], next_cursor)
        ctx.catalog.remember(memo_key, page)
    shaped, next_cursor = page
    result: dict[str, Any] = {result_key: shaped}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result
