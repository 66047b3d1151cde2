"""Runs end to end in one process: the real store, a fake fleet and fake Understudy sessions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from synthetic_users._fleet._base import FleetExhausted, Profile
from synthetic_users._llm._base import Decision, ScriptedModel, ToolCall
from synthetic_users._orchestrator import Orchestrator, OrchestratorSettings
from synthetic_users._store import NewRun, SessionState, Store

from ._fakes import FakeSession, MemoryRecorder, SessionTerminal, problem, snapshot

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from synthetic_users._llm._base import TurnRequest
    from understudy_connector.generated.models import SnapshotResult

SITE = "http://127.0.0.1:9"
HOME = snapshot(f"{SITE}/", "Shop", [{"ref": "g1e1", "role": "link", "name": "Cart"}])


def call(name: str, **arguments: object) -> Decision:
    return Decision(ToolCall(name, {**arguments, "ease": 5}))


@dataclass
class FakeFleet:
    free: int = 3
    leased: list[Profile] = field(default_factory=list)
    released: list[tuple[str, bool]] = field(default_factory=list)
    launches: int = 0
    crash_on_launch: set[int] = field(default_factory=set)  # these launches' browsers die

    async def start(self) -> None:
        return None

    async def acquire(
        self, holder: str, *, timeout_s: float = 60.0, allowed_origins: Sequence[str] | None = None
    ) -> Profile:
        if self.free == 0:
            raise FleetExhausted("no profile")
        self.free -= 1
        self.launches += 1
        profile = Profile(f"dev-{self.launches}", generation=self.launches)
        self.leased.append(profile)
        return profile

    async def release(self, profile: Profile, *, broken: bool = False) -> None:
        self.free += 1
        self.released.append((profile.device_id, broken))

    def alive(self, profile: Profile) -> bool:
        return profile.generation not in self.crash_on_launch

    async def close(self) -> None:
        return None


class HangingSession(FakeSession):
    """Understudy keeps retrying a session whose browser is gone: nothing ever answers."""

    async def snapshot(self, **kwargs: object) -> SnapshotResult:
        await asyncio.sleep(3600)
        raise AssertionError("never answers")  # pragma: no cover


@dataclass
class FakeUnderstudy:
    """`session(...)` hands out FakeSessions; `die_after[n]` makes the nth one lose its tab."""

    opened: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[FakeSession] = field(default_factory=list)
    lose_on_click: set[int] = field(default_factory=set)
    hang: set[int] = field(default_factory=set)  # these sessions never answer a snapshot

    deleted: list[str] = field(default_factory=list)

    async def delete_session(self, session_id: object) -> None:
        self.deleted.append(str(session_id))

    def session(self, **kwargs: Any) -> FakeSession:
        self.opened.append(kwargs)
        n = len(self.opened)
        fake = (HangingSession if n in self.hang else FakeSession)({f"{SITE}/": HOME})
        if n in self.lose_on_click:
            fake.fail["click"] = problem(SessionTerminal, 410, "session_terminal")
        self.sessions.append(fake)
        return fake


@dataclass
class Published:
    sessions: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)

    def session_ended(self, run_id: str, session_id: str, model_label: str) -> None:
        self.sessions.append(session_id)

    def run_ended(self, run_id: str) -> None:
        self.runs.append(run_id)


@dataclass
class Harness:
    store: Store
    fleet: FakeFleet
    understudy: FakeUnderstudy
    published: Published
    models: dict[str, ScriptedModel]
    orchestrator: Orchestrator

    def create(self, personas: list[str], budget: int = 10) -> str:
        run, _ = self.store.create_run(
            "acme",
            NewRun(
                target_url=f"{SITE}/",
                task="look around",
                turn_budget=budget,
                model="scripted",
                personas=[{"name": n} for n in personas],
                request_hash=f"h-{personas}-{budget}",
            ),
        )
        return run.run_id


def harness(tmp_path: Path, scripts: dict[str, list[Decision]], **settings: Any) -> Harness:
    store = Store.open(tmp_path / "su.sqlite3")
    models = {name: ScriptedModel(list(decisions)) for name, decisions in scripts.items()}

    class ByPersona:
        """Each persona's own script: the model is picked by the persona's name in the prompt."""

        label = "scripted"

        async def decide(self, request: TurnRequest) -> Decision:
            return await models[request.persona.name].decide(request)

    fleet, understudy, published = FakeFleet(), FakeUnderstudy(), Published()
    orchestrator = Orchestrator(
        store,
        fleet,
        understudy,  # type: ignore[arg-type]
        lambda _run, _session: ByPersona(),
        MemoryRecorder(),
        published,
        OrchestratorSettings(**settings),
    )
    return Harness(store, fleet, understudy, published, models, orchestrator)


async def run_to_end(h: Harness, run_id: str) -> None:
    h.orchestrator.submit(run_id)
    await asyncio.wait_for(h.orchestrator.wait(run_id), 10)


async def test_each_persona_runs_in_parallel_on_its_own_profile_and_the_run_completes(
    tmp_path: Path,
) -> None:
    done = call("finish", success=True, summary="done")
    h = harness(tmp_path, {"Ada": [call("scroll", direction="down"), done], "Bo": [done]})
    run_id = h.create(["Ada", "Bo"])
    await run_to_end(h, run_id)
    assert h.store.get_run(run_id).status == "completed"
    sessions = h.store.sessions(run_id)
    assert [s.status for s in sessions] == [SessionState.COMPLETED] * 2
    assert len(h.store.turns(sessions[0].session_id)) == 2
    # Two profiles, two devices, each session pinned to its own; origin = the target's.
    assert {o["device_id"] for o in h.understudy.opened} == {"dev-1", "dev-2"}
    assert all(o["allowed_origins"] == [SITE] for o in h.understudy.opened)
    # Closed and waited for before the browser is wiped, so the device's capacity is free.
    assert all(s.closed and s.closed_waiting for s in h.understudy.sessions)
    assert sorted(h.published.sessions) == sorted(s.session_id for s in sessions)
    assert h.published.runs == [run_id]


async def test_a_lost_browser_starts_a_new_generation_that_keeps_reactions_not_messages(
    tmp_path: Path,
) -> None:
    script = [
        call("react", sentiment="confused", note="where is the cart?"),
        call("click", ref="g1e1"),  # the first generation's tab dies here
        call("finish", success=True, summary="found it"),
    ]
    h = harness(tmp_path, {"Ada": script})
    h.understudy.lose_on_click = {1}
    run_id = h.create(["Ada"])
    await run_to_end(h, run_id)
    (session,) = h.store.sessions(run_id)
    assert session.status is SessionState.COMPLETED and session.generation == 2
    assert h.fleet.released[0] == ("dev-1", True)  # the lost profile goes back as broken
    requests = h.models["Ada"].requests
    last = requests[-1]
    assert last.history == ()  # the crashed generation's messages are dropped ...
    assert [r.note for r in last.prior_reactions] == ["where is the cart?"]  # ... not its reactions
    assert last.turn == 2  # the turn count goes on across generations
    turns = h.store.turns(session.session_id)
    assert [(t["turn"], t["generation"]) for t in turns] == [(1, 1), (2, 2)]


async def test_a_browser_process_that_dies_ends_its_generation_without_waiting_for_understudy(
    tmp_path: Path,
) -> None:
    h = harness(tmp_path, {"Ada": [call("finish", success=True, summary="done")]})

    h.understudy.hang = {1}
    h.fleet.crash_on_launch = {1}
    run_id = h.create(["Ada"])
    await run_to_end(h, run_id)
    (session,) = h.store.sessions(run_id)
    assert session.status is SessionState.COMPLETED and session.generation == 2
    assert h.fleet.released[0] == ("dev-1", True)
    assert h.understudy.sessions[0].closed
    assert h.understudy.sessions[0].closed_waiting is False  # a dead browser confirms nothing


async def test_after_the_last_allowed_generation_the_session_fails_and_the_run_completes(
    tmp_path: Path,
) -> None:
    h = harness(
        tmp_path,
        {
            "Ada": [call("click", ref="g1e1")] * 5,
            "Bo": [call("finish", success=True, summary="ok")],
        },
        max_generations=2,
    )
    h.understudy.lose_on_click = {1, 2, 3, 4}
    run_id = h.create(["Ada", "Bo"])
    await run_to_end(h, run_id)
    ada, bo = h.store.sessions(run_id)
    assert ada.status is SessionState.FAILED and "at most 2 generations" in (
        ada.failure_reason or ""
    )
    assert bo.status is SessionState.COMPLETED
    assert h.store.get_run(run_id).status == "completed"


async def test_a_restart_resumes_a_running_session_as_a_new_generation(tmp_path: Path) -> None:
    h = harness(tmp_path, {"Ada": [call("finish", success=True, summary="done")]})
    run_id = h.create(["Ada"])
    (session,) = h.store.sessions(run_id)
    # What the previous process left: the session running, two turns recorded.
    old = "0b7d8f4e-2f44-4f7e-9a40-6a1c9d2b7e55"
    h.store.start_session(session.session_id, understudy_session_id=old, device_id="dev-0")
    for turn in (1, 2):
        h.store.record_turn(
            session.session_id,
            {
                "turn": turn,
                "generation": 1,
                "started_at": "2026-12-01T12:00:00Z",
                "ended_at": "2026-12-01T12:00:01Z",
                "observation": {"url": f"{SITE}/", "title": "Shop"},
                "action": {"name": "scroll", "arguments": {"direction": "down", "ease": 5}},
                "outcome": {"ok": True, "summary": "scrolled down", "elapsed_ms": 5},
                "reactions": [],
            },
        )
    assert await h.orchestrator.start() == [run_id]
    await asyncio.wait_for(h.orchestrator.wait(run_id), 10)
    (session,) = h.store.sessions(run_id)
    assert session.status is SessionState.COMPLETED and session.generation == 2
    assert [t["turn"] for t in h.store.turns(session.session_id)] == [1, 2, 3]
    # The resumed generation goes on from turn 3, on the target again in a fresh browser.
    assert h.models["Ada"].requests[0].turn == 3
    assert h.understudy.sessions[0].calls[0] == ("navigate", f"{SITE}/")
    # The lost generation's Understudy session is deleted so it frees the device's origins.
    assert h.understudy.deleted == [old]


async def test_cancelling_stops_the_sessions_and_still_writes_partial_reports(
    tmp_path: Path,
) -> None:
    gate = asyncio.Event()

    class Slow(ScriptedModel):
        async def decide(self, request: TurnRequest) -> Decision:
            gate.set()
            await asyncio.sleep(30)
            raise AssertionError("cancelled before")  # pragma: no cover

    h = harness(tmp_path, {"Ada": []})
    h.models["Ada"] = Slow([])
    run_id = h.create(["Ada"])
    h.orchestrator.submit(run_id)
    await asyncio.wait_for(gate.wait(), 5)
    h.store.cancel_run(run_id)
    await h.orchestrator.cancel(run_id)
    (session,) = h.store.sessions(run_id)
    assert session.status is SessionState.CANCELLED
    assert h.store.get_run(run_id).status == "cancelled"
    assert h.published.sessions == [session.session_id] and h.published.runs == [run_id]
    assert h.understudy.sessions[0].closed


async def test_no_browser_for_a_persona_fails_that_session_only(tmp_path: Path) -> None:
    done = call("finish", success=True, summary="ok")
    h = harness(tmp_path, {"Ada": [done], "Bo": [done]})
    h.fleet.free = 0
    run_id = h.create(["Ada", "Bo"])
    await run_to_end(h, run_id)
    assert all(s.status is SessionState.FAILED for s in h.store.sessions(run_id))
    assert "no browser" in (h.store.sessions(run_id)[0].failure_reason or "")
    assert h.store.get_run(run_id).status == "completed"


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("ERROR", logger="synthetic_users.orchestrator")
