"""The loop behind the service's watches and polls: a failed round is logged, never the end."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from understudy._periodic import Periodic

if TYPE_CHECKING:
    import pytest

log = logging.getLogger("tests.periodic")


async def test_a_failed_round_is_logged_and_the_next_one_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rounds: list[int] = []
    done = asyncio.Event()

    async def step() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise RuntimeError("the database did not answer")
        done.set()

    loop = Periodic(step, every_s=0.001, log=log, failed="the check failed")
    loop.start()
    async with asyncio.timeout(5):
        await done.wait()
    await loop.stop()
    assert rounds == [0, 1]
    [record] = [r for r in caplog.records if r.name == "tests.periodic"]
    assert record.getMessage() == "the check failed"
    assert record.exc_info is not None


async def test_a_round_that_returns_false_ends_the_loop() -> None:
    rounds = 0

    async def step() -> bool:
        nonlocal rounds
        rounds += 1
        return False

    loop = Periodic(step, every_s=0.001, log=log, failed="unused")
    loop.start()
    assert loop._task is not None
    async with asyncio.timeout(5):
        await loop._task
    assert rounds == 1
    await loop.stop()  # stopping an ended loop is fine


async def test_a_wake_up_runs_the_next_round_before_the_wait_is_over() -> None:
    wake = asyncio.Event()
    ran = asyncio.Event()

    async def step() -> None:
        ran.set()

    loop = Periodic(step, every_s=3600, wake=wake, log=log, failed="unused")
    loop.start()
    wake.set()
    async with asyncio.timeout(5):
        await ran.wait()
    assert not wake.is_set()  # consumed: the next round waits again
    await loop.stop()


async def test_stop_cancels_a_round_in_progress() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def step() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    loop = Periodic(step, every_s=0.001, log=log, failed="unused")
    loop.start()
    async with asyncio.timeout(5):
        await started.wait()
    await loop.stop()
    assert cancelled.is_set()
