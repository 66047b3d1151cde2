"""A persona's mind behind Anthropic's Messages API, through the `anthropic` SDK.

One `decide` is one `POST {base_url}/v1/messages`: the persona's system prompt as `system`, the
action catalogue as `tools` (`input_schema`), and the generation's earlier turns replayed as
alternating user / assistant turns, where each assistant turn ends in a `tool_use` block and the
next user turn starts with the `tool_result` block of the same id (the API requires the pairing,
and requires results first in their turn). `tool_choice` is `any` (one call of any tool, no
parallel calls), or `finish` by name once the budget is spent.

With a forced tool choice (`any` or a named tool) Claude writes no text before the call, so a
decision's `reason` is usually None; `tool_choice="auto"` lets it explain itself, at the price of
the odd text-only answer (a `MalformedToolCall` the loop can retry).

How provider failures become `ModelError`s (see `_base`):

    anthropic.RateLimitError (429)         → ModelRateLimited, retry_after_s from the headers
    anthropic.OverloadedError (529)        → ModelRateLimited (see below)
    anthropic.APITimeoutError, our deadline, 408 → ModelTimeout
    other APIStatusError, APIConnectionError, other AnthropicError → ModelUnavailable
    stop_reason "refusal"                  → ModelRefused
    not exactly one `tool_use` of an offered tool → MalformedToolCall

A 529 `overloaded_error` is Anthropic saying it has no capacity right now: like a 429 it is
transient and the remedy is the same (wait, then try again), unlike `ModelUnavailable`'s other
causes (a bad key, a 5xx bug) where waiting may never help. So it is `ModelRateLimited`, with
`retry_after_s` when the response says, which lets the loop's back-off handle both alike.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Final, Literal

import anthropic

from synthetic_users._llm._base import (
    Decision,
    MalformedToolCall,
    ModelError,
    ModelRateLimited,
    ModelRefused,
    ModelTimeout,
    ModelUnavailable,
    ToolCall,
    Usage,
)
from synthetic_users._llm._prompt import (
    FINISH,
    observation_message,
    offered_tools,
    outcome_text,
    system_prompt,
)
from synthetic_users._llm._retry_after import retry_after_s

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anthropic.types import (
        ContentBlockParam,
        Message,
        MessageParam,
        TextBlockParam,
        ToolChoiceParam,
        ToolUnionParam,
    )
    from anthropic.types import Usage as AnthropicUsage

    from synthetic_users._llm._base import ToolSpec, TurnRequest

DEFAULT_MAX_TOKENS: Final = 1024
"""Room for a short reason and one call; the API requires a cap."""

# The Messages API accepts tool_use ids of this shape only.
_TOOL_USE_ID: Final = re.compile(r"^[A-Za-z0-9_-]+$")


class AnthropicMessagesModel:
    """A `Model` that asks Anthropic's Messages API for one tool use.

    Args:
        model: the model name (`claude-…`).
        api_key: the API key (anthropic 2.10 sends it as `Authorization: Bearer …`).
        timeout_s: the whole call's deadline; past it, `decide` raises `ModelTimeout`.
        base_url: the API root; None for Anthropic itself (tests point it at a local server).
        max_retries: the SDK's own retries; keep 0 so the loop sees every failure.
        max_tokens: the answer's cap (`max_tokens`, required by the API). There is no
            temperature: the Messages API of this SDK (2.10) takes no sampling parameters.
        tool_choice: `any` forces a call (no text beside it); `auto` lets the model explain.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        timeout_s: float,
        base_url: str | None = None,
        max_retries: int = 0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        tool_choice: Literal["any", "auto"] = "any",
    ) -> None:
        self._model = model
        self._timeout_s = timeout_s
        self._max_tokens = max_tokens
        self._tool_choice = tool_choice
        self._label = f"anthropic:{model}"
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=max_retries,
            open_telemetry=False,
        )

    @property
    def label(self) -> str:
        """`anthropic:<model>`."""
        return self._label

    @property
    def is_closed(self) -> bool:
        """Whether `aclose` ran."""
        return self._client.is_closed()

    async def aclose(self) -> None:
        """Close the HTTP connections; the model cannot be used afterwards."""
        await self._client.close()

    async def __aenter__(self) -> AnthropicMessagesModel:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def decide(self, request: TurnRequest) -> Decision:
        """Ask for this turn's one action (see the module docstring for the errors)."""
        tools = offered_tools(request)
        message = await self._create(request, tools)
        return parse_message(message, {tool.name for tool in tools})

    async def _create(self, request: TurnRequest, tools: Sequence[ToolSpec]) -> Message:
        try:
            # The SDK's timeout bounds each phase (connect, read, ...); this bounds the whole.
            async with asyncio.timeout(self._timeout_s):
                return await self._client.messages.create(
                    model=self._model,
                    max_tokens=self._max_tokens,
                    system=system_blocks(request),
                    messages=conversation(request),
                    tools=anthropic_tools(tools),
                    tool_choice=tool_choice(request, self._tool_choice),
                )
        except TimeoutError as error:
            raise ModelTimeout(f"{self._label}: no answer within {self._timeout_s:g} s") from error
        except anthropic.AnthropicError as error:
            raise provider_error(self._label, error) from error


def system_blocks(request: TurnRequest) -> list[TextBlockParam]:
    """The system prompt as one text block, marked as a prompt-cache breakpoint.

    The prompt and the tools are the same every turn; the breakpoint lets the API bill them at
    the cached rate from the second turn on (it caches tools, then system, up to the mark).
    """
    text = request.system_prompt or system_prompt(
        request.persona, request.task, request.target_url, request.turn_budget
    )
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def conversation(request: TurnRequest) -> list[MessageParam]:
    """Replayed turns and the current page as strictly alternating user / assistant messages."""
    messages: list[MessageParam] = []
    pending: list[ContentBlockParam] = []  # the next user turn: results first, then the page
    for index, exchange in enumerate(request.history, start=1):
        use_id = exchange.call.call_id
        if not _TOOL_USE_ID.match(use_id):  # none (scripted, heuristic) or another provider's
            use_id = f"toolu_turn_{index}"
        pending.append({"type": "text", "text": exchange.observation_text})
        messages.append({"role": "user", "content": pending})
        said: list[ContentBlockParam] = []
        if exchange.reason:
            said.append({"type": "text", "text": exchange.reason})
        said.append(
            {
                "type": "tool_use",
                "id": use_id,
                "name": exchange.call.name,
                "input": dict(exchange.call.arguments),
            }
        )
        messages.append({"role": "assistant", "content": said})
        pending = [
            {
                "type": "tool_result",
                "tool_use_id": use_id,
                "content": outcome_text(exchange.outcome),
                "is_error": not exchange.outcome.ok,
            }
        ]
    pending.append({"type": "text", "text": observation_message(request)})
    messages.append({"role": "user", "content": pending})
    return messages


def anthropic_tools(tools: Sequence[ToolSpec]) -> list[ToolUnionParam]:
    """Tool specs as Messages API custom tools."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": dict(tool.parameters),
        }
        for tool in tools
    ]


def tool_choice(request: TurnRequest, mode: Literal["any", "auto"]) -> ToolChoiceParam:
    """`any` (or `auto`) without parallel calls, or `finish` by name once the budget is spent."""
    if request.must_finish:
        return {"type": "tool", "name": FINISH, "disable_parallel_tool_use": True}
    if mode == "auto":
        return {"type": "auto", "disable_parallel_tool_use": True}
    return {"type": "any", "disable_parallel_tool_use": True}


def parse_message(message: Message, offered: set[str]) -> Decision:
    """The one decision in a message, or the `ModelError` saying why there is none."""
    usage = _usage(message)
    try:
        return _decision(message, offered, usage)
    except ModelError as error:
        error.usage = usage
        raise


def _decision(message: Message, offered: set[str], usage: Usage | None) -> Decision:
    texts = [block.text for block in message.content if block.type == "text"]
    uses = [block for block in message.content if block.type == "tool_use"]
    if message.stop_reason == "refusal":
        detail = message.stop_details.explanation if message.stop_details else None
        raise ModelRefused(f"the model refused: {detail or ' '.join(texts) or 'no reason given'}")
    raw = "\n".join([*texts, *(f"{use.name} {use.input}" for use in uses)])
    if message.stop_reason == "max_tokens":
        raise MalformedToolCall("the answer was cut at max_tokens", raw=raw)
    if len(uses) != 1:
        what = "no tool use" if not uses else f"{len(uses)} tool uses"
        raise MalformedToolCall(f"expected exactly one tool use, got {what}", raw=raw)
    use = uses[0]
    if use.name not in offered:
        raise MalformedToolCall(f"the model called {use.name!r}, which was not offered", raw=raw)
    if not isinstance(use.input, dict):
        raise MalformedToolCall(f"the input of {use.name} is not a JSON object", raw=raw)
    reason = " ".join(text.strip() for text in texts if text.strip()) or None
    return Decision(ToolCall(use.name, use.input, use.id), reason=reason, usage=usage)


def _usage(message: Message) -> Usage | None:
    # Input billed is the sum of uncached, cache-written and cache-read tokens (the SDK's Usage
    # docs); a turn's cost needs all three. Anthropic always reports usage; a stand-in server
    # may not, and the SDK does not validate responses.
    usage: AnthropicUsage | None = getattr(message, "usage", None)
    if usage is None:
        return None
    input_tokens = (
        usage.input_tokens
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
    )
    return Usage(input_tokens=input_tokens, output_tokens=usage.output_tokens)


def provider_error(label: str, error: anthropic.AnthropicError) -> ModelError:
    """The `ModelError` an SDK exception stands for (module docstring has the table)."""
    if isinstance(error, anthropic.APITimeoutError):
        return ModelTimeout(f"{label}: the request timed out")
    if isinstance(error, anthropic.RateLimitError | anthropic.OverloadedError):
        wait = retry_after_s(error.response.headers)
        return ModelRateLimited(f"{label}: HTTP {error.status_code}: {error.message}", wait)
    if isinstance(error, anthropic.RequestTimeoutError):
        return ModelTimeout(f"{label}: the server timed out (408)")
    if isinstance(error, anthropic.APIStatusError):
        return ModelUnavailable(f"{label}: HTTP {error.status_code}: {error.message}")
    if isinstance(error, anthropic.APIConnectionError):
        return ModelUnavailable(f"{label}: cannot reach the server: {error.message}")
    return ModelUnavailable(f"{label}: {error}")
