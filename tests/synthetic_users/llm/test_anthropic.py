"""The Anthropic adapter against a local Messages API server: requests and errors."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from synthetic_users._llm._anthropic import AnthropicMessagesModel
from synthetic_users._llm._base import (
    MalformedToolCall,
    ModelRateLimited,
    ModelRefused,
    ModelTimeout,
    ModelUnavailable,
    ToolCall,
    Usage,
)
from synthetic_users._llm._prompt import FINISH_ONLY_INSTRUCTION, tool_specs

from ._turns import exchange, turn_request
from ._wire import (
    ANTHROPIC_PATH,
    Reply,
    WireServer,
    anthropic_error,
    anthropic_message,
    anthropic_text,
    anthropic_tool_use,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

CLICK = anthropic_tool_use("toolu_01A", "click", {"ref": "g3e7", "ease": 6})


@pytest.fixture
def wire() -> Iterator[WireServer]:
    with WireServer(ANTHROPIC_PATH) as server:
        yield server


@pytest.fixture
async def model(wire: WireServer) -> AsyncIterator[AnthropicMessagesModel]:
    async with AnthropicMessagesModel(
        "claude-test", api_key="sk-ant-test", timeout_s=5.0, base_url=wire.base_url
    ) as claude:
        yield claude


async def test_a_tool_use_becomes_the_decision_with_its_id_and_usage(
    wire: WireServer, model: AnthropicMessagesModel
) -> None:
    wire.script(Reply(body=anthropic_message(CLICK)))

    decision = await model.decide(turn_request())

    assert decision.call == ToolCall("click", {"ref": "g3e7", "ease": 6}, "toolu_01A")
    assert decision.reason is None
    assert decision.usage == Usage(input_tokens=310, output_tokens=42)


async def test_cached_input_tokens_count_in_the_input(
    wire: WireServer, model: AnthropicMessagesModel
) -> None:
    usage = {
        "input_tokens": 20,
        "cache_creation_input_tokens": 1500,
        "cache_read_input_tokens": 3000,
        "output_tokens": 40,
    }
    wire.script(Reply(body=anthropic_message(CLICK, usage=usage)))

    decision = await model.decide(turn_request())

    assert decision.usage == Usage(input_tokens=4520, output_tokens=40)


async def test_usage_is_none_when_a_stand_in_reports_none(
    wire: WireServer, model: AnthropicMessagesModel
) -> None:
    body = anthropic_message(CLICK)
    del body["usage"]
    wire.script(Reply(body=body))

    decision = await model.decide(turn_request())

    assert decision.usage is None


async def test_the_request_has_system_tools_any_choice_and_the_api_headers(
    wire: WireServer, model: AnthropicMessagesModel
) -> None:
    wire.script(Reply(body=anthropic_message(CLICK)))
    request = turn_request()

    await model.decide(request)

    (sent,) = wire.requests
    assert sent.path == ANTHROPIC_PATH
    # anthropic 2.10 sends the key as a bearer token (earlier SDKs used `x-api-key`) and pins
    # the API version it was generated for.
    assert sent.headers["authorization"] == "Bearer sk-ant-test"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", sent.headers["anthropic-version"])
    assert sent.headers["x-stainless-retry-count"] == "0"
    body = sent.body
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 1024
    assert body["system"] == [
        {"type": "text", "text": request.system_prompt, "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"] == [
        {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
        for spec in tool_specs()
    ]
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    (only,) = body["messages"]
    assert only["role"] == "user"
    (page,) = only["content"]
    assert page["type"] == "text"
    assert request.observation.text in page["text"]


async def test_text_blocks_beside_the_tool_use_are_the_reason(
    wire: WireServer, model: AnthropicMessagesModel
) -> None:
    wire.script(Reply(body=anthropic_message(anthropic_text("Pay now looks right."), CLICK)))

    decision = await model.decide(turn_request())

    assert decision.reason == "Pay now looks right."


async def test_history_alternates_turns_and_pairs_each_tool_use_with_its_result(
    wire: WireServer, model: AnthropicMessagesModel
) -> None:
    wire.script(Reply(body=anthropic_message(CLICK)))
    history = (
        exchange(call_id="toolu_first", reason="Into the cart.", page="# Scarves page"),
        exchange(call_id="", ok=False, summary="error element_not_found", page="# Cart page"),
        exchange(call_id="call:from/elsewhere", page="# Payment page"),
    )

    await model.decide(turn_request(history=history))

    messages = wire.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"] * 3 + ["user"]
    assert messages[0]["content"] == [{"type": "text", "text": "# Scarves page"}]
    assert messages[1]["content"][0] == {"type": "text", "text": "Into the cart."}
    ids = []
    for said, answer in zip(messages[1::2], messages[2::2], strict=True):
        use = said["content"][-1]
        assert use["type"] == "tool_use"
        result = answer["content"][0]  # the API requires results first in their turn
        assert result["type"] == "tool_result"
        assert result["tool_use_id"] == use["id"]
        ids.append(use["id"])
    assert ids[0] == "toolu_first"
    assert len(set(ids)) == 3
    assert all(use_id.replace("_", "").isalnum() for use_id in ids)
    assert messages[1]["content"][-1]["input"] == {"ref": "g2e5", "ease": 6}
    failed = messages[4]["content"][0]
    assert failed["is_error"] is True
    assert failed["content"] == "failed (element_not_found): error element_not_found"
    assert messages[2]["content"][0]["is_error"] is False
    assert messages[2]["content"][1] == {"type": "text", "text": "# Cart page"}
    assert turn_request().observation.text in messages[-1]["content"][-1]["text"]


async def test_when_the_budget_is_spent_only_finish_is_offered_and_forced(
    wire: WireServer, model: AnthropicMessagesModel
) -> None:
    finish = anthropic_tool_use("toolu_end", "finish", {"success": True, "summary": "Done."})
    wire.script(Reply(body=anthropic_message(finish)))

    decision = await model.decide(turn_request(must_finish=True, turn=12))

    body = wire.requests[0].body
    assert [tool["name"] for tool in body["tools"]] == ["finish"]
    assert body["tool_choice"] == {
        "type": "tool",
        "name": "finish",
        "disable_parallel_tool_use": True,
    }
    assert FINISH_ONLY_INSTRUCTION in body["messages"][-1]["content"][-1]["text"]
    assert decision.call.name == "finish"


async def test_auto_tool_choice_lets_the_model_explain(wire: WireServer) -> None:
    wire.script(Reply(body=anthropic_message(anthropic_text("I'll pay."), CLICK)))

    async with AnthropicMessagesModel(
        "claude-test", api_key="k", timeout_s=5.0, base_url=wire.base_url, tool_choice="auto"
    ) as chatty:
        decision = await chatty.decide(turn_request())

    assert wire.requests[0].body["tool_choice"] == {
        "type": "auto",
        "disable_parallel_tool_use": True,
    }
    assert decision.reason == "I'll pay."


async def test_a_refusal_stop_is_model_refused_with_its_explanation(
    wire: WireServer, model: AnthropicMessagesModel
) -> None:
    details = {"type": "refusal", "category": None, "explanation": "Not something I can do."}
    wire.script(Reply(body=anthropic_message(stop_reason="refusal", stop_details=details)))

    with pytest.raises(ModelRefused, match="Not something I can do") as caught:
        await model.decide(turn_request())

    assert caught.value.usage == Usage(310, 42)


@pytest.mark.parametrize(
    ("content", "stop_reason", "expected"),
    [
        ([anthropic_text("I would press Pay now.")], "end_turn", "got no tool use"),
        ([anthropic_tool_use("toolu_x", "delete_account", {"ease": 1})], "tool_use", "not offered"),
        ([CLICK, anthropic_tool_use("toolu_2", "react", {"ease": 2})], "tool_use", "2 tool uses"),
        ([anthropic_text("Let me think about")], "max_tokens", "cut at max_tokens"),
    ],
    ids=["no-tool-use", "unknown-tool", "two-tool-uses", "cut-off"],
)
async def test_an_answer_that_is_not_one_good_tool_use_is_malformed(
    wire: WireServer,
    model: AnthropicMessagesModel,
    content: list[dict[str, Any]],
    stop_reason: str,
    expected: str,
) -> None:
    wire.script(Reply(body=anthropic_message(*content, stop_reason=stop_reason)))

    with pytest.raises(MalformedToolCall, match=expected) as caught:
        await model.decide(turn_request())

    for block in content:
        assert (block.get("text") or block["name"]) in caught.value.raw


@pytest.mark.parametrize(
    ("status", "kind", "headers", "wait"),
    [
        (429, "rate_limit_error", {"retry-after": "12"}, 12.0),
        (429, "rate_limit_error", {}, None),
        (529, "overloaded_error", {"retry-after": "3"}, 3.0),
        (529, "overloaded_error", {}, None),
    ],
    ids=["429-retry-after", "429-bare", "529-retry-after", "529-bare"],
)
async def test_rate_limits_and_overload_are_rate_limited_with_no_hidden_retry(
    wire: WireServer,
    model: AnthropicMessagesModel,
    status: int,
    kind: str,
    headers: dict[str, str],
    wait: float | None,
) -> None:
    wire.script(Reply(status, anthropic_error(kind, "try later"), headers))

    with pytest.raises(ModelRateLimited, match=f"HTTP {status}") as caught:
        await model.decide(turn_request())

    assert caught.value.retry_after_s == wait
    assert len(wire.requests) == 1


async def test_no_answer_within_the_timeout_is_model_timeout(wire: WireServer) -> None:
    wire.script(Reply(body=anthropic_message(CLICK), delay_s=30))

    async with AnthropicMessagesModel(
        "claude-test", api_key="k", timeout_s=0.3, base_url=wire.base_url
    ) as impatient:
        with pytest.raises(ModelTimeout):
            await impatient.decide(turn_request())


@pytest.mark.parametrize(
    ("status", "kind"),
    [(500, "api_error"), (401, "authentication_error"), (400, "invalid_request_error")],
)
async def test_other_http_errors_are_unavailable_and_not_retried(
    wire: WireServer, model: AnthropicMessagesModel, status: int, kind: str
) -> None:
    wire.script(Reply(status, anthropic_error(kind, "it broke")))

    with pytest.raises(ModelUnavailable, match=f"HTTP {status}"):
        await model.decide(turn_request())

    assert len(wire.requests) == 1


async def test_the_label_names_the_model() -> None:
    async with AnthropicMessagesModel("claude-x", api_key="k", timeout_s=1) as claude:
        assert claude.label == "anthropic:claude-x"
