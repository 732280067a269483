"""The scheduled health probe of upstream MCP servers (issue #26), against the real test
upstream (the SDK's server in a subprocess on 127.0.0.1): its state (active, degraded,
offline) as the admin, the API and /metrics show it, and a tool list that differs from the
last sync marks the upstream out of sync.

The probe functions run directly here; that beat runs them is checked on the schedule.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_app.executors import mcp_upstream
from mcp_app.models import Prompt, ResourceTemplate, Upstream
from mcp_app.ops.metrics import SharedStateCollector
from mcp_app.ops.tasks import probe_upstreams
from mcp_app.services.credentials import credential_create
from mcp_app.services.upstream_health import upstream_probe, upstreams_probe_due
from mcp_app.services.upstream_sync import upstream_offer_apply, upstream_offer_plan
from mcp_app.services.upstream_targets import upstream_list_offer
from tests.support.live import free_port
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "probe-secret-value"
State = Upstream.ProbeState


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def running(tmp_path: Path, port: int) -> Iterator[RunningUpstream]:
    with run_mcp_upstream(tmp_path, port=port) as upstream:
        yield upstream


@pytest.fixture(autouse=True)
async def _fresh_sessions() -> Any:
    yield
    await mcp_upstream.close_sessions()


def make_upstream(url: str, **fields: Any) -> Upstream:
    credential = credential_create(name="probe-cred", kind="bearer", secret=SECRET)
    upstream = Upstream(
        name="up", url=url, credential=credential, allow_networks="127.0.0.1/32", **fields
    )
    upstream.full_clean()
    upstream.save()
    return upstream


async def reload() -> Upstream:
    return await Upstream.objects.aget(name="up")


async def sync_all() -> None:
    """Sync what the upstream offers now, every addition and change ticked (nothing removed)."""
    offer = await upstream_list_offer("up")

    def apply() -> None:
        upstream = Upstream.objects.get(name="up")
        choice = upstream_offer_plan(upstream, offer).additions_and_changes()
        upstream_offer_apply(upstream, offer, choice=choice)

    await database_sync_to_async(apply)()


async def test_a_healthy_upstream_is_active_after_a_probe(running: RunningUpstream) -> None:
    await database_sync_to_async(make_upstream)(running.url)
    assert (await reload()).probe_state == State.UNKNOWN

    assert await upstream_probe("up") == State.ACTIVE

    row = await reload()
    assert (row.probe_state, row.probe_failures) == (State.ACTIVE, 0)
    assert row.last_probe_at is not None
    assert row.protocol_version == "2025-11-25"
    assert row.tools_fingerprint and not row.tools_out_of_sync


async def test_a_stopped_upstream_goes_degraded_then_offline_and_back_to_active(
    tmp_path: Path, port: int
) -> None:
    await database_sync_to_async(make_upstream)(
        f"http://127.0.0.1:{port}/mcp", unhealthy_threshold=2
    )
    with run_mcp_upstream(tmp_path, port=port):
        assert await upstream_probe("up") == State.ACTIVE
    # Stopped: the first failure degrades it, the threshold's makes it offline.
    assert await upstream_probe("up") == State.DEGRADED
    assert (await reload()).probe_failures == 1
    assert await upstream_probe("up") == State.OFFLINE
    row = await reload()
    assert row.probe_failures == 2
    assert "'up'" in row.last_error and SECRET not in row.last_error
    # The probe keeps its own count: the breaker, which counts calls, stays closed.
    assert (row.consecutive_failures, row.circuit_open) == (0, False)
    with run_mcp_upstream(tmp_path, port=port):
        assert await upstream_probe("up") == State.ACTIVE
    assert (await reload()).probe_failures == 0


async def test_an_upstream_restarted_with_other_tools_is_out_of_sync(
    tmp_path: Path, port: int
) -> None:
    await database_sync_to_async(make_upstream)(f"http://127.0.0.1:{port}/mcp")
    with run_mcp_upstream(tmp_path, port=port):
        await sync_all()
        assert await upstream_probe("up") == State.ACTIVE
        assert not (await reload()).tools_out_of_sync
    # The same server restarted: the same list, still in sync.
    with run_mcp_upstream(tmp_path, port=port):
        await upstream_probe("up")
        assert not (await reload()).tools_out_of_sync
    with run_mcp_upstream(tmp_path, port=port, more_tools=True):
        assert await upstream_probe("up") == State.ACTIVE
    row = await reload()
    assert row.tools_out_of_sync
    # A re-sync that takes the new list is in sync again.
    with run_mcp_upstream(tmp_path, port=port, more_tools=True):
        await sync_all()
        await upstream_probe("up")
    assert not (await reload()).tools_out_of_sync


async def test_an_upstream_whose_prompts_and_templates_changed_is_out_of_sync(
    tmp_path: Path, port: int
) -> None:
    await database_sync_to_async(make_upstream)(f"http://127.0.0.1:{port}/mcp")
    with run_mcp_upstream(tmp_path, port=port, extras=True):
        await sync_all()
        await upstream_probe("up")
        assert not (await reload()).tools_out_of_sync
    # Restarted without its extra templates and prompt, the same tools: out of sync.
    with run_mcp_upstream(tmp_path, port=port):
        assert await upstream_probe("up") == State.ACTIVE
        assert (await reload()).tools_out_of_sync
        await sync_all()
        await upstream_probe("up")
    assert not (await reload()).tools_out_of_sync


async def test_the_apply_policy_takes_a_new_prompt_found_by_the_probe(
    tmp_path: Path, port: int
) -> None:
    await database_sync_to_async(make_upstream)(f"http://127.0.0.1:{port}/mcp", sync_policy="apply")
    with run_mcp_upstream(tmp_path, port=port):
        await sync_all()
        await upstream_probe("up")
    with run_mcp_upstream(tmp_path, port=port, extras=True):
        await upstream_probe("up")

    prompt = await Prompt.objects.aget(name="leak_prompt")
    template = await ResourceTemplate.objects.aget(name="leak")
    # New rows wait disabled for an operator, as by hand.
    assert (prompt.enabled, template.enabled) == (False, False)
    assert not (await reload()).tools_out_of_sync


async def test_only_due_enabled_upstreams_are_probed(running: RunningUpstream) -> None:
    def setup() -> None:
        make_upstream(running.url)
        for name, fields in (
            ("recent", {"last_probe_at": timezone.now()}),
            ("off", {"probe_interval_seconds": 0}),
            ("disabled", {"enabled": False}),
        ):
            Upstream.objects.create(
                name=name, url=running.url, allow_networks="127.0.0.1/32", **fields
            )

    await database_sync_to_async(setup)()
    assert await upstreams_probe_due() == {"up": State.ACTIVE}
    # Just probed: not due again until its interval has passed.
    assert await upstreams_probe_due() == {}


def test_the_beat_schedule_runs_the_probe_job(running: RunningUpstream) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["probe_upstreams"]
    assert entry["task"] == probe_upstreams.name == "mcp_app.upkeep.probe_upstreams"
    make_upstream(running.url)
    probe_upstreams.apply().get()
    assert Upstream.objects.get(name="up").probe_state == State.ACTIVE


def test_the_state_shows_in_the_admin_and_metrics(admin_client: Client, port: int) -> None:
    make_upstream(f"http://127.0.0.1:{port}/mcp", unhealthy_threshold=1)
    async_to_sync(upstreams_probe_due)()  # nothing listens there

    listed = admin_client.get(reverse("admin:mcp_app_upstream_changelist"))
    row = Upstream.objects.get(name="up")
    page = admin_client.get(reverse("admin:mcp_app_upstream_change", args=[row.pk]))
    families = {family.name: family for family in SharedStateCollector().collect()}

    assert row.probe_state == State.OFFLINE
    assert "offline" in listed.content.decode() and "offline" in page.content.decode()
    samples = families["mcphost_upstream_state"].samples
    assert [(s.labels, s.value) for s in samples] == [({"upstream": "up", "state": "offline"}, 1.0)]
