"""A persona's mind behind any OpenAI-compatible Chat Completions server, through the `openai` SDK.

One `decide` is one `POST {base_url}/chat/completions` with the persona's system prompt, the
generation's earlier turns replayed as user / assistant-with-tool-call / tool messages, and the
current observation, offering the action catalogue as function tools with a tool call required.
`base_url` makes the same adapter speak to OpenAI, vLLM, Ollama or a llama.cpp server.

How provider failures become `ModelError`s (see `_base`):

    openai.RateLimitError (429)            → ModelRateLimited, retry_after_s from the headers
    openai.APITimeoutError, our deadline   → ModelTimeout
    408 Request Timeout                    → ModelTimeout
    other APIStatusError, APIConnectionError, other OpenAIError → ModelUnavailable
    message.refusal, finish_reason content_filter → ModelRefused
    not exactly one call of an offered tool with JSON-object arguments → MalformedToolCall

The SDK's own retries are off (`max_retries=0` by default): the agent loop owns the retry policy,
and hidden retries would hide both the wait and the tokens.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import openai
from openai import omit

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

    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionMessageParam,
        ChatCompletionMessageToolCallUnion,
        ChatCompletionToolChoiceOptionParam,
        ChatCompletionToolUnionParam,
    )
    from openai.types.chat.chat_completion_message_function_tool_call import Function
    from openai.types.completion_usage import CompletionUsage

    from synthetic_users._llm._base import Exchange, ToolSpec, TurnRequest

OPENAI_HOST: Final = "api.openai.com"


class OpenAIChatModel:
    """A `Model` that asks an OpenAI-compatible Chat Completions endpoint for one tool call.

    Args:
        model: the model name the server knows (`gpt-4.1-mini`, `qwen2.5:7b`, ...).
        base_url: the API root (`http://127.0.0.1:11434/v1`); None for OpenAI itself.
        api_key: sent as `Authorization: Bearer …`; local servers accept any non-empty value.
        timeout_s: the whole call's deadline; past it, `decide` raises `ModelTimeout`.
        max_retries: the SDK's own retries; keep 0 so the loop sees every failure.
        max_output_tokens: a cap on the answer, sent as `max_completion_tokens` to OpenAI and as
            `max_tokens` to other servers (which do not all know the newer name).
        temperature: sampling temperature; None leaves the server's default.
        seed: asks the server for reproducible sampling (best effort, where supported).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str,
        timeout_s: float,
        max_retries: int = 0,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> None:
        self._model = model
        self._timeout_s = timeout_s
        self._max_output_tokens = max_output_tokens
        self._temperature = temperature
        self._seed = seed
        host = urlsplit(base_url).netloc if base_url else OPENAI_HOST
        self._is_openai = host == OPENAI_HOST
        self._label = f"openai:{model}" if self._is_openai else f"openai-compatible:{model}@{host}"
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=max_retries,
        )

    @property
    def label(self) -> str:
        """`openai:<model>`, or `openai-compatible:<model>@<host[:port]>` for other servers."""
        return self._label

    @property
    def is_closed(self) -> bool:
        """Whether `aclose` ran."""
        return self._client.is_closed()

    async def aclose(self) -> None:
        """Close the HTTP connections; the model cannot be used afterwards."""
        await self._client.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def decide(self, request: TurnRequest) -> Decision:
        """Ask for this turn's one action (see the module docstring for the errors)."""
        tools = offered_tools(request)
        completion = await self._create(request, tools)
        return parse_completion(completion, {tool.name for tool in tools})

    async def _create(self, request: TurnRequest, tools: Sequence[ToolSpec]) -> ChatCompletion:
        cap = self._max_output_tokens
        try:
            # The SDK's timeout bounds each phase (connect, read, ...); this bounds the whole.
            async with asyncio.timeout(self._timeout_s):
                return await self._client.chat.completions.create(
                    model=self._model,
                    messages=chat_messages(request),
                    tools=function_tools(tools),
                    tool_choice=tool_choice(request),
                    parallel_tool_calls=False,
                    max_completion_tokens=cap if cap is not None and self._is_openai else omit,
                    max_tokens=cap if cap is not None and not self._is_openai else omit,
                    temperature=self._temperature if self._temperature is not None else omit,
                    seed=self._seed if self._seed is not None else omit,
                )
        except TimeoutError as error:
            raise ModelTimeout(f"{self._label}: no answer within {self._timeout_s:g} s") from error
        except openai.OpenAIError as error:
            raise provider_error(self._label, error) from error


def chat_messages(request: TurnRequest) -> list[ChatCompletionMessageParam]:
    """The request as Chat Completions messages: system, replayed turns, the current page."""
    system = request.system_prompt or system_prompt(
        request.persona, request.task, request.target_url, request.turn_budget
    )
    messages: list[ChatCompletionMessageParam] = [{"role": "system", "content": system}]
    for index, exchange in enumerate(request.history, start=1):
        messages.extend(_replayed(index, exchange))
    messages.append({"role": "user", "content": observation_message(request)})
    return messages


def _replayed(index: int, exchange: Exchange) -> list[ChatCompletionMessageParam]:
    # Turns from a scripted or heuristic model carry no provider id; the API still needs the
    # tool message to name the call it answers.
    call_id = exchange.call.call_id or f"call_{index}"
    return [
        {"role": "user", "content": exchange.observation_text},
        {
            "role": "assistant",
            "content": exchange.reason,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": exchange.call.name,
                        "arguments": json.dumps(dict(exchange.call.arguments)),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": outcome_text(exchange.outcome)},
    ]


def function_tools(tools: Sequence[ToolSpec]) -> list[ChatCompletionToolUnionParam]:
    """Tool specs as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
            },
        }
        for tool in tools
    ]


def tool_choice(request: TurnRequest) -> ChatCompletionToolChoiceOptionParam:
    """`required` (one tool call, any tool), or `finish` by name once the budget is spent."""
    if request.must_finish:
        return {"type": "function", "function": {"name": FINISH}}
    return "required"


def parse_completion(completion: ChatCompletion, offered: set[str]) -> Decision:
    """The one decision in a completion, or the `ModelError` saying why there is none."""
    usage = _usage(completion.usage)
    try:
        return _decision(completion, offered, usage)
    except ModelError as error:
        error.usage = usage
        raise


def _decision(completion: ChatCompletion, offered: set[str], usage: Usage | None) -> Decision:
    if not completion.choices:
        raise MalformedToolCall("the completion has no choices")
    choice = completion.choices[0]
    message = choice.message
    if message.refusal:
        raise ModelRefused(f"the model refused: {message.refusal}")
    if choice.finish_reason == "content_filter":
        raise ModelRefused("the provider's content filter stopped the answer")
    calls = message.tool_calls or []
    raw = _raw(completion)
    if len(calls) != 1:
        what = "no tool call" if not calls else f"{len(calls)} tool calls"
        raise MalformedToolCall(f"expected exactly one tool call, got {what}", raw=raw)
    call = calls[0]
    function = _function(call)
    if function is None:
        raise MalformedToolCall(f"expected a function tool call, got a {call.type} one", raw=raw)
    name = function.name
    if name not in offered:
        raise MalformedToolCall(f"the model called {name!r}, which was not offered", raw=raw)
    arguments = _arguments(name, function.arguments, raw)
    reason = (message.content or "").strip() or None
    # Some compatible servers leave the id out; replaying the turn then makes one up.
    call_id = getattr(call, "id", None) or ""
    return Decision(ToolCall(name, arguments, call_id), reason=reason, usage=usage)


def _function(call: ChatCompletionMessageToolCallUnion) -> Function | None:
    # A function call, even from a compatible server that leaves out `type` (the SDK then
    # builds a function call without one); None for custom tool calls.
    return getattr(call, "function", None) if call.type != "custom" else None


def _arguments(name: str, arguments: object, raw: str) -> dict[str, Any]:
    # The API sends a JSON string; some compatible servers send the object itself, and the
    # SDK passes either through unvalidated.
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            message = f"the arguments of {name} are not JSON: {error}"
            raise MalformedToolCall(message, raw=raw) from None
    if not isinstance(arguments, dict):
        raise MalformedToolCall(f"the arguments of {name} are not a JSON object", raw=raw)
    return arguments


def _raw(completion: ChatCompletion) -> str:
    # What the model said, as it said it, for the transcript of a malformed turn.
    message = completion.choices[0].message
    parts = [message.content] if message.content else []
    for call in message.tool_calls or []:
        function = _function(call)
        if function is not None:
            parts.append(f"{function.name} {function.arguments}")
        elif call.type == "custom":
            parts.append(f"{call.custom.name} {call.custom.input}")
    return "\n".join(parts)


def _usage(usage: CompletionUsage | None) -> Usage | None:
    if usage is None:
        return None
    return Usage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens)


def provider_error(label: str, error: openai.OpenAIError) -> ModelError:
    """The `ModelError` an SDK exception stands for (module docstring has the table)."""
    if isinstance(error, openai.APITimeoutError):
        return ModelTimeout(f"{label}: the request timed out")
    if isinstance(error, openai.RateLimitError):
        wait = retry_after_s(error.response.headers)
        return ModelRateLimited(f"{label}: rate limited (429): {error.message}", wait)
    if isinstance(error, openai.APIStatusError):
        if error.status_code == 408:
            return ModelTimeout(f"{label}: the server timed out (408)")
        return ModelUnavailable(f"{label}: HTTP {error.status_code}: {error.message}")
    if isinstance(error, openai.APIConnectionError):
        return ModelUnavailable(f"{label}: cannot reach the server: {error.message}")
    return ModelUnavailable(f"{label}: {error}")
