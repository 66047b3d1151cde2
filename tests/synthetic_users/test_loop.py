"""The persona loop against a scripted model and a fake Understudy session."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from synthetic_users._llm._base import (
    Decision,
    MalformedToolCall,
    ModelRateLimited,
    ModelRefused,
    PersonaProfile,
    ScriptedModel,
    ToolCall,
    Usage,
)
from synthetic_users._loop import (
    BrowserLost,
    Generation,
    LoopCancelled,
    ModelGaveUp,
    PersonaLoop,
)

from ._fakes import (
    CommandOutcomeUnknown,
    FakeSession,
    MemoryRecorder,
    SessionTerminal,
    failed,
    problem,
    snapshot,
)

if TYPE_CHECKING:
    from understudy_connector.generated.models import SnapshotResult

SITE = "http://127.0.0.1:9"
HOME = snapshot(
    f"{SITE}/",
    "Shop",
    [
        {"ref": "g1e1", "role": "link", "name": "Cart"},
        {"ref": "g1e2", "role": "textbox", "name": ""},
    ],
)
CART = snapshot(f"{SITE}/cart", "Cart", [{"ref": "g1e3", "role": "heading", "name": "Your cart"}])


def call(name: str, ease: int = 6, reason: str | None = None, **arguments: object) -> Decision:
    return Decision(ToolCall(name, {**arguments, "ease": ease}), reason=reason)


def generation(budget: int = 10, next_turn: int = 1) -> Generation:
    return Generation(
        run_id="run-1",
        session_id="s-1",
        persona=PersonaProfile(name="Ada"),
        task="look at the cart",
        target_url=f"{SITE}/",
        turn_budget=budget,
        generation=1,
        next_turn=next_turn,
    )


def fake_session() -> FakeSession:
    return FakeSession({f"{SITE}/": HOME, f"{SITE}/cart": CART}, links={"g1e1": f"{SITE}/cart"})


async def no_sleep(_: float) -> None:
    return None


def loop(model: ScriptedModel, session: FakeSession, rec: MemoryRecorder) -> PersonaLoop:
    return PersonaLoop(model, session, rec, rec, sleep=no_sleep)  # type: ignore[arg-type]


async def test_each_turn_is_persisted_with_action_outcome_reason_and_usage() -> None:
    model = ScriptedModel(
        [
            Decision(ToolCall("click", {"ref": "g1e1", "ease": 6}), "the cart link", Usage(120, 9)),
            call("finish", success=True, summary="saw the cart"),
        ]
    )
    session, rec = fake_session(), MemoryRecorder()
    finish = await loop(model, session, rec).run(generation())
    assert finish.success and finish.summary == "saw the cart" and not finish.forced
    assert session.calls == [("navigate", f"{SITE}/"), ("click", "g1e1")]
    first, second = rec.turns["s-1"]
    assert first["turn"] == 1 and first["observation"]["url"] == f"{SITE}/"
    assert first["action"] == {"name": "click", "arguments": {"ref": "g1e1", "ease": 6}}
    assert first["reason"] == "the cart link"
    assert first["outcome"]["ok"] and first["outcome"]["summary"] == "clicked link 'Cart'"
    assert first["usage"] == {"input_tokens": 120, "output_tokens": 9}
    assert second["observation"]["url"] == f"{SITE}/cart" and "usage" not in second
    # The model saw the outcome of its click in the next turn, and its own history.
    assert model.requests[1].observation.last_outcome is not None
    assert model.requests[1].history[0].call.name == "click"


async def test_react_records_the_step_url_element_and_a_screenshot() -> None:
    model = ScriptedModel(
        [
            call("react", ease=3, sentiment="confused", note="This box has no label", ref="g1e2"),
            call("finish", success=False, summary="gave up"),
        ]
    )
    session, rec = fake_session(), MemoryRecorder()
    await loop(model, session, rec).run(generation())
    (reaction,) = rec.reactions["s-1"]
    assert reaction["step"] == 1 and reaction["sentiment"] == "confused"
    assert reaction["element"] == "an unnamed textbox" and reaction["url"] == f"{SITE}/"
    assert reaction["screenshot"] == "step-0001.png"
    assert ("s-1", "step-0001.png") in rec.shots
    assert rec.turns["s-1"][0]["reactions"] == [reaction]
    # The model is told what it felt so far.
    assert [r.note for r in model.requests[1].prior_reactions] == ["This box has no label"]


async def test_last_turn_offers_only_finish_and_finishes_for_a_model_that_does_not() -> None:
    model = ScriptedModel(
        [call("scroll", direction="down"), call("scroll", ease=2, direction="down")]
    )
    session, rec = fake_session(), MemoryRecorder()
    finish = await loop(model, session, rec).run(generation(budget=2))
    assert [t.name for t in model.requests[1].tools] == ["finish"]
    assert model.requests[1].must_finish and not model.requests[0].must_finish
    assert finish.forced and not finish.success
    assert rec.turns["s-1"][-1]["action"]["name"] == "finish"
    assert "turn budget ran out" in rec.turns["s-1"][-1]["action"]["arguments"]["summary"]


async def test_an_unknown_write_outcome_is_not_sent_again_and_the_page_is_read_again() -> None:
    model = ScriptedModel([call("click", ref="g1e1"), call("finish", success=False, summary="x")])
    session, rec = fake_session(), MemoryRecorder()
    session.fail["click"] = problem(CommandOutcomeUnknown, 409, "command_outcome_unknown")
    await loop(model, session, rec).run(generation())
    assert [c for c in session.calls if c[0] == "click"] == [("click", "g1e1")]
    outcome = rec.turns["s-1"][0]["outcome"]
    assert not outcome["ok"] and outcome["code"] == "command_outcome_unknown"
    assert "look at the page again" in outcome["summary"]
    assert model.requests[1].observation.last_outcome is not None
    assert model.requests[1].observation.last_outcome.code == "command_outcome_unknown"


async def test_a_failed_command_is_an_outcome_the_model_sees() -> None:
    model = ScriptedModel(
        [call("fill", ref="g1e9", value="x"), call("finish", success=False, summary="x")]
    )
    session, rec = fake_session(), MemoryRecorder()
    session.fail["fill"] = failed("fill", "stale_ref", "the element is gone")
    await loop(model, session, rec).run(generation())
    assert rec.turns["s-1"][0]["outcome"]["code"] == "stale_ref"


async def test_a_lost_session_raises_browser_lost_after_persisting_earlier_turns() -> None:
    model = ScriptedModel([call("click", ref="g1e1"), call("click", ref="g1e1")])
    rec = MemoryRecorder()

    class Dies(FakeSession):
        async def snapshot(self, **kwargs: object) -> SnapshotResult:
            if self.calls[-1][0] == "click":
                raise problem(SessionTerminal, 410, "session_terminal")
            return await super().snapshot(**kwargs)

    session = Dies(fake_session().pages, links={"g1e1": f"{SITE}/cart"})
    with pytest.raises(BrowserLost, match="session_terminal"):
        await loop(model, session, rec).run(generation())
    assert [t["turn"] for t in rec.turns["s-1"]] == [1]


async def test_a_malformed_answer_is_asked_again_with_feedback_then_gives_up() -> None:
    class Flaky(ScriptedModel):
        async def decide(self, request):  # type: ignore[no-untyped-def]
            self.requests.append(request)
            if len(self.requests) == 1:
                raise MalformedToolCall("arguments are not JSON")
            if len(self.requests) == 2:
                return Decision(ToolCall("teleport", {"ease": 4}))
            return call("finish", success=True, summary="ok")

    model, session, rec = Flaky([]), fake_session(), MemoryRecorder()
    await loop(model, session, rec).run(generation())
    assert len(model.requests) == 3
    feedback = model.requests[2].observation.last_outcome
    assert feedback is not None and feedback.code == "malformed_tool_call"
    assert "unknown action 'teleport'" in feedback.summary

    class Broken(ScriptedModel):
        async def decide(self, request):  # type: ignore[no-untyped-def]
            raise MalformedToolCall("no tool call")

    with pytest.raises(ModelGaveUp, match="no valid action 3 times"):
        await loop(Broken([]), fake_session(), MemoryRecorder()).run(generation())


async def test_rate_limits_wait_as_told_and_refusals_end_the_session() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    class Limited(ScriptedModel):
        async def decide(self, request):  # type: ignore[no-untyped-def]
            self.requests.append(request)
            if len(self.requests) <= 2:
                raise ModelRateLimited("429", retry_after_s=7)
            return call("finish", success=True, summary="ok")

    rec = MemoryRecorder()
    await PersonaLoop(Limited([]), fake_session(), rec, rec, sleep=sleep).run(generation())  # type: ignore[arg-type]
    assert waits == [7, 7]

    class Refuses(ScriptedModel):
        async def decide(self, request):  # type: ignore[no-untyped-def]
            raise ModelRefused("I can't help with that")

    with pytest.raises(ModelGaveUp, match="refused"):
        await loop(Refuses([]), fake_session(), MemoryRecorder()).run(generation())


async def test_a_cancelled_run_stops_before_the_next_turn() -> None:
    model = ScriptedModel([call("click", ref="g1e1")])
    session, rec = fake_session(), MemoryRecorder()
    rec.cancelled.add("run-1")
    with pytest.raises(LoopCancelled):
        await loop(model, session, rec).run(generation())
    assert model.requests == []


async def test_a_later_generation_continues_the_turn_count_on_the_target_again() -> None:
    model = ScriptedModel([call("finish", success=True, summary="done")])
    session, rec = fake_session(), MemoryRecorder()
    await loop(model, session, rec).run(generation(next_turn=5))
    assert session.calls[0] == ("navigate", f"{SITE}/")
    assert rec.turns["s-1"][0]["turn"] == 5
    assert model.requests[0].turn == 5
    told = model.requests[0].observation.last_outcome
    assert told is not None and "browser was restarted" in told.summary
