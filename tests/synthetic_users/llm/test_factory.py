"""Choosing a model from a run's settings."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from synthetic_users._llm._anthropic import AnthropicMessagesModel
from synthetic_users._llm._base import Decision, ToolCall, TurnRequest
from synthetic_users._llm._factory import close_model, model_from_settings
from synthetic_users._llm._openai import OpenAIChatModel


async def test_openai_takes_its_key_from_the_settings_or_the_environment() -> None:
    given = model_from_settings("openai", model="gpt-x", api_key="sk-given", env={})
    from_env = model_from_settings("openai", model="gpt-x", env={"OPENAI_API_KEY": "sk-env"})
    try:
        assert isinstance(given, OpenAIChatModel)
        assert isinstance(from_env, OpenAIChatModel)
        assert given.label == from_env.label == "openai:gpt-x"
    finally:
        await close_model(given)
        await close_model(from_env)


def test_openai_itself_without_a_key_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        model_from_settings("openai", model="gpt-x", env={})
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        model_from_settings("openai", model="gpt-x", base_url="https://api.openai.com/v1", env={})


async def test_a_compatible_server_needs_no_key() -> None:
    local = model_from_settings(
        "openai", model="qwen2.5:7b", base_url="http://127.0.0.1:11434/v1", env={}
    )
    try:
        assert local.label == "openai-compatible:qwen2.5:7b@127.0.0.1:11434"
    finally:
        await close_model(local)


async def test_anthropic_takes_its_key_from_the_environment() -> None:
    claude = model_from_settings(
        "anthropic", model="claude-x", env={"ANTHROPIC_API_KEY": "sk-ant"}, max_output_tokens=512
    )
    try:
        assert isinstance(claude, AnthropicMessagesModel)
        assert claude.label == "anthropic:claude-x"
    finally:
        await close_model(claude)


def test_anthropic_without_a_key_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        model_from_settings("anthropic", model="claude-x", env={"OPENAI_API_KEY": "sk"})


def test_anthropic_refuses_a_temperature_it_cannot_send() -> None:
    with pytest.raises(ValueError, match="temperature"):
        model_from_settings("anthropic", model="claude-x", api_key="k", temperature=0.2)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_llm_provider_needs_a_model_name(provider: str) -> None:
    with pytest.raises(ValueError, match="needs a model name"):
        model_from_settings(provider, api_key="k")


def test_an_unknown_provider_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"'gemini'.*openai, anthropic, heuristic"):
        model_from_settings("gemini", model="x", api_key="k")


@dataclass
class FakeHeuristic:
    seed: int
    label: str = "heuristic-persona fake"

    async def decide(self, request: TurnRequest) -> Decision:
        return Decision(ToolCall("finish", {"success": False, "summary": "-", "ease": 1}))


def test_heuristic_builds_the_seeded_persona_without_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("synthetic_users._llm._heuristic")
    module.HeuristicPersona = FakeHeuristic  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "synthetic_users._llm._heuristic", module)

    persona = model_from_settings("heuristic", seed=42, env={})

    assert persona == FakeHeuristic(seed=42)


async def test_closing_an_sdk_model_closes_its_client_and_others_are_left_alone() -> None:
    local = model_from_settings("openai", model="m", base_url="http://127.0.0.1:9/v1", env={})
    assert isinstance(local, OpenAIChatModel)

    await close_model(local)
    await close_model(FakeHeuristic(seed=1))

    assert local.is_closed
