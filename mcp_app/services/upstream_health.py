"""The health probe of upstream MCP servers: the upkeep job ``probe_upstreams``.

Each due upstream is reached as a call would reach it (``services/upstream_targets.py``,
its breaker ignored), its tools and the rest of its offer are fingerprinted, and what was
found is recorded on the row: whether it answered, and whether its offer drifted from what
the catalog last took (then its sync policy may apply the changes).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from django.db import transaction
from django.utils import timezone

from mcp_app.executors import mcp_upstream
from mcp_app.executors.mcp_upstream import (
    UpstreamAuthRequired,
    UpstreamUnavailable,
    negotiated_revision,
)
from mcp_app.models import Upstream
from mcp_app.protocol.results import ToolError
from mcp_app.services.database import in_thread
from mcp_app.services.upstream_sync import offer_fingerprint
from mcp_app.services.upstream_targets import (
    target_offer,
    upstream_resolve,
    upstream_sync_by_policy_logged,
)

logger = logging.getLogger(__name__)


# Upstreams probed at once by one run of the job.
PROBE_CONCURRENCY = 8


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """What one probe found: ``failure`` (None: the upstream answered), whether the answer
    was slow, the revision negotiated and the offer's fingerprint (``offer_fingerprint``)."""

    failure: str | None
    slow: bool = False
    revision: str | None = None
    fingerprint: str = ""


def _record_probe(pk: int, outcome: ProbeOutcome) -> str:
    """Write the probe's findings on the row; return the state it leaves."""
    now = timezone.now()
    State = Upstream.ProbeState
    with transaction.atomic():
        upstream = Upstream.objects.select_for_update().filter(pk=pk).first()
        if upstream is None:
            return State.UNKNOWN
        fields: dict[str, Any] = {"last_probe_at": now}
        if outcome.failure is None:
            fields["probe_failures"] = 0
            fields["probe_state"] = State.DEGRADED if outcome.slow else State.ACTIVE
            if outcome.revision:
                fields["protocol_version"] = outcome.revision
            if not outcome.fingerprint:
                pass  # tools not listed (a per-user upstream probed without a user)
            elif not upstream.tools_fingerprint:
                fields["tools_fingerprint"] = outcome.fingerprint  # the baseline
            elif outcome.fingerprint != upstream.tools_fingerprint and not (
                upstream.tools_out_of_sync
            ):
                fields["tools_changed_at"] = now
                logger.info("Upstream %s: what it offers differs from the last sync", pk)
        else:
            failures = upstream.probe_failures + 1
            fields["probe_failures"] = failures
            fields["probe_state"] = (
                State.OFFLINE if failures >= upstream.unhealthy_threshold else State.DEGRADED
            )
            fields["last_error"] = outcome.failure[:2000]
            fields["last_error_at"] = now
        Upstream.objects.filter(pk=pk).update(**fields)
    return str(fields["probe_state"])


async def upstream_probe(name: str) -> str:
    """Probe the upstream ``name`` once and record the finding; return its state.

    The probe is what a call does first, with the same credential and network guard:
    open (or reuse) the upstream's shared session, which initializes it, and list every tool,
    resource, template and prompt, all within ``probe_timeout``. It reaches an upstream whose
    breaker is open (it is how an operator learns it is back) but never counts towards the
    breaker. A success resets the
    failed probes (degraded instead of active when it took more than half the timeout) and
    compares what it offers with the last sync; a failure counts, and makes the upstream
    offline at ``unhealthy_threshold`` failures in a row, degraded before. The error kept is
    the one a call would keep: the upstream's name, no secret.
    """
    try:
        loaded = await upstream_resolve(name, breaker=False, anonymous=True)
    except ToolError as exc:
        upstream = await Upstream.objects.filter(name=name).only("pk").afirst()
        if upstream is None:
            return Upstream.ProbeState.UNKNOWN
        return await in_thread(_record_probe)(upstream.pk, ProbeOutcome(failure=exc.message))
    limit, fingerprint, policy = (
        await Upstream.objects.filter(pk=loaded.pk)
        .values_list("probe_timeout", "tools_fingerprint", "sync_policy")
        .aget()
    )
    target = replace(
        loaded.target,
        call_timeout=limit,
        connect_timeout=min(loaded.target.connect_timeout, limit),
    )
    started = time.monotonic()
    try:
        async with asyncio.timeout(limit):
            offer = await target_offer(target)
    except TimeoutError:
        outcome = ProbeOutcome(failure=f"The upstream {name!r} did not answer within {limit:g} s.")
    except UpstreamAuthRequired as exc:
        # Probed without a user, a per-user upstream answers only that it wants one: alive,
        # its tools unseen (nothing to compare with the last sync).
        failure = None if loaded.per_user else exc.detail
        outcome = ProbeOutcome(failure=failure, slow=time.monotonic() - started > limit / 2)
    except UpstreamUnavailable as exc:
        outcome = ProbeOutcome(failure=exc.detail)
    except ToolError as exc:  # UpstreamRefused: it answered, but not with its tools
        outcome = ProbeOutcome(failure=f"The upstream {name!r} refused tools/list: {exc.message}")
    else:
        outcome = ProbeOutcome(
            failure=None,
            slow=time.monotonic() - started > limit / 2,
            revision=negotiated_revision(target.key),
            fingerprint=offer_fingerprint(offer),
        )
    if outcome.failure is not None:
        logger.warning("Upstream %s: probe failed: %s", loaded.pk, outcome.failure)
    state = await in_thread(_record_probe)(loaded.pk, outcome)
    drifted = outcome.failure is None and fingerprint and outcome.fingerprint != fingerprint
    if drifted and policy == Upstream.SyncPolicy.APPLY:
        await upstream_sync_by_policy_logged(name)
    return state


def _due_upstreams() -> list[str]:
    now = timezone.now()
    due = []
    for name, every, last in Upstream.objects.filter(
        enabled=True, probe_interval_seconds__gt=0
    ).values_list("name", "probe_interval_seconds", "last_probe_at"):
        if last is None or last + datetime.timedelta(seconds=every) <= now:
            due.append(name)
    return due


async def upstreams_probe_due() -> dict[str, str]:
    """Probe every enabled upstream whose probe interval has passed since its last probe
    (a few at once); return each one's state.

    Every upstream session of the running event loop is closed after, so run it in a loop of
    its own (the upkeep job's), never a web process's, whose callers' sessions it would end.
    """
    names = await in_thread(_due_upstreams)()
    gate = asyncio.Semaphore(PROBE_CONCURRENCY)

    async def probe(name: str) -> str:
        async with gate:
            return await upstream_probe(name)

    try:
        states = await asyncio.gather(*(probe(name) for name in names))
    finally:
        # This loop is the job's own: nothing would reuse or sweep its sessions.
        await mcp_upstream.close_sessions()
    return dict(zip(names, states, strict=True))
