"""`StripeBiller`: posts owed usage to Stripe Meter Events through the official SDK.

Runs only when `STRIPE_API_KEY` is set. Each owed meter event (`UsageStore.enqueue_postings`)
is sent with `POST /v1/billing/meter_events` (`client.v1.billing.meter_events.create`):
`event_name`, `payload[stripe_customer_id]`, `payload[value]`, `timestamp` (when the session
ended), `identifier` and the `Idempotency-Key` header both the usage event id and its meter
(`meter_identifier`). Never posted twice: a row is marked `posted` once Stripe answers; an answer
lost to a crash is re-sent with the same key, which Stripe answers as the first time (and the
`identifier` deduplicates beyond the key's 24 hours).

- 200: `posted`.
- 429, 409, 5xx, a connection error or a timeout: retried with full-jitter backoff
  (`retry_schedule`), then `failed` when it is spent.
- 400, 404 (the request itself is wrong): `failed`, Stripe's message kept in `last_error`.
- 401, 403 (the key): retried, so fixing the key resumes billing.

The call is the SDK's synchronous one (its `requests` client), run in a worker thread: the SDK's
async client passes the form body to httpx as `data=`, which this httpx deprecates. Postings are
few (two per persona session), so a thread per call costs nothing that matters.

The SDK's own retries are off (`max_network_retries=0`): the schedule here is durable, the SDK's
is not. `api_base` is configurable so tests point the SDK at a local server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import stripe

if TYPE_CHECKING:
    from collections.abc import Callable

    from synthetic_users._usage._store import MeterPosting, UsageStore

log = logging.getLogger("synthetic_users.billing")

DEFAULT_METERS: Final = {
    "browser_minutes": "synthetic_users_browser_minutes",
    "model_tokens": "synthetic_users_model_tokens",
}
DEFAULT_SCHEDULE: Final = (5.0, 30.0, 120.0, 600.0, 3600.0, 7200.0, 14400.0, 28800.0, 28800.0)
_PERMANENT: Final = (400, 404)


@dataclass(frozen=True)
class BillerSettings:
    api_key: str
    api_base: str = "https://api.stripe.com"
    meters: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_METERS))
    retry_schedule: tuple[float, ...] = DEFAULT_SCHEDULE
    timeout_s: float = 30.0
    poll_interval_s: float = 30.0


class StripeBiller:
    """Owns the billing task and the Stripe client."""

    def __init__(
        self,
        usage: UsageStore,
        settings: BillerSettings,
        *,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._usage = usage
        self._settings = settings
        self._clock = clock
        self._jitter = jitter
        self._http = stripe.RequestsClient(timeout=settings.timeout_s)
        self._client = stripe.StripeClient(
            settings.api_key,
            base_addresses={"api": settings.api_base},
            max_network_retries=0,
            http_client=self._http,
        )
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="billing")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._http.close()  # type: ignore[no-untyped-call]

    def wake(self) -> None:
        self._wake.set()

    async def run_once(self) -> int:
        """Owe what is new, then post every due meter event once; how many were sent."""
        self._usage.enqueue_postings(self._settings.meters)
        due = self._usage.due_postings(self._clock())
        for posting in due:
            await self._post(posting)
        return len(due)

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                log.exception("the billing round failed; trying again shortly")
            wait = self._settings.poll_interval_s
            next_at = self._usage.next_posting_at()
            if next_at is not None:
                wait = max(0.0, min(wait, next_at - self._clock()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait)

    async def _post(self, posting: MeterPosting) -> None:
        try:
            await asyncio.to_thread(
                self._client.v1.billing.meter_events.create,
                {
                    "event_name": posting.event_name,
                    "identifier": posting.identifier,
                    "timestamp": posting.timestamp,
                    "payload": {
                        "stripe_customer_id": posting.stripe_customer_id,
                        "value": str(posting.value),
                    },
                },
                {"idempotency_key": posting.identifier},
            )
        except stripe.StripeError as exc:
            status = exc.http_status
            message = f"{status or 'no answer'}: {exc.user_message or type(exc).__name__}"[:500]
            retry_at = None
            if status not in _PERMANENT:
                delay = self._delay(posting.attempts + 1)
                retry_at = None if delay is None else self._clock() + delay
            log.warning("meter event %s not posted: %s", posting.identifier, message)
            self._usage.posting_done(
                posting.identifier, posted=False, error=message, retry_at=retry_at
            )
            return
        self._usage.posting_done(posting.identifier, posted=True, error=None, retry_at=None)

    def _delay(self, retry: int) -> float | None:
        schedule = self._settings.retry_schedule
        if retry > len(schedule):
            return None
        return schedule[retry - 1] * self._jitter()
