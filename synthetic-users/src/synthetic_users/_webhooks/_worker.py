"""`WebhookWorker`: sends each due delivery of the outbox, signed, and records every attempt.

One asyncio task, started and stopped by the service. It wakes when a delivery is due (or when
`wake()` says an event was written), sends at most `concurrency` requests at once with a
per-request timeout, and decides from the answer:

- 2xx: delivered.
- 410 Gone: the endpoint is disabled; nothing more is sent to it (its pending deliveries are
  cancelled).
- 5xx, 429, a timeout, a connection error: retried.
- Any other status (3xx, 4xx): retried like a 5xx. A receiver answering 400 or 404 is usually
  being redeployed or misrouted, and a bounded retry costs little; only 410 says "stop".

Retries follow `retry_schedule` (seconds; the defaults reach about 24 hours) with full jitter:
the n-th retry waits a uniformly random time in [0, schedule[n]], so receivers recovering from an
outage are not hit by every sender at once. When the schedule is spent the delivery `failed`.

Before each attempt the endpoint's name is resolved and every address checked: one that is
private, loopback or link-local (DNS rebinding) is not sent to; the attempt is recorded as
refused and retried like a connection error.

Every state lives in the store, so a restart picks up what was pending. An attempt in flight
when the process died is sent again (at-least-once; `webhook-id` lets the receiver drop it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import httpx

from synthetic_users._webhooks._sign import headers
from synthetic_users._webhooks._url import resolved_problem

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from synthetic_users._webhooks._store import DueDelivery, Outcome, WebhookStore

log = logging.getLogger("synthetic_users.webhooks")

DEFAULT_SCHEDULE: Final = (5.0, 30.0, 120.0, 600.0, 3600.0, 7200.0, 14400.0, 28800.0, 28800.0)
MAX_ERROR_CHARS: Final = 500


@dataclass(frozen=True)
class WorkerSettings:
    """How the worker sends; tests shrink the schedule and the poll interval."""

    retry_schedule: tuple[float, ...] = DEFAULT_SCHEDULE
    timeout_s: float = 10.0
    poll_interval_s: float = 5.0
    concurrency: int = 8
    batch: int = 50
    allow_loopback: bool = False  # the operator's loopback-for-development setting


def classify(status_code: int) -> Outcome:
    """What an HTTP answer means for the delivery (see the module's table)."""
    if 200 <= status_code < 300:
        return "delivered"
    if status_code == 410:
        return "disable"
    return "retry"


class WebhookWorker:
    """Delivers the outbox; owns no state but its task."""

    def __init__(
        self,
        store: WebhookStore,
        *,
        http: httpx.AsyncClient | None = None,
        settings: WorkerSettings | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._store = store
        self._settings = settings or WorkerSettings()
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(follow_redirects=False)
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(self._settings.concurrency)

    def start(self) -> None:
        """Start delivering (pending rows from before a restart included)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="webhooks")

    async def stop(self) -> None:
        """Stop; an attempt cut short is not recorded and is sent again after the next start."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._own_http:
            await self._http.aclose()

    def wake(self) -> None:
        """Look for due deliveries now (an event was just written)."""
        self._wake.set()

    def retry_delay(self, retry: int) -> float | None:
        """Seconds before retry number `retry` (1-based), or None when the schedule is spent."""
        schedule = self._settings.retry_schedule
        if retry > len(schedule):
            return None
        return schedule[retry - 1] * self._jitter()

    async def run_once(self) -> int:
        """Send every delivery due now; how many were attempted."""
        due = self._store.due(self._clock(), self._settings.batch)
        await asyncio.gather(*(self._attempt(d) for d in due))
        return len(due)

    async def _loop(self) -> None:
        while True:
            try:
                sent = await self.run_once()
            except Exception:
                log.exception("the webhook worker failed a round; trying again shortly")
                sent = 0
            if sent:
                continue
            await self._idle()

    async def _idle(self) -> None:
        wait = self._settings.poll_interval_s
        next_at = self._store.next_due_at()
        if next_at is not None:
            wait = max(0.0, min(wait, next_at - self._clock()))
        self._wake.clear()
        if self._sleep is not None:
            await self._sleep(wait)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=wait)

    async def _attempt(self, delivery: DueDelivery) -> None:
        async with self._slots:
            attempted_at = self._clock()
            timestamp = int(attempted_at)
            started = time.perf_counter()
            status_code: int | None = None
            outcome: Outcome = "retry"  # also when refused: the name may be pointed back
            error = await resolved_problem(
                delivery.url, allow_loopback=self._settings.allow_loopback
            )
            if error is None:
                try:
                    response = await self._http.post(
                        delivery.url,
                        content=delivery.body,
                        headers=headers(
                            delivery.secret, delivery.event_id, timestamp, delivery.body
                        ),
                        timeout=self._settings.timeout_s,
                    )
                    status_code = response.status_code
                    outcome = classify(status_code)
                except httpx.TimeoutException:
                    error = f"timed out after {self._settings.timeout_s:g} s"
                except httpx.HTTPError as exc:
                    error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
            duration_ms = (time.perf_counter() - started) * 1000
            next_retry_at = None
            if outcome == "retry":
                delay = self.retry_delay(delivery.attempts + 1)
                next_retry_at = None if delay is None else self._clock() + delay
            self._store.record_attempt(
                delivery,
                attempted_at=attempted_at,
                duration_ms=duration_ms,
                status_code=status_code,
                error=error,
                outcome=outcome,
                next_retry_at=next_retry_at,
            )
            log.info(
                "webhook %s attempt %d: %s",
                delivery.delivery_id,
                delivery.attempts + 1,
                status_code if status_code is not None else error,
            )
