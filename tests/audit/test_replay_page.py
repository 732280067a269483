"""The replay page's rules (audit/replay.py), through Django's test client: who sees and runs
what, the confirmation step of a tool with side effects, and a form error that runs nothing.

The calls replayed are client traffic recorded by the server's own recorder
(tests/support/recorded_calls.py), so these tests use committed data.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from mcp_app.models import Draft, ReplayRun
from mcp_app.services.drafts import draft_create, live_entry
from tests.support.replays import PAYLOADS, RUN, VIEW, greet_draft, lookup_draft, member
from tests.support.teams import World, two_teams
from tests.support.upstream import run_upstream

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_NAME = "Ada-Payload-Only"


@pytest.fixture
def world() -> World:
    return two_teams()


def signed_in(username: str, group: Group, *permissions: str) -> Client:
    user = member(username, group, *permissions)
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def page(draft: Draft) -> str:
    return f"/audit/replay/{draft.pk}/"


FORM = {"tool": "greet", "range": "24h", "sample": "5", "status": "", "endpoint": ""}


def test_who_sees_and_runs_what(world: World) -> None:
    draft = greet_draft(world, SECRET_NAME)
    group = world.alpha.group

    assert Client().get(page(draft)).status_code == 302  # to the login page
    assert signed_in("nobody", group).get(page(draft)).status_code == 403
    viewer = signed_in("viewer", group, VIEW)
    shown = viewer.get(page(draft))
    assert shown.status_code == 200 and b'id="replay-form"' not in shown.content
    assert viewer.post(page(draft), FORM).status_code == 403
    assert not ReplayRun.objects.exists()

    runner = signed_in("runner", group, VIEW, RUN)
    ran = runner.post(page(draft), FORM)
    assert ran.status_code == 302
    run = ReplayRun.objects.get()
    assert ran["Location"] == f"{page(draft)}?run={run.pk}#results"
    outcomes_only = runner.get(ran["Location"]).content.decode()
    assert "Of 1 call: 0 refused by the draft&#x27;s schema, 1 result changed" in outcomes_only
    assert SECRET_NAME not in outcomes_only and "replay-diff" not in outcomes_only

    reader = signed_in("reader", group, VIEW, PAYLOADS)
    everything = reader.get(ran["Location"]).content.decode()
    assert f"Hello {SECRET_NAME}!" in everything and f"Hi {SECRET_NAME}!" in everything
    assert "$.content[0].text" in everything

    # Another team's draft is not found, whatever the permissions.
    other = signed_in("beta-viewer", world.beta.group, VIEW, RUN, PAYLOADS)
    assert other.get(page(draft)).status_code == 404
    assert other.post(page(draft), FORM).status_code == 404
    assert ReplayRun.objects.count() == 1


def test_a_side_effect_tool_shows_a_confirmation_step_first(world: World) -> None:
    with run_upstream() as upstream:
        draft = lookup_draft(world, upstream, "x", "y")
        runner = signed_in("runner", world.alpha.group, VIEW, RUN)

        asked = runner.post(page(draft), {**FORM, "tool": "lookup"})

        assert asked.status_code == 200
        body = asked.content.decode()
        assert 'id="replay-confirm"' in body and "Replay 2 calls of lookup" in body
        assert 'name="confirm" value="lookup:2"' in body
        assert (upstream.hits["/echo/x"], upstream.hits["/echo/y"]) == (1, 1)
        assert not ReplayRun.objects.exists()
        form = asked.context["form"]
        confirmed = {name: form[name].value() for name in form.fields}
        confirmed["until"] = form["until"].value()

        ran = runner.post(page(draft), {k: v for k, v in confirmed.items() if v is not None})

        assert ran.status_code == 302
        assert (upstream.hits["/echo/x"], upstream.hits["/echo/y"]) == (3, 3)
        assert ReplayRun.objects.get().confirmed


def test_a_form_error_runs_nothing(world: World) -> None:
    draft = greet_draft(world, SECRET_NAME)
    runner = signed_in("runner", world.alpha.group, VIEW, RUN)

    for data in (
        {**FORM, "sample": "0"},
        {**FORM, "sample": "51"},
        {**FORM, "tool": "other"},
        {**FORM, "status": "splendid"},
    ):
        answer = runner.post(page(draft), data)
        assert answer.status_code == 200 and answer.context["form"].errors, data
    unknown = runner.post(page(draft), {**FORM, "endpoint": "beta-endpoint"})
    assert unknown.status_code == 200
    assert "not on an endpoint" in unknown.content.decode()
    assert not ReplayRun.objects.exists()


def test_a_draft_changing_no_tool_says_there_is_nothing_to_replay(world: World) -> None:
    entry = live_entry("resources", "demo://alpha/readme", user=world.alpha.member)
    assert entry is not None
    document = {"format": "mcphost-catalog/1", "resources": [{**entry, "text": "changed"}]}
    draft = draft_create(title="Reword", document=document, actor=world.alpha.member)
    runner = signed_in("runner", world.alpha.group, VIEW, RUN)

    body = runner.get(page(draft)).content.decode()

    assert 'id="replay-no-tool"' in body and 'id="replay-form"' not in body
    assert runner.post(page(draft), FORM).context["form"].errors["tool"]
    assert not ReplayRun.objects.exists()
