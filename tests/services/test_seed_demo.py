"""manage.py seed_demo: creates a usable demo endpoint, and running it again changes nothing."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command

from mcp_app.models import Endpoint
from mcp_app.services.snapshots import build_snapshot


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_seed_demo_creates_the_demo_catalog(db: None) -> None:
    output = seed()

    snapshot = build_snapshot(Endpoint.objects.get(slug="demo"))
    assert [tool.name for tool in snapshot.tools] == [
        "add", "countdown", "current_time", "echo", "greet", "sleep_with_progress",
    ]  # fmt: skip
    assert [resource.uri for resource in snapshot.resources] == ["demo://readme"]
    assert [t.uri_template for t in snapshot.resource_templates] == ["demo://notes/{topic}"]
    (prompt,) = snapshot.prompts
    assert [(a.name, a.required, bool(a.completions)) for a in prompt.arguments] == [
        ("code", True, False),
        ("language", False, True),
    ]
    assert len(prompt.messages) == 2
    assert "Created tool greet" in output
    assert "Demo endpoint URL: http://" in output
    protected = Endpoint.objects.get(slug="demo-oauth")
    assert protected.auth_mode == Endpoint.AuthMode.OAUTH
    assert [tool.name for tool in build_snapshot(protected).tools] == [
        "add", "countdown", "current_time", "echo",
    ]  # fmt: skip
    assert "OAuth demo endpoint URL: http://" in output


def test_seed_demo_is_idempotent(db: None) -> None:
    seed()
    before = build_snapshot(Endpoint.objects.get(slug="demo"))

    output = seed()

    after = build_snapshot(Endpoint.objects.get(slug="demo"))
    assert "Created" not in output
    assert after.tools == before.tools
    assert after.prompts == before.prompts
    assert Endpoint.objects.count() == 2
