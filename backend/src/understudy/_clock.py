"""Injected time: every deadline reads a `Clock`, so tests drive 24 h in milliseconds."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Unix seconds."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return at or after `deadline` (unix seconds); cancellable."""
        ...


class SystemClock:
    """Wall-clock time."""

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, deadline: float) -> None:
        delay = deadline - time.time()
        if delay > 0:
            await asyncio.sleep(delay)


class ManualClock:
    """A clock that moves only when a test calls `advance`; sleepers wake in deadline order."""

    def __init__(self, start: float = 1_796_000_000.0) -> None:
        self._now = start
        self._changed = asyncio.Event()

    def now(self) -> float:
        return self._now

    async def sleep_until(self, deadline: float) -> None:
        while self._now < deadline:
            self._changed.clear()
            await self._changed.wait()

    async def advance(self, seconds: float) -> None:
        """Move time forward and let every task due by then run."""
        self._now += seconds
        self._changed.set()
        # Give woken timers a few loop turns to run their actor turns.
        for _ in range(20):
            await asyncio.sleep(0)


async def wait_until(event: asyncio.Event, clock: Clock, deadline: float) -> None:
    """Return when `event` is set or `clock` reaches `deadline`, whichever comes first."""
    if isinstance(clock, SystemClock):
        # Wall-clock time needs no task per side: a timeout on this task's own wait (every
        # command's request waits here once or twice).
        delay = deadline - clock.now()
        if event.is_set() or delay <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await event.wait()
        return
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep_until(deadline))
    try:
        await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        sleeper.cancel()


def utc(ts: float) -> datetime:
    """A timezone-aware UTC datetime for the generated models."""
    return datetime.fromtimestamp(ts, UTC)


def iso(ts: float) -> str:
    """RFC 3339 UTC with seconds precision and a `Z`, as the spec's examples write it."""
    dt = datetime.fromtimestamp(ts, UTC)
    if dt.microsecond:
        return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return dt.isoformat(timespec="seconds").replace("+00:00", "Z")
