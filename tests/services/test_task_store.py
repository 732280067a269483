"""The TaskStore over background-call rows: who sees a task, its lifetime, its shape, its list.

Rows are put in each state directly (as a worker would leave them) and the store is driven
with ``async_to_sync`` on the test's own connection; the worker and the wire are covered in
tests/e2e/test_mcp_tasks.py.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from mcp_app.models import BackgroundCall, Endpoint
from mcp_app.protocol.mcp_tasks import TaskInfo, TaskOwner
from mcp_app.services.mcp_tasks import MIN_TTL_MS, CatalogTaskStore, granted_ttl_ms

pytestmark = pytest.mark.django_db

Status = BackgroundCall.Status
ALICE = TaskOwner(principal="alice")


@pytest.fixture
def endpoint() -> Endpoint:
    return Endpoint.objects.create(slug="tasks", auth_mode="public")


@pytest.fixture
def store(endpoint: Endpoint) -> CatalogTaskStore:
    return CatalogTaskStore(endpoint.pk)


def make_task(endpoint: Endpoint, *, ago: float = 0.0, **fields: Any) -> BackgroundCall:
    """A task row of alice's, created ``ago`` seconds back, living an hour unless told."""
    now = timezone.now()
    fields.setdefault("principal", "alice")
    fields.setdefault("is_task", True)
    fields.setdefault("ttl_ms", 3_600_000)
    fields.setdefault("expires_at", now + timedelta(hours=1))
    call = BackgroundCall.objects.create(
        endpoint=endpoint,
        tool_name="job",
        protocol_version="2026-07-28",
        soft_time_limit=5.0,
        hard_time_limit=20.0,
        **fields,
    )
    created = now - timedelta(seconds=ago)
    # No status change yet unless the test says so: lastUpdatedAt is the creation time.
    updated = fields.get("updated_at", created)
    BackgroundCall.objects.filter(id=call.id).update(created_at=created, updated_at=updated)
    call.refresh_from_db()
    return call


def get(store: CatalogTaskStore, task_id: str, owner: TaskOwner = ALICE) -> TaskInfo | None:
    return async_to_sync(store.get)(task_id, owner)


def test_the_granted_lifetime_stays_within_the_servers_bounds(settings):
    settings.MCP_TASK_DEFAULT_TTL_MS = 50_000
    settings.MCP_TASK_MAX_TTL_MS = 90_000
    assert granted_ttl_ms(None) == 50_000
    assert granted_ttl_ms(0) == MIN_TTL_MS
    assert granted_ttl_ms(70_000) == 70_000
    assert granted_ttl_ms(10**15) == 90_000


def test_a_task_is_found_only_by_its_owner_on_its_endpoint(endpoint, store):
    task = make_task(endpoint)
    in_session = make_task(endpoint, session_id="s1")
    assert get(store, task.id) is not None
    assert get(store, in_session.id, TaskOwner("alice", "s1")) is not None
    other = Endpoint.objects.create(slug="other", auth_mode="public")
    for task_id, owner, where in [
        (task.id, TaskOwner("bob"), store),
        (task.id, TaskOwner(""), store),
        (task.id, TaskOwner("alice", "s1"), store),
        (in_session.id, ALICE, store),
        (task.id, ALICE, CatalogTaskStore(other.pk)),
        ("tsk_unknown", ALICE, store),
    ]:
        assert get(where, task_id, owner) is None


def test_plain_background_calls_and_expired_tasks_are_not_tasks(endpoint, store):
    plain = make_task(endpoint, is_task=False)
    expired = make_task(endpoint, expires_at=timezone.now() - timedelta(seconds=1))
    assert get(store, plain.id) is None
    assert get(store, expired.id) is None
    listed = async_to_sync(store.list)(ALICE, after=None, limit=10)
    assert listed == []


def test_a_row_becomes_the_protocols_task(endpoint, store):
    queued = make_task(endpoint, status_message="Queued")
    info = get(store, queued.id)
    assert info is not None
    assert (info.status, info.ttl_ms, info.status_message) == ("working", 3_600_000, "Queued")
    assert info.created_at == info.last_updated_at == queued.created_at
    assert (info.result, info.error, info.input_requests) == (None, None, None)
    finished = timezone.now()
    done = make_task(
        endpoint,
        status=Status.COMPLETED,
        result={"content": [{"type": "text", "text": "ok"}]},
        finished_at=finished,
        updated_at=finished,
    )
    info = get(store, done.id)
    assert info is not None and info.result == {"content": [{"type": "text", "text": "ok"}]}
    assert info.last_updated_at == done.finished_at


def test_a_waiting_task_shows_only_its_unanswered_questions(endpoint, store):
    asked = {
        "name": {"method": "elicitation/create", "params": {}},
        "ok": {"method": "elicitation/create", "params": {}},
    }
    waiting = make_task(
        endpoint,
        status=Status.INPUT_REQUIRED,
        input_requests=asked,
        input_responses={"name": {"action": "accept", "content": {"name": "A"}}},
    )
    info = get(store, waiting.id)
    assert info is not None and info.status == "input_required"
    assert info.input_requests == {"ok": asked["ok"]}


def test_the_list_pages_newest_first_even_with_equal_creation_times(endpoint, store):
    tasks = [make_task(endpoint) for _ in range(3)]
    same = timezone.now() - timedelta(seconds=5)
    BackgroundCall.objects.filter(id__in=[t.id for t in tasks]).update(created_at=same)
    newest = make_task(endpoint)
    make_task(endpoint, principal="bob")
    listing = async_to_sync(store.list)
    first = listing(ALICE, after=None, limit=2)
    last = first[-1]
    rest = listing(ALICE, after=(last.created_at, last.task_id), limit=10)
    ids = [info.task_id for info in [*first, *rest]]
    assert ids[0] == newest.id
    assert sorted(ids[1:], reverse=True) == ids[1:]
    assert set(ids) == {newest.id, *(t.id for t in tasks)}


def test_the_list_settles_a_task_whose_worker_never_came(endpoint, store, settings):
    settings.MCP_BACKGROUND_START_TIMEOUT_SECONDS = 60
    stranded = make_task(endpoint, ago=61)
    [info] = async_to_sync(store.list)(ALICE, after=None, limit=10)
    assert (info.task_id, info.status) == (stranded.id, "failed")
    assert info.error is not None and info.error["code"] == -32603


def test_cancel_stops_an_active_task_and_leaves_a_finished_one(endpoint, store):
    active = make_task(endpoint, status=Status.WORKING, heartbeat_at=timezone.now())
    done = make_task(endpoint, status=Status.COMPLETED, result={"content": []})
    cancel = async_to_sync(store.cancel)
    assert cancel(active.id, ALICE).status == "cancelled"
    assert BackgroundCall.objects.get(id=active.id).status == Status.CANCELLED
    assert cancel(done.id, ALICE).status == "completed"
    assert cancel(active.id, TaskOwner("bob")) is None


def test_answers_are_kept_for_asked_questions_only(endpoint, store):
    asked = {"ok": {"method": "elicitation/create", "params": {}}}
    waiting = make_task(
        endpoint, status=Status.INPUT_REQUIRED, input_requests=asked, heartbeat_at=timezone.now()
    )
    answer = async_to_sync(store.answer)
    info = answer(waiting.id, ALICE, {"ok": {"action": "accept"}, "other": {"action": "accept"}})
    assert info is not None
    assert BackgroundCall.objects.get(id=waiting.id).input_responses == {"ok": {"action": "accept"}}
    assert answer(waiting.id, TaskOwner("bob"), {"ok": {"action": "decline"}}) is None
