"""Stopping the services: every timer turn under way ends before the database closes."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from understudy import _turns
from understudy._bootstrap import build_services
from understudy._clock import ManualClock
from understudy._config import load_settings
from understudy._store import migrate

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from understudy._services import Services
    from understudy._turns import Timer


def _services(tmp_path: Path) -> Services:
    settings = load_settings({"UNDERSTUDY_DATA_DIR": str(tmp_path / "data")})
    running = build_services(settings, ManualClock())
    migrate(running.db, now=0.0)
    return running


def _held(timer: Timer) -> tuple[asyncio.Event, asyncio.Event, asyncio.Event]:
    """Make the timer's next turn wait at its start (as behind its actor's lock) until `go`;
    `ended` is set once it is over, whichever way."""
    started, go, ended = asyncio.Event(), asyncio.Event(), asyncio.Event()
    fire = timer._fire

    async def held() -> None:
        started.set()
        try:
            await go.wait()
            await fire()
        finally:
            ended.set()

    timer._fire = held
    return started, go, ended


def _timer_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_stop_waits_for_a_session_timer_turn_under_way_before_closing_the_database(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    services = _services(tmp_path)
    ran: list[str] = []
    agent = services.session_agent(str(uuid.uuid4()))
    timer = agent._turns.timer
    assert timer is not None
    started, go, ended = _held(timer)
    expire = agent._expire_due

    def body(out: object, now: float) -> None:
        expire(out, now)  # type: ignore[arg-type]  # the agent's own outbox
        ran.append("expired")

    agent._expire_due = body  # type: ignore[method-assign]
    timer.arm(services.clock.now())  # due now: the turn starts
    await started.wait()

    stopping = asyncio.create_task(services.stop())
    # The stop gets as far as it can while the turn is held: not past waiting for it.
    await asyncio.wait({stopping}, timeout=0.2)
    go.set()
    await asyncio.wait_for(ended.wait(), timeout=5)
    await stopping

    assert ran == ["expired"]  # it ran to its end on the open database
    assert _timer_errors(caplog) == []
    assert timer.due is None


async def test_stop_cancels_a_timer_turn_that_does_not_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_turns, "STOP_WAIT_S", 0.01, raising=False)
    services = _services(tmp_path)
    coordinator = services.coordinator("acme")
    timer = coordinator._turns.timer
    assert timer is not None
    started, _never, ended = _held(timer)
    timer.arm(services.clock.now())
    await started.wait()

    await services.stop()  # returns: the held turn is cancelled, nothing is half done

    assert ended.is_set()
    assert _timer_errors(caplog) == []
