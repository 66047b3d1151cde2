"""The one place a provider name and its settings become a `Model`.

Providers:

- `openai`: any OpenAI-compatible Chat Completions server (`OpenAIChatModel`). Without a
  `base_url` it is OpenAI itself and needs a key (`api_key` or `OPENAI_API_KEY`); with one
  (vLLM, Ollama, llama.cpp) a key is optional, since those servers accept any.
- `anthropic`: Anthropic's Messages API (`AnthropicMessagesModel`); needs `api_key` or
  `ANTHROPIC_API_KEY`.
- `heuristic`: the persona that needs no LLM at all (`HeuristicPersona`, seeded).

The SDK adapters are imported only when chosen, so a heuristic run never loads an SDK.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Final, cast
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Mapping

    from synthetic_users._llm._base import Model

PROVIDERS: Final = ("openai", "anthropic", "heuristic")
DEFAULT_TIMEOUT_S: Final = 60.0

KEY_VARIABLES: Final = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

# Sent to OpenAI-compatible servers that take no key: the SDK insists on a non-empty one.
NO_KEY: Final = "no-key"


def model_from_settings(
    provider: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_tokens: int | None = None,
    temperature: float | None = None,
    seed: int = 0,
    env: Mapping[str, str] | None = None,
) -> Model:
    """The model a run's settings name.

    Args:
        provider: `openai`, `anthropic` or `heuristic`.
        model: the provider's model name; required for `openai` and `anthropic`.
        api_key: the provider's key; when None it is read from `OPENAI_API_KEY` or
            `ANTHROPIC_API_KEY` in `env`.
        base_url: the API root of an OpenAI-compatible server, or of a stand-in for Anthropic.
        timeout_s: each model call's deadline.
        max_output_tokens: the answer's cap (Anthropic requires one; it defaults to 1024).
        temperature: sampling temperature for `openai` (the Anthropic API takes none).
        seed: the heuristic persona's seed; also sent to OpenAI-compatible servers.
        env: where keys are read from; defaults to `os.environ`.

    Raises:
        ValueError: the provider is unknown, its model name or key is missing, or a setting
            does not apply to it.
    """
    variables = os.environ if env is None else env
    if provider == "heuristic":
        # Imported by name: the heuristic persona lives in its own module, loaded only here.
        module = importlib.import_module("synthetic_users._llm._heuristic")
        return cast("Model", module.HeuristicPersona(seed=seed))
    if provider not in KEY_VARIABLES:
        known = ", ".join(PROVIDERS)
        raise ValueError(f"unknown model provider {provider!r}: choose one of {known}")
    if not model:
        raise ValueError(f"provider {provider!r} needs a model name (the provider's model id)")
    key = api_key or variables.get(KEY_VARIABLES[provider]) or None
    if provider == "openai":
        from synthetic_users._llm._openai import OPENAI_HOST, OpenAIChatModel

        if key is None:
            if base_url is None or urlsplit(base_url).netloc == OPENAI_HOST:
                raise _missing_key(provider)
            key = NO_KEY
        return OpenAIChatModel(
            model,
            base_url=base_url,
            api_key=key,
            timeout_s=timeout_s,
            max_output_tokens=max_output_tokens,
            temperature=temperature,
            seed=seed,
        )
    from synthetic_users._llm._anthropic import DEFAULT_MAX_TOKENS, AnthropicMessagesModel

    if key is None:
        raise _missing_key(provider)
    if temperature is not None:
        raise ValueError("provider 'anthropic' takes no temperature (its Messages API has none)")
    return AnthropicMessagesModel(
        model,
        api_key=key,
        base_url=base_url,
        timeout_s=timeout_s,
        max_tokens=max_output_tokens or DEFAULT_MAX_TOKENS,
    )


def _missing_key(provider: str) -> ValueError:
    return ValueError(
        f"provider {provider!r} needs an API key: pass api_key or set {KEY_VARIABLES[provider]}"
    )


async def close_model(model: Model) -> None:
    """Release what a model holds (the SDK adapters' HTTP connections); others hold nothing.

    `Model` has no close of its own (scripted and heuristic models need none), so whoever built
    a model with `model_from_settings` calls this once its sessions are over.
    """
    aclose = getattr(model, "aclose", None)
    if aclose is not None:
        await aclose()
