"""A step run every few seconds in a task of its own, until stopped.

The service claim's check (`_claim.py`), the revocation check (`_revocation.py`) and the node's
polls (`_node.py`) are such loops. A failed step is logged and the loop carries on: the next step
is the retry, and a watch that ended on one failed database read would leave the process serving
without it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging
    from collections.abc import Awaitable, Callable


class Periodic:
    """Runs `step` every `every_s` seconds (wall clock) from `start` to `stop`.

    Args:
        step: one round; returning False ends the loop (the claim is lost, say).
        every_s: the wait before each round.
        log: where a failed round is logged, with `failed` as the message.
        failed: what went wrong, in the log's words.
        wake: set to run the next round at once instead of after the wait.
    """

    def __init__(
        self,
        step: Callable[[], Awaitable[bool | None]],
        *,
        every_s: float,
        log: logging.Logger,
        failed: str,
        wake: asyncio.Event | None = None,
    ) -> None:
        self._step = step
        self._every_s = every_s
        self._log = log
        self._failed = failed
        self._wake = wake
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Cancel the loop and wait until it ended (a round in progress is cancelled)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._wait()
            try:
                if await self._step() is False:
                    return
            except Exception:  # the next round retries; a failure must not end the loop
                self._log.exception("%s", self._failed)

    async def _wait(self) -> None:
        if self._wake is None:
            await asyncio.sleep(self._every_s)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._every_s):
                await self._wake.wait()
        self._wake.clear()
