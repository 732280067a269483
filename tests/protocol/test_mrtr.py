"""Asking the client: sealed requestState (2026-07-28 MRTR) and the legacy live round trip."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import pytest

from mcp_app.protocol import errors, mrtr
from mcp_app.protocol.catalog import (
    CatalogSnapshot,
    EndpointInfo,
    PromptArgumentDef,
    PromptDef,
    PromptMessageDef,
    ToolDef,
)
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import InvalidParams
from mcp_app.protocol.results import ToolResult
from tests.protocol.conftest import MakeContext

SECRET = b"mrtr-test-secret"
BINDING = mrtr.Binding(
    endpoint="demo", principal="", method="tools/call", request_digest=mrtr.request_digest("t", {})
)
MODERN = "2026-07-28"
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def test_a_sealed_state_gives_back_its_answers() -> None:
    state = mrtr.seal(secret=SECRET, binding=BINDING, answers={"k": {"action": "accept"}}, now=1000)
    assert mrtr.unseal(state, secret=SECRET, binding=BINDING, now=1001) == {
        "k": {"action": "accept"}
    }


@pytest.mark.spec("2026-07-28", "basic/patterns/mrtr", "integrity-protect requestState")
def test_a_tampered_state_is_refused() -> None:
    state = mrtr.seal(secret=SECRET, binding=BINDING, answers={"k": 1}, now=1000)
    version, body, mac = state.split(".")
    forged = mrtr.seal(secret=b"another key", binding=BINDING, answers={"k": 2}, now=1000)
    for bad in (f"{version}.{forged.split('.')[1]}.{mac}", state[:-2] + "AA", "garbage", ""):
        with pytest.raises(InvalidParams):
            mrtr.unseal(bad, secret=SECRET, binding=BINDING, now=1001)


def test_an_expired_state_is_refused() -> None:
    state = mrtr.seal(secret=SECRET, binding=BINDING, answers={}, now=1000, ttl_seconds=10)
    with pytest.raises(InvalidParams, match="expired"):
        mrtr.unseal(state, secret=SECRET, binding=BINDING, now=1011)


@pytest.mark.parametrize(
    "other",
    [
        mrtr.Binding("other", "", "tools/call", BINDING.request_digest),
        mrtr.Binding("demo", "someone", "tools/call", BINDING.request_digest),
        mrtr.Binding("demo", "", "tools/call", mrtr.request_digest("t", {"a": 1})),
    ],
    ids=["endpoint", "principal", "arguments"],
)
def test_a_state_is_refused_for_another_request(other: mrtr.Binding) -> None:
    state = mrtr.seal(secret=SECRET, binding=BINDING, answers={}, now=1000)
    with pytest.raises(InvalidParams, match="another request"):
        mrtr.unseal(state, secret=SECRET, binding=other, now=1001)


async def two_questions(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    first = await ctx.elicit("First?", FORM)
    second = await ctx.elicit("Second?", FORM)
    return ToolResult.text(f"{first['action']} then {second['action']}")


def asking_catalog() -> CatalogSnapshot:
    tool = ToolDef(
        name="ask",
        description="Asks twice.",
        input_schema={"type": "object"},
        binding=two_questions,
    )
    return CatalogSnapshot(endpoint=EndpointInfo(slug="demo"), tools=(tool,))


ELICITING = {"elicitation": {"form": {}}}


@pytest.mark.spec("2026-07-28", "basic/patterns/mrtr", "retry with inputResponses and requestState")
async def test_a_modern_call_asks_round_by_round_until_it_completes(make_ctx: MakeContext) -> None:
    def ctx() -> Any:
        return make_ctx(
            MODERN, catalog=asking_catalog(), client_capabilities=ELICITING, state_secret=SECRET
        )

    first = await handle_request(ctx(), "tools/call", {"name": "ask", "arguments": {}})
    assert first["resultType"] == "input_required"
    assert "ttlMs" not in first
    assert first["inputRequests"] == {
        "elicitation-1": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "First?", "requestedSchema": FORM},
        }
    }
    second = await handle_request(
        ctx(),
        "tools/call",
        {
            "name": "ask",
            "arguments": {},
            "inputResponses": {"elicitation-1": {"action": "accept", "content": {"ok": True}}},
            "requestState": first["requestState"],
        },
    )
    assert list(second["inputRequests"]) == ["elicitation-2"]
    # The first answer travels in the new state; the client only sends the new one.
    done = await handle_request(
        ctx(),
        "tools/call",
        {
            "name": "ask",
            "arguments": {},
            "inputResponses": {"elicitation-2": {"action": "decline"}},
            "requestState": second["requestState"],
        },
    )
    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "accept then decline"}]


async def test_a_retry_leaves_its_request_context_as_it_was(make_ctx: MakeContext) -> None:
    # The answers and the held run a retry brings go to the tool with the call (CallInputs),
    # not through fields of the request's context that later steps would read back.
    ctx = make_ctx(
        MODERN, catalog=asking_catalog(), client_capabilities=ELICITING, state_secret=SECRET
    )
    first = await handle_request(ctx, "tools/call", {"name": "ask", "arguments": {}})
    before = dataclasses.replace(ctx)
    second = await handle_request(
        ctx,
        "tools/call",
        {
            "name": "ask",
            "arguments": {},
            "inputResponses": {"elicitation-1": {"action": "accept"}},
            "requestState": first["requestState"],
        },
    )
    assert list(second["inputRequests"]) == ["elicitation-2"]
    assert ctx == before


async def test_a_state_replayed_with_other_arguments_is_invalid_params(
    make_ctx: MakeContext,
) -> None:
    ctx = make_ctx(
        MODERN, catalog=asking_catalog(), client_capabilities=ELICITING, state_secret=SECRET
    )
    first = await handle_request(ctx, "tools/call", {"name": "ask", "arguments": {}})
    with pytest.raises(InvalidParams):
        await handle_request(
            ctx,
            "tools/call",
            {"name": "ask", "arguments": {"x": 1}, "requestState": first["requestState"]},
        )


async def test_a_modern_call_without_the_capability_is_missing_capability(
    make_ctx: MakeContext,
) -> None:
    ctx = make_ctx(MODERN, catalog=asking_catalog(), state_secret=SECRET)
    with pytest.raises(errors.MissingClientCapability) as excinfo:
        await handle_request(ctx, "tools/call", {"name": "ask", "arguments": {}})
    assert excinfo.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


class RecordingRequester:
    """A legacy client that answers every question with the next canned answer."""

    def __init__(self, *answers: Mapping[str, Any]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        self.asked.append((method, dict(params)))
        return self.answers.pop(0)


async def test_a_legacy_call_asks_live_and_continues(make_ctx: MakeContext) -> None:
    requester = RecordingRequester({"action": "accept"}, {"action": "cancel"})
    ctx = make_ctx(
        "2025-06-18",
        catalog=asking_catalog(),
        client_capabilities={"elicitation": {}},
        client_requests=requester,
    )
    done = await handle_request(ctx, "tools/call", {"name": "ask", "arguments": {}})
    assert done["content"] == [{"type": "text", "text": "accept then cancel"}]
    # 2025-06-18 elicitation has no "mode" field (form was the only mode).
    assert requester.asked[0] == (
        "elicitation/create",
        {"message": "First?", "requestedSchema": FORM},
    )


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
async def test_elicitation_before_2025_06_18_is_a_tool_error(
    make_ctx: MakeContext, version: str
) -> None:
    ctx = make_ctx(version, catalog=asking_catalog(), client_capabilities={"elicitation": {}})
    result = await handle_request(ctx, "tools/call", {"name": "ask", "arguments": {}})
    assert result["isError"] is True
    assert "no elicitation" in result["content"][0]["text"]


def test_a_state_carries_its_expiry() -> None:
    now = time.time()
    state = mrtr.seal(secret=SECRET, binding=BINDING, answers={}, now=now, ttl_seconds=60)
    mrtr.unseal(state, secret=SECRET, binding=BINDING, now=now + 59)
    with pytest.raises(InvalidParams):
        mrtr.unseal(state, secret=SECRET, binding=BINDING, now=now + 61)


async def asks_three_at_once(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    answers = await ctx.ask(
        {
            "form": ctx.form_question("Name?", FORM),
            "model": ctx.sampling_question([], max_tokens=5),
            "roots": ctx.roots_question(),
        }
    )
    return ToolResult.text(",".join(sorted(answers)))


def catalog_with(function: Any) -> CatalogSnapshot:
    tool = ToolDef(
        name="ask", description="Asks.", input_schema={"type": "object"}, binding=function
    )
    return CatalogSnapshot(endpoint=EndpointInfo(slug="demo"), tools=(tool,))


EVERYTHING = {"elicitation": {}, "sampling": {}, "roots": {}}


async def test_several_questions_go_out_in_one_round(make_ctx: MakeContext) -> None:
    def ctx() -> Any:
        return make_ctx(
            MODERN,
            catalog=catalog_with(asks_three_at_once),
            client_capabilities=EVERYTHING,
            state_secret=SECRET,
        )

    first = await handle_request(ctx(), "tools/call", {"name": "ask", "arguments": {}})
    assert sorted(first["inputRequests"]) == ["form", "model", "roots"]
    done = await handle_request(
        ctx(),
        "tools/call",
        {
            "name": "ask",
            "arguments": {},
            "requestState": first["requestState"],
            "inputResponses": {
                "form": {"action": "accept", "content": {"ok": True}},
                "model": {"role": "assistant", "content": {"type": "text", "text": "hi"}},
                "roots": {"roots": []},
            },
        },
    )
    assert done["content"] == [{"type": "text", "text": "form,model,roots"}]


@pytest.mark.spec("2026-07-28", "basic/patterns/mrtr", "missing answers SHOULD be re-requested")
@pytest.mark.parametrize(
    "responses",
    [{"elicitation-1": 12345}, {"elicitation-1": {"action": "maybe"}}, {"wrong_key": {}}, None],
    ids=["not-an-object", "unknown-action", "other-key", "null"],
)
async def test_an_unusable_answer_is_asked_again(make_ctx: MakeContext, responses: Any) -> None:
    ctx = make_ctx(
        MODERN, catalog=asking_catalog(), client_capabilities=ELICITING, state_secret=SECRET
    )
    again = await handle_request(
        ctx, "tools/call", {"name": "ask", "arguments": {}, "inputResponses": responses}
    )
    assert again["resultType"] == "input_required"
    assert list(again["inputRequests"]) == ["elicitation-1"]


async def test_a_legacy_call_asks_several_questions_one_after_another(
    make_ctx: MakeContext,
) -> None:
    requester = RecordingRequester(
        {"action": "accept"}, {"role": "assistant", "content": {}}, {"roots": []}
    )
    ctx = make_ctx(
        "2025-11-25",
        catalog=catalog_with(asks_three_at_once),
        client_capabilities=EVERYTHING,
        client_requests=requester,
    )
    done = await handle_request(ctx, "tools/call", {"name": "ask", "arguments": {}})
    assert done["content"] == [{"type": "text", "text": "form,model,roots"}]
    assert [method for method, _ in requester.asked] == [
        "elicitation/create",
        "sampling/createMessage",
        "roots/list",
    ]


def prompt_catalog() -> CatalogSnapshot:
    prompt = PromptDef(
        name="brief",
        description="Briefs on a topic.",
        arguments=(PromptArgumentDef(name="topic", title="Topic", required=True),),
        messages=(PromptMessageDef(role="user", text="Brief me on {topic}."),),
    )
    return CatalogSnapshot(endpoint=EndpointInfo(slug="demo"), prompts=(prompt,))


@pytest.mark.spec("2026-07-28", "basic/patterns/mrtr", "prompts/get MAY answer input_required")
async def test_a_missing_prompt_argument_is_asked_from_a_2026_client(make_ctx: MakeContext) -> None:
    def ctx() -> Any:
        return make_ctx(
            MODERN, catalog=prompt_catalog(), client_capabilities=ELICITING, state_secret=SECRET
        )

    asked = await handle_request(ctx(), "prompts/get", {"name": "brief"})
    assert asked["resultType"] == "input_required"
    form = asked["inputRequests"]["prompt_arguments"]["params"]["requestedSchema"]
    assert form == {
        "type": "object",
        "properties": {"topic": {"type": "string", "title": "Topic"}},
        "required": ["topic"],
    }
    done = await handle_request(
        ctx(),
        "prompts/get",
        {
            "name": "brief",
            "requestState": asked["requestState"],
            "inputResponses": {
                "prompt_arguments": {"action": "accept", "content": {"topic": "MCP"}}
            },
        },
    )
    assert done["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Brief me on MCP."}}
    ]


async def test_a_declined_prompt_form_is_invalid_params(make_ctx: MakeContext) -> None:
    ctx = make_ctx(
        MODERN, catalog=prompt_catalog(), client_capabilities=ELICITING, state_secret=SECRET
    )
    with pytest.raises(InvalidParams, match="topic"):
        await handle_request(
            ctx,
            "prompts/get",
            {"name": "brief", "inputResponses": {"prompt_arguments": {"action": "decline"}}},
        )


@pytest.mark.parametrize(
    ("version", "capabilities"),
    [("2025-11-25", {"elicitation": {}}), (MODERN, {}), (MODERN, {"elicitation": {"url": {}}})],
    ids=["legacy", "no-elicitation", "url-only"],
)
async def test_without_a_form_capable_2026_client_a_missing_argument_is_invalid_params(
    make_ctx: MakeContext, version: str, capabilities: dict[str, Any]
) -> None:
    ctx = make_ctx(version, catalog=prompt_catalog(), client_capabilities=capabilities)
    with pytest.raises(InvalidParams, match="topic"):
        await handle_request(ctx, "prompts/get", {"name": "brief"})


async def asks_for_a_url(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    answer = await ctx.elicit_url("Sign in to continue.", "https://auth.example/start")
    return ToolResult.text(str(answer["action"]))


@pytest.mark.spec("2025-11-25", "client/elicitation", "URL mode carries an elicitationId")
async def test_url_elicitation_carries_an_id_in_2025_11_25_and_none_in_2026(
    make_ctx: MakeContext,
) -> None:
    requester = RecordingRequester({"action": "accept"})
    legacy = make_ctx(
        "2025-11-25",
        catalog=catalog_with(asks_for_a_url),
        client_capabilities={"elicitation": {"url": {}}},
        client_requests=requester,
    )
    await handle_request(legacy, "tools/call", {"name": "ask", "arguments": {}})
    method, params = requester.asked[0]
    assert (method, params["mode"], params["url"]) == (
        "elicitation/create",
        "url",
        "https://auth.example/start",
    )
    assert len(params["elicitationId"]) >= 16
    modern = make_ctx(
        MODERN,
        catalog=catalog_with(asks_for_a_url),
        client_capabilities={"elicitation": {"url": {}}},
        state_secret=SECRET,
    )
    asked = await handle_request(modern, "tools/call", {"name": "ask", "arguments": {}})
    (request,) = asked["inputRequests"].values()
    assert request["params"] == {
        "mode": "url",
        "message": "Sign in to continue.",
        "url": "https://auth.example/start",
    }


async def test_a_form_only_client_cannot_be_sent_to_a_url(make_ctx: MakeContext) -> None:
    ctx = make_ctx(
        MODERN,
        catalog=catalog_with(asks_for_a_url),
        client_capabilities={"elicitation": {}},
        state_secret=SECRET,
    )
    with pytest.raises(errors.MissingClientCapability) as excinfo:
        await handle_request(ctx, "tools/call", {"name": "ask", "arguments": {}})
    assert excinfo.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}


def test_a_state_names_the_held_run_it_resumes_instead_of_answers() -> None:
    state = mrtr.seal(secret=SECRET, binding=BINDING, answers={}, now=1000, continuation="h/2")
    assert mrtr.unseal_state(state, secret=SECRET, binding=BINDING, now=1001) == mrtr.Unsealed(
        {}, "h/2"
    )
    plain = mrtr.seal(secret=SECRET, binding=BINDING, answers={}, now=1000)
    assert mrtr.unseal_state(plain, secret=SECRET, binding=BINDING, now=1001).continuation == ""


class HeldRounds:
    """A held run's rounds, as services/continuations would bring them back (in memory)."""

    def __init__(self, *rounds: Mapping[str, Any]) -> None:
        self.rounds = list(rounds)
        self.asked: list[dict[str, Any]] = []

    async def ask(self, requests: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
        self.asked.append(dict(requests))
        return self.rounds.pop(0)


async def test_a_held_run_waits_for_its_answers_and_asks_again_for_unusable_ones(
    make_ctx: MakeContext,
) -> None:
    ctx = ToolCallContext(make_ctx(MODERN, client_capabilities=ELICITING), "ask")
    held = ctx.held = HeldRounds({"q": {"content": {}}}, {"q": {"action": "accept"}})
    answer = await ctx.elicit("Sure?", FORM, key="q")
    # Neither InputRequired nor a second run: the answer came back to the same call.
    assert answer == {"action": "accept"}
    assert [list(round_) for round_ in held.asked] == [["q"], ["q"]]
