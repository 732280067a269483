"""Fixtures for the call log: a live server with tools of every capture policy, and helpers
that read back what that server recorded (it writes from another process, in batches)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db.models import Max
from pytest_django.fixtures import Settings

from mcp_app.models import CallLog, Endpoint, Tool
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import (  # noqa: F401  (fixtures)
    asgi_server,
    flush_database,
    live_server_url,
)
from tests.support.waiting import wait_until

SLUG = "audit"
WAIT_SECONDS = 10.0


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Settings) -> None:
    """Users made in a test (admin_user, team members, callers) get a password no test uses:
    hash it cheaply, as tests/admin/conftest.py does. Module-scoped fixtures make their users before
    this runs, with the product's hasher: those sign in on a live server, which must check it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _tool(name: str, **fields: Any) -> Tool:
    tool = Tool(name=name, **fields)
    tool.full_clean()
    tool.save()
    return tool


def audit_catalog() -> Endpoint:
    """An endpoint whose tools cover each capture policy and every redaction rule."""
    endpoint = make_endpoint(SLUG, allowed_origins="https://app.example.com")
    echo = make_python_tool("echo", "echo", capture_mode=Tool.Capture.FULL)
    add = make_python_tool(  # the default policy: metadata only
        "add",
        "add",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    )
    quiet = make_python_tool("quiet_echo", "echo", capture_mode=Tool.Capture.NONE)
    small = make_python_tool(
        "small_echo", "echo", capture_mode=Tool.Capture.FULL, capture_max_bytes=40
    )
    sleep = make_python_tool("sleep_with_progress", "sleep_with_progress")
    login = _tool(
        "login",
        description="Signs a user in.",
        kind=Tool.Kind.TEMPLATE,
        config={
            "template": '{"user": "{{ user }}", "session_token": "tok-{{ pin }}-{{ user }}", '
            '"note": "{{ note }}", "echo": "{{ api_key }}"}',
            "output": "json",
        },
        input_schema={
            "type": "object",
            "properties": {
                "user": {"type": "string"},
                "pin": {"type": "string", "writeOnly": True},
                "api_key": {"type": "string"},
                "note": {"type": "string"},
            },
            "required": ["user", "pin", "api_key", "note"],
        },
        capture_mode=Tool.Capture.FULL,
        capture_redact="note",
    )
    endpoint.tools.add(echo, add, quiet, small, sleep, login)
    return endpoint


@pytest.fixture(scope="module")
def audit_url(live_server_url: str, django_db_blocker: Any) -> Iterator[str]:  # noqa: F811
    with django_db_blocker.unblock():
        audit_catalog()
    yield f"{live_server_url}/mcp/{SLUG}"
    flush_database(django_db_blocker)


def last_id() -> int:
    return CallLog.objects.aggregate(top=Max("id"))["top"] or 0


def wait_for(predicate: Any, timeout: float = WAIT_SECONDS) -> Any:
    """Wait for ``predicate`` to return something truthy: the server writes records in
    batches from a background thread, so they appear shortly after the response."""
    return wait_until(predicate, "recorded", timeout=timeout, interval=0.02)


def recorded_since(mark: int, base_url: str) -> list[CallLog]:
    """Every record written after ``mark``, once all requests made so far are recorded.

    A sentinel request goes last; the server's single writer keeps submission order, so when
    the sentinel's row exists, every earlier request's rows exist too.
    """
    agent = f"sentinel-{uuid.uuid4()}"
    httpx.options(f"{base_url}/mcp/{SLUG}", headers={"user-agent": agent}, timeout=10)
    wait_for(lambda: CallLog.objects.filter(id__gt=mark, user_agent=agent).exists())
    return list(CallLog.objects.filter(id__gt=mark).exclude(user_agent=agent).order_by("id"))


def only(rows: list[CallLog]) -> CallLog:
    assert len(rows) == 1, [(r.http_method, r.rpc_method, r.status) for r in rows]
    return rows[0]
