"""``logging/setLevel`` (legacy server/utilities/logging): a session's minimum log level.

2026-07-28 removed the method; a modern request names its level in ``_meta`` instead
(``inbound.check_modern_request``).
"""

from __future__ import annotations

from typing import Any

from mcp_app.protocol.context import LOG_LEVELS, RequestContext
from mcp_app.protocol.errors import InvalidParams, InvalidRequest
from mcp_app.protocol.messages import SetLevelParams


async def handle_logging_set_level(ctx: RequestContext, params: SetLevelParams) -> dict[str, Any]:
    """Store the session's minimum level for ``notifications/message``.

    Raises:
        InvalidParams: the level is not an RFC 5424 level name.
        InvalidRequest: there is no session to store it in.
    """
    if params.level not in LOG_LEVELS:
        raise InvalidParams(f"params.level must be one of {', '.join(LOG_LEVELS)}")
    if ctx.session is None or ctx.sessions is None:
        raise InvalidRequest("logging/setLevel needs a session")
    await ctx.sessions.set_log_level(ctx.session.id, params.level)
    # The level is the session's: its later requests (a batch's next messages included) are
    # built with it. This request's own context is left as built: it sends nothing more.
    ctx.session.log_level = params.level
    return {}
