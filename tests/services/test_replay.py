"""Replay of recorded calls against a draft (services/replay.py), through the service.

The calls replayed are real traffic (tests/support/recorded_calls.py): each ``tools/call``
goes through the project's ASGI application in-process and the call-log recorder a server
runs, and is written by the writer thread, so these tests use committed data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from mcp_app.models import CallLog, Draft, Policy, ReplayRun, Tool
from mcp_app.services import replay
from mcp_app.services.calllog.recorder import ADMIN_TEST_HTTP_METHOD
from mcp_app.services.catalog_writes import tool_create
from mcp_app.services.credentials import credential_create
from mcp_app.services.drafts import draft_create, live_entry
from mcp_app.services.replay import (
    MAX_SAMPLE,
    ReplayConfirmationRequired,
    ReplayError,
    json_diff,
    replay_filter,
    replay_plan,
    replay_results,
    replay_run,
    replay_summary,
)
from tests.support.catalog import make_endpoint
from tests.support.recorded_calls import client_call, flushed
from tests.support.upstream import Upstream, run_upstream

pytestmark = pytest.mark.django_db(transaction=True)

SLUG = "replay"
GREET_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "pin": {"type": "string"}},
    "required": ["name"],
}
TOKEN = "replay-bearer-token-5c1d"
PIN = "pin-7f3e9a"


def call(tool: str, arguments: dict[str, Any], client: str = "agent-a") -> dict[str, Any]:
    return client_call(SLUG, tool, arguments, client)


def client_calls(tool: str) -> int:
    return (
        CallLog.objects.filter(rpc_method="tools/call", target=tool)
        .exclude(http_method=ADMIN_TEST_HTTP_METHOD)
        .count()
    )


def admin_test_calls(tool: str) -> int:
    return CallLog.objects.filter(
        rpc_method="tools/call", target=tool, http_method=ADMIN_TEST_HTTP_METHOD
    ).count()


@pytest.fixture(autouse=True)
def _records_written_within_the_test(transactional_db: None) -> Iterator[None]:
    # The call log's writer thread writes a test's rows late: flushed before the database
    # is emptied, they never land in the next test's count.
    yield
    flushed()


@pytest.fixture
def operator() -> User:
    return User.objects.create_superuser("operator", password="unused-password-123")


@pytest.fixture
def greet() -> Tool:
    endpoint = make_endpoint(SLUG)
    return tool_create(
        name="greet",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "Hello {{ name }}!", "output": "text"},
        description="Greets someone.",
        input_schema=GREET_SCHEMA,
        capture_mode=Tool.Capture.FULL,
        endpoints=[endpoint],
    )


def drafted(user: User, name: str, **changes: Any) -> Draft:
    entry = live_entry("tools", name, user=user)
    assert entry is not None
    entry.update(changes)
    document = {"format": "mcphost-catalog/1", "tools": [entry]}
    return draft_create(title=f"Change {name}", document=document, actor=user)


def test_identical_results_refused_calls_and_changed_results(greet: Tool, operator: User) -> None:
    for name, client in (("Ada", "agent-a"), ("Grace", "agent-b"), ("Bartholomew", "agent-a")):
        call("greet", {"name": name}, client)
    flushed()
    tight = drafted(
        operator,
        "greet",
        input_schema={
            **GREET_SCHEMA,
            "properties": {"name": {"type": "string", "maxLength": 5}},
        },
    )
    reworded = drafted(operator, "greet", config={"template": "Hi {{ name }}!", "output": "text"})
    everything = replay_filter({"sample": 10})

    run = replay_run(tight, tool="greet", filters=everything, user=operator)

    assert (run.calls, run.refused, run.changed, run.identical) == (3, 1, 0, 2)
    assert replay_summary(run) == (
        "of 3 calls: 1 refused by the draft's schema, 0 results changed, 2 identical"
    )
    refused = next(item for item in run.results if item["verdict"] == "refused")
    assert refused["arguments"] == {"name": "Bartholomew"}
    assert refused["draft"]["outcome"] == "refused"
    assert "Invalid arguments" in refused["draft"]["error"]
    assert refused["live"]["outcome"] == "ok"
    # The draft did not run it: no result to diff against.
    assert (refused["draft"]["result"], refused["diff"]) == (None, [])
    identical = [item for item in run.results if item["verdict"] == "identical"]
    assert {item["live"]["result"]["content"][0]["text"] for item in identical} == {
        "Hello Ada!",
        "Hello Grace!",
    }
    assert all(item["diff"] == [] for item in identical)

    changed = replay_run(reworded, tool="greet", filters=everything, user=operator)

    assert (changed.calls, changed.refused, changed.changed, changed.identical) == (3, 0, 3, 0)
    first = changed.results[0]  # newest first: Bartholomew
    assert first["diff"] == [
        {
            "path": "$.content[0].text",
            "change": "changed",
            "live": '"Hello Bartholomew!"',
            "draft": '"Hi Bartholomew!"',
        }
    ]
    assert first["live"]["duration_ms"] >= 0 and first["draft"]["duration_ms"] >= 0
    # Stored: the page can be revisited.
    assert ReplayRun.objects.get(pk=changed.pk).results == changed.results

    only_b = replay_run(
        reworded, tool="greet", filters=replay_filter({"client_name": "agent-b"}), user=operator
    )
    assert [item["arguments"] for item in only_b.results] == [{"name": "Grace"}]

    # Every replayed run is an admin test call in the call log, never client traffic:
    # 3 live + 2 draft, 3 + 3, 1 + 1.
    flushed()
    assert client_calls("greet") == 3
    assert admin_test_calls("greet") == 5 + 6 + 2
    rows = CallLog.objects.filter(http_method=ADMIN_TEST_HTTP_METHOD)
    assert set(rows.values_list("endpoint_id", flat=True)) == {None}
    assert set(rows.values_list("client_name", flat=True)) == {"mcphost admin try-it"}


def test_calls_without_recorded_arguments_are_skipped_and_counted(operator: User) -> None:
    endpoint = make_endpoint(SLUG)
    for name, mode in (("quiet", Tool.Capture.METADATA), ("loud", Tool.Capture.FULL)):
        tool_create(
            name=name,
            kind=Tool.Kind.TEMPLATE,
            config={"template": "Hello {{ name }}!", "output": "text"},
            description="Greets someone.",
            input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
            capture_mode=mode,
            endpoints=[endpoint],
        )
    call("quiet", {"name": "Ada"})
    call("quiet", {"name": "Grace"})
    call("loud", {"name": "Ada"})
    call("loud", {"name": "Ada", "api_key": "sk-live-0000-1111"})  # recorded redacted
    flushed()

    quiet = replay_run(
        drafted(operator, "quiet", description="Quieter."),
        tool="quiet",
        filters=replay_filter({}),
        user=operator,
    )
    loud = replay_run(
        drafted(operator, "loud", description="Louder."),
        tool="loud",
        filters=replay_filter({}),
        user=operator,
    )

    assert (quiet.calls, quiet.skipped_unrecorded, quiet.skipped_redacted) == (0, 2, 0)
    assert replay_summary(quiet) == (
        "of 0 calls: 0 refused by the draft's schema, 0 results changed, 0 identical; "
        "2 skipped (arguments not recorded)"
    )
    assert (loud.calls, loud.skipped_unrecorded, loud.skipped_redacted) == (1, 0, 1)
    assert loud.results[0]["arguments"] == {"name": "Ada"}
    flushed()
    assert admin_test_calls("quiet") == 0


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with run_upstream() as server:
        yield server


def http_tool(upstream: Upstream, **fields: Any) -> Tool:
    credential_create(name="upstream", kind="bearer", secret=TOKEN)
    return tool_create(
        name="lookup",
        kind=Tool.Kind.HTTP,
        config={
            "url": upstream.url("/echo/{item}"),
            "credential": "upstream",
            "allow_networks": ["127.0.0.1/32"],
        },
        description="Asks the upstream.",
        input_schema={
            "type": "object",
            "properties": {"item": {"type": "string"}},
            "required": ["item"],
        },
        capture_mode=Tool.Capture.FULL,
        endpoints=[make_endpoint(SLUG)],
        **fields,
    )


def test_an_http_tool_not_read_only_replays_only_after_confirmation(
    upstream: Upstream, operator: User
) -> None:
    http_tool(upstream)
    call("lookup", {"item": "a"})
    call("lookup", {"item": "b"})
    flushed()
    assert (upstream.hits["/echo/a"], upstream.hits["/echo/b"]) == (1, 1)
    draft = drafted(operator, "lookup", description="Asks the upstream, politely.")
    everything = replay_filter({})

    for confirm in ("", "lookup:3", "greet:2", "lookup"):
        with pytest.raises(ReplayConfirmationRequired, match="'lookup:2'") as refused:
            replay_run(draft, tool="lookup", filters=everything, user=operator, confirm=confirm)
        assert refused.value.expected == "lookup:2"
    assert replay_plan(draft, tool="lookup", filters=everything, user=operator).needs_confirmation
    assert (upstream.hits["/echo/a"], upstream.hits["/echo/b"]) == (1, 1)
    assert not ReplayRun.objects.exists()

    run = replay_run(draft, tool="lookup", filters=everything, user=operator, confirm="lookup:2")

    assert (upstream.hits["/echo/a"], upstream.hits["/echo/b"]) == (3, 3)  # live and draft
    assert run.confirmed and (run.calls, run.identical) == (2, 2)
    # The upstream echoed the credential it received: no view of the replay shows it.
    assert TOKEN not in json.dumps(run.results)
    assert TOKEN not in json.dumps(ReplayRun.objects.get(pk=run.pk).results)
    flushed()
    assert client_calls("lookup") == 2 and admin_test_calls("lookup") == 4


def test_a_read_only_or_idempotent_http_tool_replays_without_confirmation(
    upstream: Upstream, operator: User
) -> None:
    http_tool(upstream, idempotent_hint=True)
    call("lookup", {"item": "a"})
    flushed()
    draft = drafted(operator, "lookup", description="Still idempotent.")

    run = replay_run(draft, tool="lookup", filters=replay_filter({}), user=operator)

    assert not run.confirmed and run.calls == 1 and upstream.hits["/echo/a"] == 3

    # A draft that drops the hint makes its replay need the confirmation again.
    risky = drafted(operator, "lookup", idempotent_hint=None)
    with pytest.raises(ReplayConfirmationRequired):
        replay_run(risky, tool="lookup", filters=replay_filter({}), user=operator)
    assert upstream.hits["/echo/a"] == 3


def test_a_secret_argument_and_a_secret_in_a_result_never_appear(
    greet: Tool, operator: User
) -> None:
    # Live, "pin" is a plain field, recorded in clear; the draft marks it secret and echoes it.
    call("greet", {"name": "Ada", "pin": PIN})
    flushed()
    draft = drafted(
        operator,
        "greet",
        config={"template": '{"greeting": "Hi {{ name }}", "code": "{{ pin }}"}', "output": "json"},
        input_schema={
            **GREET_SCHEMA,
            "properties": {
                "name": {"type": "string"},
                "pin": {"type": "string", "writeOnly": True},
            },
        },
    )

    run = replay_run(draft, tool="greet", filters=replay_filter({}), user=operator)

    assert run.calls == 1 and run.results[0]["verdict"] == "changed"
    assert run.results[0]["arguments"] == {"name": "Ada", "pin": "[redacted]"}
    for stored in (run.results, ReplayRun.objects.get(pk=run.pk).results):
        assert PIN not in json.dumps(stored)
    for payloads in (True, False):
        assert PIN not in json.dumps(replay_results(run, payloads=payloads))
    # Without the payload permission: outcomes only.
    (bare,) = replay_results(run, payloads=False)
    assert "arguments" not in bare and "result" not in bare["draft"]
    assert bare["draft"]["outcome"] == "ok" and bare["verdict"] == "changed"


def test_bad_input_is_refused_and_runs_nothing(greet: Tool, operator: User) -> None:
    call("greet", {"name": "Ada"})
    flushed()
    draft = drafted(operator, "greet", description="Reworded.")
    for data, field in (
        ({"sample": 0}, "sample"),
        ({"sample": MAX_SAMPLE + 1}, "sample"),
        ({"sample": "ten"}, "sample"),
        ({"status": "splendid"}, "status"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"}, "until"),
        ({"endpoint": 7}, "endpoint"),
    ):
        with pytest.raises(ReplayError) as bad:
            replay_filter(data)
        assert field in bad.value.errors, data
    with pytest.raises(ReplayError, match="does not change a tool named 'other'"):
        replay_run(draft, tool="other", filters=replay_filter({}), user=operator)
    with pytest.raises(ReplayError, match="not on an endpoint 'elsewhere'"):
        replay_run(
            draft, tool="greet", filters=replay_filter({"endpoint": "elsewhere"}), user=operator
        )
    assert not ReplayRun.objects.exists()
    flushed()
    assert admin_test_calls("greet") == 0


def test_the_structural_diff_names_paths_and_is_bounded() -> None:
    live = {"a": 1, "b": {"c": [1, 2, 3]}, "gone": True, "odd key": "x"}
    draft = {"a": 2, "b": {"c": [1, 2]}, "new": None, "odd key": "y"}

    changes, more = json_diff(live, draft)

    assert [(change["path"], change["change"]) for change in changes] == [
        ("$.a", "changed"),
        ("$.b.c[2]", "removed"),
        ("$.gone", "removed"),
        ('$["odd key"]', "changed"),
        ("$.new", "added"),
    ]
    assert more == 0
    many, more = json_diff({str(i): i for i in range(100)}, {}, limit=10)
    assert len(many) == 10 and more == 90


def test_each_call_and_the_whole_run_are_bounded(
    operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool_create(
        name="nap",
        kind=Tool.Kind.PYTHON,
        config={"function": "sleep_with_progress"},
        capture_mode=Tool.Capture.FULL,
        endpoints=[make_endpoint(SLUG)],
    )
    call("nap", {"seconds": 1.5, "steps": 1})
    flushed()
    draft = drafted(operator, "nap", description="Naps, reworded.")
    monkeypatch.setattr(replay, "CALL_SECONDS", 0.2)

    run = replay_run(draft, tool="nap", filters=replay_filter({}), user=operator)

    (item,) = run.results
    for side in ("live", "draft"):
        assert (item[side]["outcome"], item[side]["error"]) == (
            "error",
            "Tool timed out after 0.2 s",
        )

    monkeypatch.setattr(replay, "RUN_SECONDS", -1.0)  # spent before the first call
    late = replay_run(draft, tool="nap", filters=replay_filter({}), user=operator)

    assert (late.calls, late.not_run, late.results) == (0, 1, [])
    assert replay_summary(late).endswith("1 not run (the -1 s budget ran out)")
    flushed()
    assert admin_test_calls("nap") == 2


def test_calls_with_policy_masked_arguments_are_skipped_as_redacted(operator: User) -> None:
    # A mask policy writes "[masked:email]" (or its configured replacement) into the logged
    # arguments: replaying that text would run the call with arguments no client sent.
    endpoint = make_endpoint(SLUG)
    Policy.objects.create(
        endpoint=endpoint, name="mask-email", kind="mask", position=1,
        config={"patterns": ["email"]},
    )  # fmt: skip
    Policy.objects.create(
        endpoint=endpoint, name="mask-phone", kind="mask", position=2,
        config={"patterns": ["phone"], "replacement": "<gone {name}>"},
    )  # fmt: skip
    tool_create(
        name="mailer",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "Mail {{ to }}", "output": "text"},
        description="Mails someone.",
        input_schema={"type": "object", "properties": {"to": {"type": "string"}}},
        capture_mode=Tool.Capture.FULL,
        endpoints=[endpoint],
    )
    call("mailer", {"to": "ada@example.org"})
    call("mailer", {"to": "+44 20 7946 0958"})
    call("mailer", {"to": "Ada"})
    flushed()
    logged = CallLog.objects.filter(rpc_method="tools/call", target="mailer").order_by("id")
    assert [row.arguments["to"] for row in logged] == [
        "[masked:email]",
        "<gone phone>",
        "Ada",
    ]

    run = replay_run(
        drafted(operator, "mailer", description="Mails."),
        tool="mailer",
        filters=replay_filter({}),
        user=operator,
    )

    assert (run.calls, run.skipped_unrecorded, run.skipped_redacted) == (1, 0, 2)
    assert [item["arguments"] for item in run.results] == [{"to": "Ada"}]
    assert replay_summary(run).endswith("; 2 skipped (arguments redacted, or masked by a policy)")
