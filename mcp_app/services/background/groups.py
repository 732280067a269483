"""Reading a background call's channel-layer groups, through a Redis outage.

Both sides wait on a group between looks at the call's row: the web side on the call's
group (frames, questions, "done"), the worker on its control group (answers, cancellation).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcp_app.services import notify

logger = logging.getLogger(__name__)


async def next_message(events: notify.GroupListener, timeout: float) -> dict[str, Any] | None:
    """The next channel-layer message, or None after ``timeout``.

    A listener whose connection broke (Redis restarted, say) raises on every read: the call
    then goes on by polling its row, at the same pace, instead of failing.
    """
    try:
        return await events.next(timeout)
    except Exception:
        logger.warning("Channel layer unavailable; polling the call's row", exc_info=True)
        await asyncio.sleep(timeout)
        return None
