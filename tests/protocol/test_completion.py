"""``completion/complete`` for prompt arguments and resource template variables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types._v2025_11_25 as v2025
import mcp_types._v2026_07_28 as v2026
import pytest

from mcp_app.protocol.catalog import (
    CatalogSnapshot,
    EndpointInfo,
    PromptArgumentDef,
    PromptDef,
)
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import InvalidParams

MakeContext = Callable[..., RequestContext]


def prompt_ref(name: str, argument: str, value: str) -> dict[str, Any]:
    return {
        "ref": {"type": "ref/prompt", "name": name},
        "argument": {"name": argument, "value": value},
    }


def resource_ref(uri: str, argument: str, value: str) -> dict[str, Any]:
    return {
        "ref": {"type": "ref/resource", "uri": uri},
        "argument": {"name": argument, "value": value},
    }


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25", "2026-07-28"])
async def test_prompt_argument_completion_filters_by_prefix_ignoring_case(
    make_ctx: MakeContext, version: str
) -> None:
    result = await handle_request(
        make_ctx(version), "completion/complete", prompt_ref("greet", "name", "AL")
    )
    assert result["completion"] == {"values": ["Alice", "alfred"], "total": 2, "hasMore": False}
    (v2026 if version == "2026-07-28" else v2025).CompleteResult.model_validate(result)
    assert ("resultType" in result) is (version == "2026-07-28")


async def test_template_variable_completion(make_ctx: MakeContext) -> None:
    result = await handle_request(
        make_ctx(), "completion/complete", resource_ref("users://{id}/profile", "id", "a")
    )
    assert result["completion"]["values"] == ["alice", "Albert"]


async def test_variable_without_completions_gets_none(make_ctx: MakeContext) -> None:
    result = await handle_request(
        make_ctx(), "completion/complete", resource_ref("files:///{+path}", "path", "")
    )
    assert result["completion"] == {"values": [], "total": 0, "hasMore": False}


async def test_at_most_100_values_with_total_and_has_more(make_ctx: MakeContext) -> None:
    values = tuple(f"v{i:03d}" for i in range(150))
    prompt = PromptDef(name="p", arguments=(PromptArgumentDef(name="a", completions=values),))
    catalog = CatalogSnapshot(endpoint=EndpointInfo(slug="c"), prompts=(prompt,))
    result = await handle_request(
        make_ctx(catalog=catalog), "completion/complete", prompt_ref("p", "a", "V")
    )
    assert result["completion"]["values"] == list(values[:100])
    assert (result["completion"]["total"], result["completion"]["hasMore"]) == (150, True)


@pytest.mark.spec("2025-11-25", "server/utilities/completion", "invalid names: -32602")
@pytest.mark.parametrize(
    "params",
    [
        prompt_ref("nope", "name", ""),
        prompt_ref("greet", "nope", ""),
        resource_ref("nope://{x}", "x", ""),
        resource_ref("users://{id}/profile", "nope", ""),
        {"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/prompt"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name"}},
        {"ref": {"type": "ref/prompt", "name": "greet"}},
    ],
)
async def test_bad_references_are_invalid_params(
    make_ctx: MakeContext, params: dict[str, Any]
) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(make_ctx(), "completion/complete", params)


async def test_context_arguments_are_accepted(make_ctx: MakeContext) -> None:
    params = {**prompt_ref("greet", "mood", ""), "context": {"arguments": {"name": "Ada"}}}
    result = await handle_request(make_ctx("2025-06-18"), "completion/complete", params)
    assert result["completion"]["values"] == []


class SourceCompleter:
    """A ``Completer`` that completes ``greet``'s arguments itself and nothing else."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str, dict[str, str]]] = []

    async def complete(
        self, item: Any, argument: str, value: str, context_arguments: Any
    ) -> dict[str, Any] | None:
        self.asked.append((item.name, argument, value, dict(context_arguments)))
        if item.name != "greet":
            return None
        return {"values": [f"{value}-from-source"], "total": 1}


async def test_a_completer_answers_for_its_items_and_the_def_for_the_rest(
    make_ctx: MakeContext,
) -> None:
    completer = SourceCompleter()
    ctx = make_ctx(completions=completer)
    params = {**prompt_ref("greet", "name", "al"), "context": {"arguments": {"x": "1"}}}

    sourced = await handle_request(ctx, "completion/complete", params)
    from_def = await handle_request(
        ctx, "completion/complete", resource_ref("users://{id}/profile", "id", "a")
    )

    assert sourced["completion"] == {"values": ["al-from-source"], "total": 1}
    assert from_def["completion"]["values"] == ["alice", "Albert"]
    assert completer.asked[0] == ("greet", "name", "al", {"x": "1"})


async def test_a_completer_is_not_asked_about_unknown_arguments(make_ctx: MakeContext) -> None:
    completer = SourceCompleter()

    with pytest.raises(InvalidParams):
        await handle_request(
            make_ctx(completions=completer), "completion/complete", prompt_ref("greet", "nope", "")
        )

    assert completer.asked == []
