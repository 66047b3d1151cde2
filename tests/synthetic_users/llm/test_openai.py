"""The OpenAI-compatible adapter against a local Chat Completions server: requests and errors."""

from __future__ import annotations

import email.utils
import json
import socket
import time
from typing import TYPE_CHECKING

import pytest

from synthetic_users._llm._base import (
    MalformedToolCall,
    ModelRateLimited,
    ModelRefused,
    ModelTimeout,
    ModelUnavailable,
    ToolCall,
    Usage,
)
from synthetic_users._llm._openai import OpenAIChatModel
from synthetic_users._llm._prompt import FINISH_ONLY_INSTRUCTION, tool_specs

from ._turns import exchange, turn_request
from ._wire import (
    OPENAI_PATH,
    Reply,
    WireServer,
    openai_completion,
    openai_error,
    openai_tool_call,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

CLICK = openai_tool_call("call_abc", "click", {"ref": "g3e7", "ease": 6})


@pytest.fixture
def wire() -> Iterator[WireServer]:
    with WireServer(OPENAI_PATH) as server:
        yield server


@pytest.fixture
async def model(wire: WireServer) -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel(
        "qwen-test", base_url=f"{wire.base_url}/v1", api_key="sk-test", timeout_s=5.0
    ) as chat:
        yield chat


async def test_a_tool_call_becomes_the_decision_with_its_id_and_usage(
    wire: WireServer, model: OpenAIChatModel
) -> None:
    wire.script(Reply(body=openai_completion(tool_calls=[CLICK], usage=(1200, 31))))

    decision = await model.decide(turn_request())

    assert decision.call == ToolCall("click", {"ref": "g3e7", "ease": 6}, "call_abc")
    assert decision.reason is None
    assert decision.usage == Usage(input_tokens=1200, output_tokens=31)


async def test_the_request_offers_every_action_requires_one_call_and_sends_the_key(
    wire: WireServer, model: OpenAIChatModel
) -> None:
    wire.script(Reply(body=openai_completion(tool_calls=[CLICK])))
    request = turn_request()

    await model.decide(request)

    (sent,) = wire.requests
    assert sent.path == OPENAI_PATH
    assert sent.headers["authorization"] == "Bearer sk-test"
    body = sent.body
    assert body["model"] == "qwen-test"
    assert body["tool_choice"] == "required"
    assert body["parallel_tool_calls"] is False
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for spec in tool_specs()
    ]
    assert [message["role"] for message in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"] == request.system_prompt
    page = body["messages"][1]["content"]
    assert request.observation.text in page
    assert "Step 3 of 12." in page
    for unset in ("max_tokens", "max_completion_tokens", "temperature", "seed"):
        assert unset not in body


async def test_text_beside_the_call_is_the_reason(wire: WireServer, model: OpenAIChatModel) -> None:
    wire.script(
        Reply(body=openai_completion(content="  The big button says Pay.  ", tool_calls=[CLICK]))
    )

    decision = await model.decide(turn_request())

    assert decision.reason == "The big button says Pay."


async def test_history_replays_each_turn_as_page_call_and_result_with_paired_ids(
    wire: WireServer, model: OpenAIChatModel
) -> None:
    wire.script(Reply(body=openai_completion(tool_calls=[CLICK])))
    history = (
        exchange(call_id="call_first", reason="Add it to the cart.", page="# Scarves page"),
        # a turn decided by a model that gives no ids (scripted, heuristic)
        exchange(
            "type",
            {"ref": "g2e9", "text": "scarf", "ease": 3},
            ok=False,
            summary="error element_not_found: g2e9",
            page="# Cart page",
        ),
        exchange(page="# Cart page again"),
    )

    await model.decide(turn_request(history=history))

    messages = wire.requests[0].body["messages"]
    roles = [message["role"] for message in messages]
    assert roles == ["system"] + ["user", "assistant", "tool"] * 3 + ["user"]
    ids = [message["tool_calls"][0]["id"] for message in messages if message["role"] == "assistant"]
    assert [message["tool_call_id"] for message in messages if message["role"] == "tool"] == ids
    assert len(set(ids)) == 3
    assert messages[1]["content"] == "# Scarves page"
    first_call = messages[2]["tool_calls"][0]
    assert messages[2]["content"] == "Add it to the cart."
    assert first_call["id"] == "call_first"
    assert first_call["function"] == {
        "name": "click",
        "arguments": json.dumps({"ref": "g2e5", "ease": 6}),
    }
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "call_first",
        "content": "done: clicked 'Add to cart'",
    }
    second_call = messages[5]["tool_calls"][0]
    assert second_call["id"]
    assert messages[6]["tool_call_id"] == second_call["id"] != first_call["id"]
    assert messages[6]["content"] == "failed (element_not_found): error element_not_found: g2e9"
    assert json.loads(second_call["function"]["arguments"]) == {
        "ref": "g2e9",
        "text": "scarf",
        "ease": 3,
    }


async def test_when_the_budget_is_spent_only_finish_is_offered_and_forced(
    wire: WireServer, model: OpenAIChatModel
) -> None:
    finish = openai_tool_call("call_end", "finish", {"success": False, "summary": "I gave up."})
    wire.script(Reply(body=openai_completion(tool_calls=[finish])))

    decision = await model.decide(turn_request(must_finish=True, turn=12))

    body = wire.requests[0].body
    assert [tool["function"]["name"] for tool in body["tools"]] == ["finish"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "finish"}}
    assert FINISH_ONLY_INSTRUCTION in body["messages"][-1]["content"]
    assert decision.call.name == "finish"


async def test_a_call_of_a_tool_not_offered_this_turn_is_malformed(
    wire: WireServer, model: OpenAIChatModel
) -> None:
    wire.script(Reply(body=openai_completion(tool_calls=[CLICK])))

    with pytest.raises(MalformedToolCall, match="'click', which was not offered") as caught:
        await model.decide(turn_request(must_finish=True))

    assert "click" in caught.value.raw


async def test_a_refusal_is_model_refused(wire: WireServer, model: OpenAIChatModel) -> None:
    wire.script(Reply(body=openai_completion(refusal="I can't help with buying things.")))

    with pytest.raises(ModelRefused, match="buying things"):
        await model.decide(turn_request())


async def test_a_content_filter_stop_is_model_refused(
    wire: WireServer, model: OpenAIChatModel
) -> None:
    wire.script(Reply(body=openai_completion(content="", finish_reason="content_filter")))

    with pytest.raises(ModelRefused, match="content filter"):
        await model.decide(turn_request())


@pytest.mark.parametrize(
    ("tool_calls", "content", "expected"),
    [
        ([openai_tool_call("c1", "click", "{'ref': g3e7")], None, "not JSON"),
        ([openai_tool_call("c1", "click", "[1, 2]")], None, "not a JSON object"),
        ([openai_tool_call("c1", "delete_account", {"ease": 1})], None, "not offered"),
        (None, "I would click Pay now.", "got no tool call"),
        ([CLICK, openai_tool_call("c2", "react", {"ease": 2})], None, "got 2 tool calls"),
    ],
    ids=["arguments-not-json", "arguments-not-object", "unknown-tool", "no-call", "two-calls"],
)
async def test_an_answer_that_is_not_one_good_call_is_malformed_with_the_raw_text(
    wire: WireServer,
    model: OpenAIChatModel,
    tool_calls: list[dict[str, object]] | None,
    content: str | None,
    expected: str,
) -> None:
    wire.script(Reply(body=openai_completion(tool_calls=tool_calls, content=content)))

    with pytest.raises(MalformedToolCall, match=expected) as caught:
        await model.decide(turn_request())

    raw = caught.value.raw
    if tool_calls:
        assert all(call["function"]["arguments"] in raw for call in tool_calls)  # type: ignore[index]
    else:
        assert raw == content
    assert caught.value.usage == Usage(120, 9)  # the failed turn's tokens still count


async def test_arguments_sent_as_an_object_and_a_missing_id_are_accepted(
    wire: WireServer, model: OpenAIChatModel
) -> None:
    # Seen from OpenAI-compatible servers: `arguments` as a JSON object, no id and no type.
    loose = {"function": {"name": "click", "arguments": {"ref": "g3e7", "ease": 3}}}
    wire.script(Reply(body=openai_completion(tool_calls=[loose])))

    decision = await model.decide(turn_request())

    assert decision.call == ToolCall("click", {"ref": "g3e7", "ease": 3}, "")


async def test_usage_is_none_when_the_server_reports_none(
    wire: WireServer, model: OpenAIChatModel
) -> None:
    wire.script(Reply(body=openai_completion(tool_calls=[CLICK], usage=None)))

    decision = await model.decide(turn_request())

    assert decision.usage is None


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({}, None),
    ],
    ids=["seconds", "fractional-seconds", "milliseconds-win", "no-header"],
)
async def test_a_429_is_rate_limited_with_the_wait_asked_and_no_hidden_retry(
    wire: WireServer, model: OpenAIChatModel, headers: dict[str, str], wait: float | None
) -> None:
    limited = openai_error("Rate limit reached", kind="requests", code="rate_limit_exceeded")
    wire.script(Reply(429, limited, headers), Reply(body=openai_completion(tool_calls=[CLICK])))

    with pytest.raises(ModelRateLimited, match="Rate limit reached") as caught:
        await model.decide(turn_request())

    assert caught.value.retry_after_s == wait
    assert len(wire.requests) == 1


async def test_a_429_retry_after_date_is_read_as_seconds_from_now(
    wire: WireServer, model: OpenAIChatModel
) -> None:
    later = email.utils.formatdate(time.time() + 120, usegmt=True)
    limited = openai_error("slow down", kind="requests")
    wire.script(Reply(429, limited, {"retry-after": later}))

    with pytest.raises(ModelRateLimited) as caught:
        await model.decide(turn_request())

    assert caught.value.retry_after_s is not None
    assert 100 < caught.value.retry_after_s <= 120


async def test_no_answer_within_the_timeout_is_model_timeout(wire: WireServer) -> None:
    wire.script(Reply(body=openai_completion(tool_calls=[CLICK]), delay_s=30))

    async with OpenAIChatModel(
        "qwen-test", base_url=f"{wire.base_url}/v1", api_key="sk-test", timeout_s=0.3
    ) as impatient:
        with pytest.raises(ModelTimeout):
            await impatient.decide(turn_request())

    assert len(wire.requests) == 1


@pytest.mark.parametrize(
    ("status", "kind"),
    [(500, "server_error"), (401, "invalid_request_error"), (404, "not_found")],
)
async def test_other_http_errors_are_unavailable_and_not_retried(
    wire: WireServer, model: OpenAIChatModel, status: int, kind: str
) -> None:
    wire.script(Reply(status, openai_error("it broke", kind=kind)))

    with pytest.raises(ModelUnavailable, match=f"HTTP {status}"):
        await model.decide(turn_request())

    assert len(wire.requests) == 1


async def test_a_server_that_is_not_there_is_unavailable() -> None:
    with socket.socket() as probe:  # a port nothing listens on once the probe closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async with OpenAIChatModel(
        "qwen-test", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test", timeout_s=5.0
    ) as gone:
        with pytest.raises(ModelUnavailable, match="cannot reach"):
            await gone.decide(turn_request())


async def test_optional_settings_reach_a_compatible_server_under_its_names(
    wire: WireServer,
) -> None:
    wire.script(Reply(body=openai_completion(tool_calls=[CLICK])))

    async with OpenAIChatModel(
        "qwen-test",
        base_url=f"{wire.base_url}/v1",
        api_key="sk-test",
        timeout_s=5.0,
        max_output_tokens=300,
        temperature=0.7,
        seed=11,
    ) as tuned:
        await tuned.decide(turn_request())

    body = wire.requests[0].body
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (300, 0.7, 11)
    assert "max_completion_tokens" not in body


async def test_the_label_names_openai_or_the_compatible_server() -> None:
    async with OpenAIChatModel("gpt-x", base_url=None, api_key="k", timeout_s=1) as hosted:
        assert hosted.label == "openai:gpt-x"
    async with OpenAIChatModel(
        "gpt-x", base_url="https://api.openai.com/v1", api_key="k", timeout_s=1
    ) as explicit:
        assert explicit.label == "openai:gpt-x"
    async with OpenAIChatModel(
        "llama3", base_url="http://127.0.0.1:11434/v1", api_key="k", timeout_s=1
    ) as local:
        assert local.label == "openai-compatible:llama3@127.0.0.1:11434"
