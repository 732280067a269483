"""MCP tasks over background calls: the catalog's implementation of ``protocol.ports.TaskStore``.

A task is a ``BackgroundCall`` row with ``is_task`` set: ``services.background`` writes and
runs it, this module only reads it back for one owner and turns it into a ``TaskInfo``. Plain
background calls (a client following a call on its own stream) are never visible as tasks,
and neither is a task past its lifetime (``expires_at``), whether or not it was purged yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from mcp_app.conf import get_conf
from mcp_app.models import BackgroundCall
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.mcp_tasks import TaskInfo, TaskOwner
from mcp_app.services.background import calls, web

Status = BackgroundCall.Status
# The shortest lifetime granted, whatever the client asks: a task must outlive one poll.
MIN_TTL_MS = 1000
# How long one wait for a task's end lasts before its row is read again (tasks/result).
_WAIT_SLICE_SECONDS = 30.0


def task_info(call: BackgroundCall) -> TaskInfo:
    """The protocol's view of a task row (a call still queued is ``working``)."""
    status = Status.WORKING if call.status == Status.QUEUED else call.status
    return TaskInfo(
        task_id=call.id,
        status=str(status),
        created_at=call.created_at,
        # Every status change sets updated_at (services.background.calls); heartbeats do not.
        last_updated_at=call.updated_at,
        ttl_ms=call.ttl_ms,
        poll_interval_ms=call.poll_interval_ms,
        status_message=call.status_message,
        result=call.result if status == Status.COMPLETED else None,
        error=call.error if status == Status.FAILED else None,
        input_requests=_outstanding(call) if status == Status.INPUT_REQUIRED else None,
    )


def _outstanding(call: BackgroundCall) -> dict[str, Any]:
    """The questions still waiting for an answer (answered keys drop out at once)."""
    asked = call.input_requests or {}
    waiting = {key: value for key, value in asked.items() if key not in call.input_responses}
    # A question asked again after an unusable answer keeps its key: show it rather than none.
    return waiting or dict(asked)


def granted_ttl_ms(requested: int | None) -> int:
    """The lifetime a new task gets: the client's wish within the server's bounds."""
    conf = get_conf()
    if requested is None:
        return conf.MCP_TASK_DEFAULT_TTL_MS
    return max(MIN_TTL_MS, min(requested, conf.MCP_TASK_MAX_TTL_MS))


class CatalogTaskStore:
    """The tasks of one endpoint, each visible only to the principal (and session) that made it."""

    def __init__(self, endpoint_id: int) -> None:
        self.endpoint_id = endpoint_id

    async def create(
        self,
        tool: ToolDef,
        arguments: Mapping[str, Any],
        ctx: RequestContext,
        *,
        answers: Mapping[str, Any],
        ttl_ms: int | None,
    ) -> TaskInfo:
        # The row is committed before astart_call returns, so tasks/get finds it at once.
        call = await web.astart_call(
            tool, arguments, ctx, answers=answers, is_task=True, ttl_ms=granted_ttl_ms(ttl_ms)
        )
        return task_info(call)

    async def get(self, task_id: str, owner: TaskOwner) -> TaskInfo | None:
        call = await self._call(task_id, owner)
        return task_info(call) if call is not None else None

    async def list(
        self, owner: TaskOwner, *, after: tuple[datetime, str] | None, limit: int
    ) -> Sequence[TaskInfo]:
        rows = BackgroundCall.objects.filter(
            endpoint_id=self.endpoint_id,
            principal=owner.principal,
            session_id=owner.session_id,
            is_task=True,
            expires_at__gt=timezone.now(),
        ).order_by("-created_at", "-id")
        if after is not None:
            created_at, task_id = after
            rows = rows.filter(
                Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=task_id)
            )
        page = [call async for call in rows[:limit]]
        # Active rows of dead workers are settled first, so the list agrees with tasks/get.
        settled = [await calls.asettle(call.id) if call.is_active else call for call in page]
        return [task_info(call) for call in settled if call is not None]

    async def wait(self, task_id: str, owner: TaskOwner) -> TaskInfo | None:
        call = await self._call(task_id, owner)
        while call is not None and call.is_active:
            if call.status == Status.INPUT_REQUIRED:
                # Only answers (or the end of its lifetime) move it on: look again a poll later.
                await asyncio.sleep(call.poll_interval_ms / 1000)
            else:
                await web.await_final(call.id, _WAIT_SLICE_SECONDS)
            call = await self._call(task_id, owner)
        return task_info(call) if call is not None else None

    async def cancel(self, task_id: str, owner: TaskOwner) -> TaskInfo | None:
        call = await self._call(task_id, owner)
        if call is None:
            return None
        if call.is_active:
            await calls.acancel_call(call.id)
            call = await self._call(task_id, owner)
        return task_info(call) if call is not None else None

    async def answer(
        self, task_id: str, owner: TaskOwner, responses: Mapping[str, Any]
    ) -> TaskInfo | None:
        call = await self._call(task_id, owner)
        if call is None:
            return None
        if call.status == Status.INPUT_REQUIRED:
            await calls.asubmit_answers(call.id, responses)
            call = await self._call(task_id, owner)
        return task_info(call) if call is not None else None

    async def _call(self, task_id: str, owner: TaskOwner) -> BackgroundCall | None:
        call = await calls.aget_call(
            task_id,
            endpoint_id=self.endpoint_id,
            principal=owner.principal,
            session_id=owner.session_id,
        )
        if call is None or not call.is_task:
            return None
        if call.expires_at is not None and call.expires_at <= timezone.now():
            return None
        return call
