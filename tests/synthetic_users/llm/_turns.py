"""Turn requests as the agent loop builds them, for the model adapters' tests."""

from __future__ import annotations

from typing import Any

from synthetic_users._llm._base import (
    Exchange,
    Observation,
    Outcome,
    PersonaProfile,
    PriorReaction,
    ToolCall,
    TurnRequest,
)
from synthetic_users._llm._prompt import system_prompt, tool_specs
from understudy_connector import render_snapshot
from understudy_connector.generated.models import SnapshotResult

PERSONA = PersonaProfile(
    name="Margot",
    background="A retired teacher who shops online for her grandchildren.",
    goals=("buy a birthday present", "not get lost"),
    digital_literacy="low",
    patience="low",
)
TASK = "Buy the blue scarf as a gift and pay by card."
TARGET_URL = "https://shop.example.com/"

CHECKOUT: dict[str, Any] = {
    "name": "snapshot",
    "url": "https://shop.example.com/checkout",
    "title": "Checkout",
    "generation": 3,
    "truncated": False,
    "nodes": [
        {"role": "RootWebArea", "name": "Checkout", "depth": 0},
        {"ref": "g3e4", "role": "textbox", "name": "Email", "depth": 1},
        {"ref": "g3e7", "role": "button", "name": "Pay now", "depth": 1},
    ],
}


def observation(last: Outcome | None = None) -> Observation:
    snapshot = SnapshotResult.model_validate(CHECKOUT)
    return Observation(
        url=snapshot.url,
        title=snapshot.title,
        snapshot=snapshot,
        text=render_snapshot(snapshot),
        last_outcome=last,
    )


def exchange(
    name: str = "click",
    arguments: dict[str, Any] | None = None,
    *,
    call_id: str = "",
    reason: str | None = None,
    ok: bool = True,
    summary: str = "clicked 'Add to cart'",
    page: str = "# Scarves (https://shop.example.com/scarves)",
) -> Exchange:
    return Exchange(
        observation_text=page,
        call=ToolCall(name, arguments or {"ref": "g2e5", "ease": 6}, call_id),
        reason=reason,
        outcome=Outcome(ok=ok, summary=summary, code=None if ok else "element_not_found"),
    )


def turn_request(
    *,
    history: tuple[Exchange, ...] = (),
    must_finish: bool = False,
    prior_reactions: tuple[PriorReaction, ...] = (),
    last: Outcome | None = None,
    turn: int = 3,
    turn_budget: int = 12,
) -> TurnRequest:
    tools = tool_specs()
    if must_finish:  # as the loop offers them
        tools = [tool for tool in tools if tool.name == "finish"]
    return TurnRequest(
        persona=PERSONA,
        task=TASK,
        target_url=TARGET_URL,
        turn=turn,
        turn_budget=turn_budget,
        observation=observation(last),
        history=history,
        tools=tools,
        prior_reactions=prior_reactions,
        must_finish=must_finish,
        system_prompt=system_prompt(PERSONA, TASK, TARGET_URL, turn_budget),
    )
