"""The heuristic persona on the demo shop, in real Chromium through the real Understudy stack.

Three personas of low, medium and high digital literacy shop in turn, each in its own profile,
with a tiny loop of this test's own (snapshot, decide, run the action through the HTTP command
API): together their reactions name every flaw the shop has, and at least one completes the order.
The loop is test scaffolding only; the product's agent loop lives elsewhere.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from demo.chromium import launch
from study.shop import FLAWS, DemoShop, flaws_in
from synthetic_users._llm._base import (
    Exchange,
    Observation,
    Outcome,
    PersonaProfile,
    PriorReaction,
    ToolSpec,
    TurnRequest,
)
from synthetic_users._llm._heuristic import HeuristicPersona
from tests.e2e._agent import Agent
from tests.e2e._skip import require_chromium
from tests.e2e.conftest import (
    device_row,
    eventually,
    extension_dist,  # noqa: F401 - the session fixture that builds the extension
    idem,
    start_backend,
    stop_backend,
    unattended,
    wait_status,
    worker_eval,
)
from understudy_connector._snapshot import render_snapshot
from understudy_connector.generated.models import SnapshotResult

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

    from demo.chromium import Chromium
    from tests.e2e.conftest import Backend

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TASK = "Buy a rain jacket and have it delivered to your home."
TURN_BUDGET = 40
SLOW_STEP_S = 1.2  # above the low-patience threshold (1 s), below the others
ACTIONS = ("click", "type", "fill", "select_option", "press_key", "scroll", "navigate")
TOOLS = tuple(ToolSpec(n, n, {"type": "object"}) for n in (*ACTIONS, "react", "finish"))
PERSONAS = (
    (
        11,
        PersonaProfile(
            "Rosa Lindqvist",
            background="Retired teacher who shops online with her grandson's help.",
            goals=("check the shipping and returns rules before paying",),
            digital_literacy="low",
            patience="low",
        ),
    ),
    (22, PersonaProfile("Sam Okafor", goals=("get it quickly",), digital_literacy="medium")),
    (
        33,
        PersonaProfile("Lee Marten", digital_literacy="high", patience="high", locale="en-GB"),
    ),
)
# Which reaction prefix names which of the shop's flaws (the persona's ISSUE_LABELS).
FLAW_OF_PREFIX = {
    "Unlabeled field (Postcode)": "unlabeled-field",
    "Slow step (Continue to payment)": "slow-step",
    "Confusing error (/checkout/shipping)": "confusing-error",
    "Error page (/help/shipping-returns)": "dead-link",
    "Image without alt text (banner.svg)": "missing-alt",
}


@dataclass
class Played:
    """What one persona did."""

    reactions: list[PriorReaction] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    finished: dict[str, Any] | None = None


async def play(agent: Agent, session_id: str, shop: DemoShop, seed: int, persona: Any) -> Played:
    """The loop: snapshot, decide, act; reactions are recorded, not run."""
    model, played = HeuristicPersona(seed), Played()
    history: list[Exchange] = []
    outcome: Outcome | None = None
    for turn in range(1, TURN_BUDGET + 1):
        raw = await agent.run(session_id, {"name": "snapshot", "format": "both"})
        snapshot = SnapshotResult.model_validate(raw)
        text = render_snapshot(snapshot)
        request = TurnRequest(
            persona=persona,
            task=TASK,
            target_url=shop.url("/"),
            turn=turn,
            turn_budget=TURN_BUDGET,
            observation=Observation(snapshot.url, snapshot.title, snapshot, text, outcome),
            history=tuple(history),
            tools=TOOLS,
            prior_reactions=tuple(played.reactions),
            must_finish=turn == TURN_BUDGET,
        )
        decision = await model.decide(request)
        call = decision.call
        args = {k: v for k, v in call.arguments.items() if k != "ease"}
        played.calls.append(f"{call.name} {args}")
        assert 1 <= call.arguments["ease"] <= 7 and decision.reason
        if call.name == "finish":
            played.finished = args
            return played
        if call.name == "react":
            played.reactions.append(
                PriorReaction(turn, args["sentiment"], args["note"], snapshot.url)
            )
            outcome = Outcome(True, "reaction noted")
        else:
            assert call.name in ACTIONS, call
            started = time.monotonic()
            answer = (await agent.submit(session_id, {"name": call.name, **args})).json()
            elapsed_ms = (time.monotonic() - started) * 1000
            ok = answer.get("status") == "succeeded"
            code = None if ok else str(answer.get("error", {}).get("code"))
            outcome = Outcome(ok, f"{call.name} {answer.get('status')}", code, elapsed_ms)
        history.append(Exchange(text, call, decision.reason, outcome))
    return played


async def enroll_device(browser: Chromium, backend: Backend, device_id: str) -> None:
    """Store an enrollment as the options page does, for a device of its own."""
    record = {
        "serviceOrigin": backend.url,
        "deviceId": device_id,
        "credential": backend.enroll(device_id),
        "enabled": True,
        "localOriginPolicy": {"mode": "any"},
    }
    await worker_eval(
        browser, f"chrome.storage.local.set({{enrollment: {json.dumps(record)}}}).then(() => true)"
    )


async def shop_as(
    http: httpx.AsyncClient,
    shop: DemoShop,
    browser: Chromium,
    device_id: str,
    seed: int,
    persona: PersonaProfile,
) -> Played:
    """One persona's session on its own device (its own Chromium profile)."""

    async def online() -> bool:
        return bool((await device_row(http, device_id))["online"])

    await eventually(online, what=f"{device_id} coming online")
    created = await http.post(
        "/v1/sessions",
        json={**unattended([shop.origin], f"profile-{device_id}"), "deviceId": device_id},
        headers=idem(),
    )
    assert created.status_code == 201, created.text
    session_id = created.json()["sessionId"]
    agent = Agent(http)
    await agent.run(session_id, {"name": "navigate", "url": shop.url("/")})
    played = await play(agent, session_id, shop, seed, persona)
    assert (await http.delete(f"/v1/sessions/{session_id}")).status_code in (200, 202)
    await wait_status(http, session_id, 410)
    return played


async def test_three_personas_react_to_every_flaw_and_one_completes_the_order(
    tmp_path: Path,
    extension_dist: Path,  # noqa: F811 - the fixture imported above
) -> None:
    shop = DemoShop(slow_step_s=SLOW_STEP_S).start()
    backend = await start_backend(tmp_path)
    played: list[Played] = []
    try:
        async with backend.client(backend.api_key()) as http:
            for n, (seed, persona) in enumerate(PERSONAS):
                browser = await launch(tmp_path / f"profile-{n}", extension_dist)
                try:
                    await enroll_device(browser, backend, f"shopper-{n}")
                    played.append(await shop_as(http, shop, browser, f"shopper-{n}", seed, persona))
                finally:
                    browser.kill()
    finally:
        await stop_backend(backend)
        shop.stop()

    transcript = "\n".join(f"{i}: {c}" for i, p in enumerate(played) for c in p.calls)
    found = {
        flaw
        for p in played
        for r in p.reactions
        for prefix, flaw in FLAW_OF_PREFIX.items()
        if r.note.startswith(prefix)
    }
    assert found == set(FLAWS), f"missing {set(FLAWS) - found}:\n{transcript}"
    notes = [r.note for p in played for r in p.reactions]
    assert set().union(*map(flaws_in, notes)) == set(FLAWS), "the study's matcher agrees"
    completed = [p for p in played if p.finished and p.finished["success"]]
    assert completed, transcript
    assert any(r.path.startswith("/order/") for r in shop.log()), "no order page was shown"
    for p in played:  # one reaction per problem: no note repeats within a persona's session
        notes = [r.note.split(":")[0] for r in p.reactions]
        assert len(notes) == len(set(notes)), notes
    # Each profile carried its own cookie: three carts, none shared.
    cookies = {r.cookie for r in shop.log() if r.cookie is not None}
    assert len(cookies) == len(PERSONAS), cookies
