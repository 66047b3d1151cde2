"""The provider-neutral prompt: the persona's instructions, each step's message, the actions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import jsonschema
import pytest

from synthetic_users._llm._base import Outcome, PriorReaction
from synthetic_users._llm._prompt import (
    FINISH_ONLY_INSTRUCTION,
    observation_message,
    offered_tools,
    system_prompt,
    tool_specs,
)

from ._turns import PERSONA, TARGET_URL, TASK, turn_request

ACTIONS = [
    "click",
    "type",
    "fill",
    "select_option",
    "press_key",
    "scroll",
    "navigate",
    "react",
    "read_inbox",
    "wait_for_email",
    "finish",
    # Offered only when the run has a credential (the loop filters it out otherwise).
    "log_in",
]


def schema(name: str) -> dict[str, Any]:
    (spec,) = [tool for tool in tool_specs() if tool.name == name]
    return dict(spec.parameters)


def test_the_catalogue_is_the_briefs_actions_in_a_stable_order() -> None:
    assert [tool.name for tool in tool_specs()] == ACTIONS
    assert all(tool.description for tool in tool_specs())


@pytest.mark.parametrize("name", ACTIONS)
def test_every_action_schema_is_a_closed_object_that_requires_ease(name: str) -> None:
    parameters = schema(name)
    jsonschema.Draft202012Validator.check_schema(parameters)
    assert parameters["type"] == "object"
    assert parameters["additionalProperties"] is False
    assert "ease" in parameters["required"]
    assert set(parameters["required"]) <= set(parameters["properties"])


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("click", {"ref": "g2e14", "ease": 7}),
        ("type", {"ref": "g2e5", "text": "blue scarf", "submit": True, "ease": 4}),
        ("fill", {"ref": "g2e5", "value": "margot@example.com", "ease": 5}),
        ("select_option", {"ref": "g2e8", "values": ["M"], "ease": 3}),
        ("press_key", {"key": "Enter", "ease": 6}),
        ("scroll", {"direction": "down", "ease": 6}),
        ("scroll", {"direction": "up", "ref": "g2e3", "ease": 6}),
        ("navigate", {"url": "https://shop.example.com/help", "ease": 2}),
        ("react", {"sentiment": "confused", "note": "Where is the cart?", "ease": 2}),
        ("finish", {"success": False, "summary": "I could not pay.", "ease": 1}),
    ],
)
def test_well_formed_calls_are_valid(name: str, arguments: dict[str, Any]) -> None:
    jsonschema.validate(arguments, schema(name))


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("click", {"ref": "g2e14"}),  # no ease
        ("click", {"ref": "g2e14", "ease": 0}),
        ("click", {"ref": "g2e14", "ease": 8}),
        ("click", {"ref": "g2e14", "ease": 4.5}),
        ("click", {"ref": "#pay-button", "ease": 4}),  # not a snapshot ref
        ("click", {"ref": "g2e14", "ease": 4, "selector": "button"}),  # extra argument
        ("type", {"ref": "g2e5", "text": "", "ease": 4}),
        ("type", {"ref": "g2e5", "text": "x" * 2001, "ease": 4}),
        ("select_option", {"ref": "g2e8", "values": [], "ease": 3}),
        ("scroll", {"direction": "left", "ease": 3}),
        ("navigate", {"url": "javascript:alert(1)", "ease": 3}),
        ("react", {"sentiment": "meh", "note": "hm", "ease": 3}),
        ("react", {"sentiment": "angry", "ease": 3}),
        ("finish", {"success": "yes", "summary": "done", "ease": 3}),
    ],
)
def test_calls_the_loop_would_reject_are_invalid(name: str, arguments: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(arguments, schema(name))


def test_each_call_gets_a_fresh_catalogue() -> None:
    first = tool_specs()
    first.clear()
    assert len(tool_specs()) == len(ACTIONS)


def test_a_must_finish_turn_offers_only_finish() -> None:
    request = turn_request()
    assert offered_tools(request) == request.tools
    forced = replace(request, must_finish=True)
    assert [tool.name for tool in offered_tools(forced)] == ["finish"]


def test_a_must_finish_turn_offers_finish_even_when_the_tools_lack_it() -> None:
    request = replace(turn_request(), must_finish=True, tools=[])
    assert [tool.name for tool in offered_tools(request)] == ["finish"]


def test_the_step_message_has_position_budget_page_and_snapshot() -> None:
    request = turn_request(turn=4, turn_budget=15)

    text = observation_message(request)

    assert "Step 4 of 15." in text
    assert "Checkout (https://shop.example.com/checkout)" in text
    assert text.endswith(request.observation.text)
    assert "[ref=g3e7]" in text
    assert FINISH_ONLY_INSTRUCTION not in text


def test_the_step_message_tells_the_last_outcome_and_how_slow_it_was() -> None:
    slow = Outcome(ok=False, summary="stale ref g2e5", code="stale_ref", elapsed_ms=4200)

    text = observation_message(turn_request(last=slow))

    assert "Your last action: failed (stale_ref): stale ref g2e5 (the page took 4.2 s)" in text


def test_a_quick_outcome_does_not_mention_time() -> None:
    quick = Outcome(ok=True, summary="clicked 'Pay now'", elapsed_ms=300)

    text = observation_message(turn_request(last=quick))

    assert "Your last action: done: clicked 'Pay now'\n" in text


def test_the_step_message_recalls_prior_reactions() -> None:
    reactions = (
        PriorReaction(2, "confused", "I can't find the cart", "https://shop.example.com/"),
        PriorReaction(5, "angry", "The page froze", "https://shop.example.com/pay"),
    )

    text = observation_message(turn_request(prior_reactions=reactions))

    assert '- step 2, https://shop.example.com/: confused: "I can\'t find the cart"' in text
    assert '- step 5, https://shop.example.com/pay: angry: "The page froze"' in text


def test_the_last_step_message_says_only_finish_is_allowed() -> None:
    assert FINISH_ONLY_INSTRUCTION in observation_message(turn_request(must_finish=True))


def test_the_system_prompt_casts_the_persona_on_its_task() -> None:
    text = system_prompt(PERSONA, TASK, TARGET_URL, 12)

    assert "You are Margot." in text
    assert PERSONA.background in text
    assert "buy a birthday present; not get lost" in text
    assert TASK in text
    assert f"You start at {TARGET_URL}. You have at most 12 steps." in text
    for rule in ("`react`", "`finish`", "`ease`", "password", "first person"):
        assert rule in text


def test_literacy_and_patience_change_the_instructions() -> None:
    expert = replace(PERSONA, digital_literacy="high", patience="high", device="mobile")

    novice_text = system_prompt(PERSONA, TASK, TARGET_URL, 12)
    expert_text = system_prompt(expert, TASK, TARGET_URL, 12)

    assert "not confident with computers" in novice_text
    assert "little patience" in novice_text
    assert "at ease with technology" in expert_text
    assert "You are patient." in expert_text
    assert "on a phone" in expert_text


def test_an_unknown_trait_level_still_reaches_the_model() -> None:
    odd = replace(PERSONA, digital_literacy="expert-hacker")

    assert "Your digital literacy is expert-hacker." in system_prompt(odd, TASK, TARGET_URL, 5)
