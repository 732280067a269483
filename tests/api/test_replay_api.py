"""Replays through the API (api/replay.py): who may run and read them, what each sees, and
bad input refused with nothing run.

The replayed call is client traffic recorded by the server's own recorder
(tests/support/recorded_calls.py), so these tests use committed data.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from mcp_app.models import CallLog, Draft, Policy, ReplayRun
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.calllog.recorder import ADMIN_TEST_HTTP_METHOD
from tests.support.recorded_calls import client_call, flushed
from tests.support.replays import PAYLOADS, RUN, VIEW, greet_draft, lookup_draft, member
from tests.support.teams import World, two_teams
from tests.support.upstream import run_upstream

pytestmark = pytest.mark.django_db(transaction=True)

NAME = "Ada-the-caller"


@pytest.fixture
def world() -> World:
    return two_teams()


def client_of(user: User) -> APIClient:
    _token, key = api_token_create(user=user, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def replay_url(draft: Draft | int) -> str:
    return f"/api/v1/drafts/{draft if isinstance(draft, int) else draft.pk}/replay/"


def post(client: APIClient, draft: Draft | int, **body: Any) -> Any:
    return client.post(replay_url(draft), {"tool": "greet", **body}, format="json")


def test_the_permission_matrix(world: World) -> None:
    draft = greet_draft(world, NAME)
    group = world.alpha.group

    assert APIClient().post(replay_url(draft), {"tool": "greet"}, format="json").status_code in (
        401,
        403,
    )
    nothing = post(client_of(member("nobody", group)), draft)
    assert nothing.status_code == 403 and VIEW in nothing.json()["detail"]
    viewer = client_of(member("viewer", group, VIEW))
    refused = post(viewer, draft)
    assert refused.status_code == 403 and RUN in refused.json()["detail"]
    assert not ReplayRun.objects.exists()

    runner = client_of(member("runner", group, VIEW, RUN))
    ran = post(runner, draft)
    assert ran.status_code == 201, ran.json()
    body = ran.json()
    assert body["summary"] == (
        "of 1 call: 0 refused by the draft's schema, 1 result changed, 0 identical"
    )
    assert body["counts"]["changed"] == 1 and body["payloads"] is False
    (result,) = body["results"]
    assert result["verdict"] == "changed" and result["draft"]["outcome"] == "ok"
    assert "arguments" not in result and "result" not in result["live"]
    assert NAME not in ran.content.decode()

    reader = client_of(member("reader", group, VIEW, PAYLOADS))
    read = reader.get(f"/api/v1/replays/{body['id']}/")
    assert read.status_code == 200
    (full,) = read.json()["results"]
    assert full["arguments"] == {"name": NAME}
    assert full["live"]["result"]["content"][0]["text"] == f"Hello {NAME}!"
    assert full["draft"]["result"]["content"][0]["text"] == f"Hi {NAME}!"
    assert [change["path"] for change in full["diff"]] == ["$.content[0].text"]
    # The viewer without the payload permission reads it back without them.
    assert "arguments" not in viewer.get(f"/api/v1/replays/{body['id']}/").json()["results"][0]
    assert client_of(member("blind", group)).get(f"/api/v1/replays/{body['id']}/").status_code == (
        403
    )

    # Another team's draft and run are not found, even with every permission.
    beta = client_of(world.beta.member)
    assert post(beta, draft).status_code == 404
    assert beta.get(f"/api/v1/replays/{body['id']}/").status_code == 404
    assert ReplayRun.objects.count() == 1
    # The replay ran as admin test calls, the client's call stays the only client traffic.
    flushed()
    calls = CallLog.objects.filter(rpc_method="tools/call", target="greet")
    assert calls.exclude(http_method=ADMIN_TEST_HTTP_METHOD).count() == 1
    assert calls.filter(http_method=ADMIN_TEST_HTTP_METHOD).count() == 2


def test_bad_input_is_refused_and_runs_nothing(world: World) -> None:
    draft = greet_draft(world, NAME)
    client = client_of(world.alpha.member)

    for body, path in (
        ({"tool": ""}, "tool"),
        ({"tool": "other"}, "tool"),
        ({"sample": 0}, "sample"),
        ({"sample": 51}, "sample"),
        ({"sample": "many"}, "sample"),
        ({"filter": {"status": "splendid"}}, "filter.status"),
        ({"filter": {"since": "yesterday"}}, "filter.since"),
        ({"filter": {"endpoint": "beta-endpoint"}}, "filter.endpoint"),
        ({"filter": "everything"}, "filter"),
    ):
        answer = post(client, draft, **body)
        assert answer.status_code == 400, (body, answer.json())
        paths = [error["path"] for error in answer.json()["errors"]]
        assert any(found.startswith(path) for found in paths), (body, paths)
    assert client.post(replay_url(draft), [1, 2], format="json").status_code == 400
    assert post(client, 999_999).status_code == 404
    assert not ReplayRun.objects.exists()
    flushed()
    assert not CallLog.objects.filter(http_method=ADMIN_TEST_HTTP_METHOD).exists()


def test_a_side_effect_tool_needs_the_confirmation(world: World) -> None:
    with run_upstream() as upstream:
        draft = lookup_draft(world, upstream, "x")
        client = client_of(world.alpha.member)

        missing = client.post(replay_url(draft), {"tool": "lookup"}, format="json")
        wrong = client.post(
            replay_url(draft), {"tool": "lookup", "confirm": "lookup:2"}, format="json"
        )
        for answer in (missing, wrong):
            assert answer.status_code == 400
            (error,) = answer.json()["errors"]
            assert error["path"] == "confirm" and "'lookup:1'" in error["message"]
        assert upstream.hits["/echo/x"] == 1

        ran = client.post(
            replay_url(draft), {"tool": "lookup", "confirm": "lookup:1"}, format="json"
        )

        assert ran.status_code == 201 and ran.json()["confirmed"] is True
        assert upstream.hits["/echo/x"] == 3


def test_policy_masked_arguments_are_skipped_and_said_so(world: World) -> None:
    Policy.objects.create(endpoint=world.alpha.endpoint, name="mask", kind="mask",
                          config={"patterns": ["email"]})  # fmt: skip
    draft = greet_draft(world, NAME)  # one call, with a name only
    client_call("alpha-endpoint", "greet", {"name": "ada@example.org"})
    flushed()
    user = member("runner", world.alpha.group, VIEW, RUN, PAYLOADS)

    answer = post(client_of(user), draft)

    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert (body["counts"]["calls"], body["counts"]["skipped_redacted"]) == (1, 1)
    assert "1 skipped (arguments redacted, or masked by a policy)" in body["summary"]
    assert [item["arguments"] for item in body["results"]] == [{"name": NAME}]
    page = Client()
    user.is_staff = True
    user.save()
    page.force_login(user)
    html = page.get(f"/audit/replay/{draft.pk}/?run={body['id']}").content.decode()
    assert "1 skipped (arguments redacted, or masked by a policy)" in html
    assert 'id="replay-skipped-redacted"' in html
