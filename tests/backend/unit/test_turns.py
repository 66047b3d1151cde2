"""The shared turn: persist, then send; a rolled-back turn reports nothing; timers never swallow."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from understudy._clock import ManualClock, SystemClock, wait_until
from understudy._problems import ProblemError
from understudy._security import Keys
from understudy._store._db import Database
from understudy._telemetry import Telemetry
from understudy._turns import NoTurnError, Outbox, Timer, Turns

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@dataclass
class _Out(Outbox):
    frames: list[str] = field(default_factory=list)


@dataclass
class _Actor:
    db: Database
    clock: ManualClock
    telemetry: Telemetry
    sent: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.turns: Turns[_Out] = Turns(
            db=self.db,
            clock=self.clock,
            telemetry=self.telemetry,
            outbox=_Out,
            deliver=self.deliver,
        )

    async def deliver(self, out: _Out) -> None:
        for frame in out.frames:  # what another process would see when the frame leaves
            self.sent.append((frame, _on_disk(self.db)))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "t.db")
    database.execute("CREATE TABLE t (n INTEGER)")
    yield database
    database.close()


@pytest.fixture
def actor(db: Database) -> _Actor:
    return _Actor(db, ManualClock(), Telemetry(None, Keys.from_master(b"t" * 32)))


def _on_disk(db: Database) -> list[tuple[str, int]]:
    other = sqlite3.connect(db.path)
    try:
        return [("t", n) for (n,) in other.execute("SELECT n FROM t").fetchall()]
    finally:
        other.close()


def _events(actor: _Actor) -> list[tuple[object, object]]:
    return [(e["event"], e.get("outcome")) for e in actor.telemetry.events]


async def test_frames_leave_only_after_the_turn_is_on_disk(actor: _Actor) -> None:
    def body(out: _Out, now: float) -> int:
        actor.db.execute("INSERT INTO t VALUES (1)")
        out.frames.append("ack")
        actor.turns.report("command.admitted", command="click", kind="write")
        assert actor.telemetry.events == []  # not before the commit
        return 7

    assert await actor.turns.run(body) == 7
    assert actor.sent == [("ack", [("t", 1)])]
    assert _events(actor) == [("command.admitted", None)]


async def test_a_turn_that_promises_nothing_stored_sends_before_the_group_commit(
    actor: _Actor,
) -> None:
    def body(out: _Out, now: float) -> None:
        actor.db.execute("INSERT INTO t VALUES (1)")
        out.frames.append("heartbeat_ack")

    await actor.turns.run(body, durable=False)
    assert actor.sent == [("heartbeat_ack", [])]  # left before the COMMIT
    await actor.db.durable()
    assert _on_disk(actor.db) == [("t", 1)]


async def test_a_durable_turn_delivers_marked_committed_and_one_that_is_not_does_not(
    db: Database,
) -> None:
    # A committed turn's frames need not wait for the turns other actors took since; a turn
    # that did not wait for its own commit must not skip that wait.
    committed: list[bool] = []

    async def deliver(out: _Out) -> None:
        committed.append(out.committed)

    turns: Turns[_Out] = Turns(
        db=db,
        clock=ManualClock(),
        telemetry=Telemetry(None, Keys.from_master(b"t" * 32)),
        outbox=_Out,
        deliver=deliver,
    )

    def body(out: _Out, now: float) -> None:
        db.execute("INSERT INTO t VALUES (1)")

    await turns.run(body)
    await turns.run(body, durable=False)
    assert committed == [True, False]


async def test_a_turn_that_fails_rolls_back_sends_nothing_and_reports_nothing(
    actor: _Actor,
) -> None:
    def body(out: _Out, now: float) -> None:
        actor.db.execute("INSERT INTO t VALUES (1)")
        out.frames.append("grant")
        actor.turns.report("command.outcome", outcome="succeeded")
        actor.turns.report_refusal("quota.decision", outcome="refused")
        raise RuntimeError("a bug in the body")

    with pytest.raises(RuntimeError):
        await actor.turns.run(body)
    assert actor.sent == []
    assert actor.telemetry.events == []
    assert actor.db.query("SELECT n FROM t") == []


async def test_a_refused_turn_reports_its_refusal_and_nothing_else(actor: _Actor) -> None:
    def body(out: _Out, now: float) -> None:
        actor.db.execute("INSERT INTO t VALUES (1)")
        actor.turns.report("quota.decision", scope="session_create", outcome="allowed")
        actor.turns.report_refusal("allocation.refused", outcome="refused", reason="no_device")
        raise ProblemError(503, "no_device_available", "no device")

    with pytest.raises(ProblemError):
        await actor.turns.run(body)
    assert _events(actor) == [("allocation.refused", "refused")]
    assert actor.db.query("SELECT n FROM t") == []


async def test_a_committed_turn_reports_every_record_in_order(actor: _Actor) -> None:
    def body(out: _Out, now: float) -> None:
        actor.turns.report_refusal("quota.decision", outcome="refused")
        actor.turns.report("command.admitted", command="click", kind="write")

    await actor.turns.run(body)
    assert _events(actor) == [("quota.decision", "refused"), ("command.admitted", None)]


def test_reporting_outside_a_turn_is_a_programming_error(actor: _Actor) -> None:
    with pytest.raises(NoTurnError):
        actor.turns.report("command.admitted")


async def test_turns_of_one_actor_run_one_at_a_time(actor: _Actor) -> None:
    order: list[str] = []

    async def deliver_slowly(out: _Out) -> None:
        order.append(f"send {out.frames[0]}")
        await asyncio.sleep(0)
        order.append(f"sent {out.frames[0]}")

    turns: Turns[_Out] = Turns(
        db=actor.db,
        clock=actor.clock,
        telemetry=actor.telemetry,
        outbox=_Out,
        deliver=deliver_slowly,
    )

    async def turn(name: str) -> None:
        def body(out: _Out, now: float) -> None:
            order.append(f"body {name}")
            out.frames.append(name)

        await turns.run(body)

    await asyncio.gather(turn("a"), turn("b"))
    assert order == ["body a", "send a", "sent a", "body b", "send b", "sent b"]


async def test_a_timer_turn_that_raises_is_logged_and_counted_and_the_timer_rearms(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    due: list[float] = [clock.now() + 10]
    fired: list[float] = []
    failures: list[str] = []

    async def fire() -> None:
        fired.append(clock.now())
        if len(fired) == 1:
            raise RuntimeError("tick failed")
        due.clear()

    timer = Timer(
        clock=clock,
        due=lambda: due[0] if due else None,
        fire=fire,
        failed=failures.append,
        actor="tenant",
    )
    timer.arm()
    with caplog.at_level(logging.ERROR, logger="understudy._turns"):
        await clock.advance(10)
    assert fired == [clock.now()]
    assert failures == ["tenant"]
    assert "tenant timer turn failed" in caplog.text
    assert "RuntimeError: tick failed" in caplog.text  # with its traceback
    assert timer.due is None  # not armed until a turn re-arms it

    due[0] = clock.now() + 5
    timer.arm()  # the next turn of the actor
    await clock.advance(5)
    assert len(fired) == 2
    assert failures == ["tenant"]


async def test_a_disarmed_timer_never_fires() -> None:
    clock = ManualClock()
    fired: list[float] = []

    async def fire() -> None:
        fired.append(clock.now())

    timer = Timer(
        clock=clock,
        due=lambda: clock.now() + 1,
        fire=fire,
        failed=lambda actor: None,
        actor="session",
    )
    timer.arm()
    timer.disarm()
    await clock.advance(2)
    assert fired == []


async def test_on_wall_clock_time_a_rearmed_timer_fires_once_at_its_latest_due() -> None:
    clock = SystemClock()
    due = [clock.now() + 0.05]
    fired: list[float] = []
    done = asyncio.Event()

    async def fire() -> None:
        fired.append(clock.now())
        done.set()

    timer = Timer(clock=clock, due=lambda: due[0], fire=fire, failed=print, actor="session")
    timer.arm()
    timer.arm()  # the same due: left alone
    due[0] = clock.now() + 0.1
    timer.arm()  # a later due replaces the earlier one
    await asyncio.wait_for(done.wait(), 5)
    await asyncio.sleep(0.1)  # the first due has passed too: it must not fire
    assert len(fired) == 1
    assert fired[0] >= due[0]
    assert timer.due is None


async def test_on_wall_clock_time_rearming_later_keeps_one_loop_timer_and_fires_at_the_last_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = SystemClock()
    loop = asyncio.get_running_loop()
    timers = 0
    call_later = loop.call_later

    def counted(delay: float, callback: object, *args: object) -> asyncio.TimerHandle:
        nonlocal timers
        timers += 1
        return call_later(delay, callback, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(loop, "call_later", counted)
    fired: list[float] = []
    done = asyncio.Event()

    async def fire() -> None:
        fired.append(clock.now())
        done.set()

    start = clock.now()
    timer = Timer(clock=clock, due=lambda: None, fire=fire, failed=print, actor="session")
    # A write's turns: its ready deadline, its work deadline, nothing open; then the next write.
    for offset in (0.05, 0.25, None, 0.06, 0.26, None, 0.07):
        timer.arm(None if offset is None else start + offset)
    assert timers == 1  # every later due time waits on the first loop timer
    assert timer.due == start + 0.07
    await asyncio.wait_for(done.wait(), 5)
    await asyncio.sleep(0.05)
    assert len(fired) == 1
    assert fired[0] >= start + 0.07
    assert timer.due is None


async def test_on_wall_clock_time_an_earlier_due_fires_at_its_time() -> None:
    clock = SystemClock()
    fired: list[float] = []
    done = asyncio.Event()

    async def fire() -> None:
        fired.append(clock.now())
        done.set()

    start = clock.now()
    timer = Timer(clock=clock, due=lambda: None, fire=fire, failed=print, actor="session")
    timer.arm(start + 5)
    timer.arm(start + 0.03)  # earlier than the loop timer set: it takes a new one
    await asyncio.wait_for(done.wait(), 2)
    assert start + 0.03 <= fired[0] < start + 1
    assert timer.due is None


async def test_on_wall_clock_time_a_disarmed_timer_never_fires() -> None:
    clock = SystemClock()
    fired: list[float] = []

    async def fire() -> None:
        fired.append(clock.now())

    timer = Timer(
        clock=clock, due=lambda: clock.now() + 0.02, fire=fire, failed=print, actor="session"
    )
    timer.arm()
    timer.disarm()
    await asyncio.sleep(0.1)
    assert fired == []
    assert timer.due is None


async def test_wait_until_on_wall_clock_time_returns_at_the_event_or_the_deadline() -> None:
    clock = SystemClock()
    event = asyncio.Event()
    started = clock.now()
    await wait_until(event, clock, started + 0.05)  # nobody sets it: the deadline ends the wait
    assert clock.now() - started >= 0.05
    asyncio.get_running_loop().call_later(0.02, event.set)
    started = clock.now()
    await wait_until(event, clock, started + 5)
    assert clock.now() - started < 4
