"""Policies around calls at the service level: the write path's checks, the registry of kinds,
the snapshot that carries them, and what the built-in kinds decide (real PostgreSQL)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from mcp_app.models import Endpoint, Policy
from mcp_app.protocol.policies import PROMPTS_GET, TOOLS_CALL, PolicyCall, PolicyRefused
from mcp_app.services.policies import DEFAULT_POLICY_KINDS, get_policy_kinds
from mcp_app.services.policies.base import Decision, PolicyConfigError, PolicyKind
from mcp_app.services.policies.pipeline import EndpointPolicies
from mcp_app.services.policies.writes import policy_delete, policy_save
from mcp_app.services.snapshots import build_snapshot
from tests.support.catalog import make_endpoint

pytestmark = pytest.mark.django_db

LEAK = PolicyCall(TOOLS_CALL, "leak")


class ShoutPolicy(PolicyKind):
    """A kind from outside mcp_app: upper-cases the arguments and text results."""

    kind = "shout"
    label = "Shout"

    def prepare(self, config: Mapping[str, Any]) -> None:
        if config:
            raise PolicyConfigError("shout takes no config.")

    def before(self, prepared: None, call: PolicyCall, arguments: Mapping[str, Any]) -> Decision:
        upper = {name: str(value).upper() for name, value in arguments.items()}
        return Decision("shouted", replacement=upper)

    def after(self, prepared: None, call: PolicyCall, result: Mapping[str, Any]) -> Decision:
        content = [{**block, "text": block["text"].upper()} for block in result["content"]]
        return Decision("shouted", replacement={**result, "content": content})


def _save(endpoint: Endpoint, name: str, kind: str, position: int = 0, **fields: Any) -> Policy:
    policy = Policy(endpoint=endpoint, name=name, kind=kind, position=position, **fields)
    policy_save(policy, actor=None, source="test")
    return policy


def _policies(endpoint: Endpoint) -> EndpointPolicies:
    endpoint.refresh_from_db()
    policies = build_snapshot(endpoint).policies
    assert isinstance(policies, EndpointPolicies)
    return policies


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def test_a_kind_listed_by_dotted_path_in_settings_is_used() -> None:
    endpoint = make_endpoint("shouting")
    with pytest.raises(ValidationError) as refused:
        _save(endpoint, "loud", "shout")
    assert "kind" in refused.value.message_dict
    kinds = [*DEFAULT_POLICY_KINDS, "tests.services.test_policies.ShoutPolicy"]
    with override_settings(MCP_POLICY_KINDS=kinds):
        assert get_policy_kinds()["shout"].label == "Shout"
        _save(endpoint, "loud", "shout")
        decisions: list[dict[str, Any]] = []
        arguments = _policies(endpoint).before(LEAK, {"who": "ann"}, decisions)
        result = _policies(endpoint).after(LEAK, _text("hello"), decisions)
    assert (arguments, result) == ({"who": "ANN"}, _text("HELLO"))
    assert [(d["kind"], d["phase"], d["action"]) for d in decisions] == [
        ("shout", "before", "shouted"),
        ("shout", "after", "shouted"),
    ]
    assert "shout" not in get_policy_kinds()  # the registry follows the setting back


@pytest.mark.parametrize(
    ("kind", "config", "message"),
    [
        ("mask", {"patterns": ["nope"]}, "patterns: Unknown pattern 'nope'"),
        ("mask", {"extra": {"id": "("}}, "extra: Invalid regular expression"),
        ("mask", {"arguments": "yes"}, "arguments: arguments must be true or false."),
        ("mask", {"colour": "red"}, "colour: Unknown key 'colour'"),
        ("mask", ["email"], "The config must be a JSON object."),
        ("deny", {}, "patterns: Name at least one pattern."),
        ("deny", {"patterns": ["["]}, "patterns: Invalid regular expression"),
        ("deny", {"patterns": "x"}, "patterns: patterns must be a list."),
        ("max_result_size", {"max_bytes": 0}, "max_bytes: max_bytes must be a whole number"),
        ("max_result_size", {"max_bytes": "10"}, "max_bytes: max_bytes must be a whole number"),
        ("max_result_size", {"max_bytes": True}, "max_bytes: max_bytes must be a whole number"),
        ("confirm_destructive", {"message": " "}, "message: message must be text of 1 to 500"),
        ("confirm_destructive", {"unmarked": 1}, "unmarked: unmarked must be true or false."),
    ],
)
def test_a_bad_config_is_refused_with_its_reason_and_nothing_is_saved(
    kind: str, config: Any, message: str
) -> None:
    endpoint = make_endpoint("strict")
    version = Endpoint.objects.get(pk=endpoint.pk).catalog_version
    with pytest.raises(ValidationError) as refused:
        _save(endpoint, "bad", kind, config=config)
    assert refused.value.message_dict["config"][0].startswith(message)
    assert not Policy.objects.exists()
    assert Endpoint.objects.get(pk=endpoint.pk).catalog_version == version


def test_policy_names_are_unique_per_endpoint() -> None:
    endpoint = make_endpoint("named")
    _save(endpoint, "mask", "mask")
    with pytest.raises(ValidationError) as refused:
        _save(endpoint, "mask", "deny", config={"patterns": ["x"]})
    assert "__all__" in refused.value.message_dict
    assert Policy.objects.count() == 1


def test_an_endpoint_without_policies_carries_none_and_off_ones_are_left_out() -> None:
    endpoint = make_endpoint("plain")
    assert build_snapshot(endpoint).policies is None
    _save(endpoint, "asleep", "mask", mode=Policy.Mode.OFF)
    endpoint.refresh_from_db()
    assert build_snapshot(endpoint).policies is None


def test_saving_and_deleting_a_policy_bumps_the_catalog_version() -> None:
    endpoint = make_endpoint("versioned")
    before = Endpoint.objects.get(pk=endpoint.pk).catalog_version
    policy = _save(endpoint, "mask", "mask")
    saved = Endpoint.objects.get(pk=endpoint.pk).catalog_version
    policy_delete(policy, actor=None, source="test")
    assert before < saved < Endpoint.objects.get(pk=endpoint.pk).catalog_version


def test_order_matters_masking_before_the_size_cap_lets_the_result_through() -> None:
    text = " ".join(f"someone.with.a.long.name{i}@example.com" for i in range(5))
    masked_first = make_endpoint("mask-first")
    _save(masked_first, "mask", "mask", 1)
    _save(masked_first, "cap", "max_result_size", 2, config={"max_bytes": 150})
    capped_first = make_endpoint("cap-first")
    _save(capped_first, "cap", "max_result_size", 1, config={"max_bytes": 150})
    _save(capped_first, "mask", "mask", 2)

    passed = _policies(masked_first).after(LEAK, _text(text), [])
    assert passed == _text(" ".join(["[masked:email]"] * 5))
    with pytest.raises(PolicyRefused) as refused:
        _policies(capped_first).after(LEAK, _text(text), [])
    assert refused.value.policy == "cap"


def test_a_permissive_deny_records_what_it_would_refuse_and_lets_the_call_run() -> None:
    endpoint = make_endpoint("watching")
    config = {"patterns": ["(?i)rm -rf"], "reason": "no"}
    _save(endpoint, "watch", "deny", mode=Policy.Mode.PERMISSIVE, config=config)
    decisions: list[dict[str, Any]] = []
    arguments = {"command": "rm -rf /"}
    assert _policies(endpoint).before(LEAK, arguments, decisions) == arguments
    assert decisions == [
        {
            "policy": "watch",
            "kind": "deny",
            "mode": "permissive",
            "phase": "before",
            "action": "refused",
            "detail": "argument 'command' matched",
            "applied": False,
        }
    ]


def test_deny_looks_only_at_the_fields_it_names_at_any_depth() -> None:
    endpoint = make_endpoint("fields")
    _save(endpoint, "deny", "deny", config={"patterns": ["secret"], "fields": ["query"]})
    policies = _policies(endpoint)
    policies.before(LEAK, {"note": "secret"}, [])
    with pytest.raises(PolicyRefused) as refused:
        policies.before(LEAK, {"query": {"terms": ["a", "top secret"]}}, [])
    assert refused.value.reason == "argument 'query' matches a deny pattern"


def test_a_target_limits_a_policy_to_one_tool_or_prompt() -> None:
    endpoint = make_endpoint("targeted")
    _save(endpoint, "deny", "deny", target="leak", config={"patterns": ["x"]})
    policies = _policies(endpoint)
    policies.before(PolicyCall(TOOLS_CALL, "other"), {"a": "x"}, [])
    policies.before(PolicyCall(PROMPTS_GET, "other"), {"a": "x"}, [])
    with pytest.raises(PolicyRefused):
        policies.before(LEAK, {"a": "x"}, [])


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("card 4111 1111 1111 1111.", "card [masked:card]."),
        ("card 4111-1111-1111-1112.", "card 4111-1111-1111-1112."),  # fails the Luhn check
        ("call +44 20 7946 0958 now", "call [masked:phone] now"),
        ("call (415) 555-0100 now", "call [masked:phone] now"),
        ("on 2026-11-26 at 10:00", "on 2026-11-26 at 10:00"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "token [masked:api_key]"),
        ("AKIAABCDEFGHIJKLMNOP", "[masked:api_key]"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwx", "Authorization: [masked:bearer]"),
        ("jwt eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl", "jwt [masked:jwt]"),
        ("write to a.b+c@mail.example.org", "write to [masked:email]"),
    ],
)
def test_the_mask_finds_common_secrets_and_personal_data(text: str, masked: str) -> None:
    endpoint = make_endpoint("masking")
    _save(endpoint, "mask", "mask")
    assert _policies(endpoint).after(LEAK, _text(text), []) == _text(masked)


def test_mask_patterns_and_replacement_are_configurable() -> None:
    endpoint = make_endpoint("configured")
    config = {"patterns": ["email"], "extra": {"ticket": r"TCK-\d+"}, "replacement": "<{name}>"}
    _save(endpoint, "mask", "mask", config=config)
    result = {"content": [], "structuredContent": {"who": "x@example.com", "ref": "TCK-42"}}
    decisions: list[dict[str, Any]] = []
    masked = _policies(endpoint).after(LEAK, result, decisions)
    assert masked == {"content": [], "structuredContent": {"who": "<email>", "ref": "<ticket>"}}
    assert decisions[0]["detail"] == "1 email, 1 ticket"
    # Masked text matches nothing again: a second pass (web after worker) changes nothing.
    assert _policies(endpoint).after(LEAK, masked, []) == masked


def test_a_policy_whose_kind_is_gone_refuses_the_calls_it_guards() -> None:
    endpoint = make_endpoint("orphaned")
    kinds = [*DEFAULT_POLICY_KINDS, "tests.services.test_policies.ShoutPolicy"]
    with override_settings(MCP_POLICY_KINDS=kinds):
        _save(endpoint, "loud", "shout")
    with pytest.raises(PolicyRefused) as refused:
        _policies(endpoint).before(LEAK, {}, [])
    assert refused.value.message == "Refused by policy loud: the policy cannot run (see its config)"


@pytest.mark.parametrize(
    ("annotations", "unmarked", "asked"),
    [
        ({"destructiveHint": True}, False, True),
        ({"destructiveHint": False}, True, False),
        ({}, False, False),
        ({}, True, True),  # the spec's default: not read-only, so destructive
        ({"readOnlyHint": True}, True, False),
    ],
)
def test_confirmation_is_asked_for_tools_marked_destructive(
    annotations: dict[str, Any], unmarked: bool, asked: bool
) -> None:
    endpoint = make_endpoint("confirming")
    config = {"unmarked": unmarked, "message": "Run {tool}?"}
    _save(endpoint, "confirm", "confirm_destructive", config=config)
    _save(endpoint, "watch", "confirm_destructive", 1, mode=Policy.Mode.PERMISSIVE)
    decisions: list[dict[str, Any]] = []
    call = PolicyCall(TOOLS_CALL, "wipe", annotations)
    questions = _policies(endpoint).confirmations(call, {}, decisions)
    assert questions == ([("confirm", "Run wipe?")] if asked else [])
    # The permissive one only records that it would have asked (default: marked tools only).
    would = annotations.get("destructiveHint") is True
    assert [(d["policy"], d["action"]) for d in decisions] == (
        [("watch", "would ask")] if would else []
    )
