"""Rate limits per API key, and the bound on a customer's active runs.

Two token buckets per API key (its SHA-256 digest, never the key): one for runs created a minute,
one for requests of any kind a minute. A bucket holds up to `per_minute` tokens (the burst) and
refills continuously at `per_minute / 60` a second, so a key that waited a minute may send a full
minute's worth at once and then one every `60 / per_minute` seconds. An empty bucket says how long
until its next token, which is the `Retry-After` of the `429`.

`POST /runs` takes a run token before its slow checks (resolving the target) and gives it back
when the run is not created after all (a refused target, an idempotent replay discovered late,
too many active runs), so only runs written count. The active-run bound is checked against the
store right before the run is written, with no `await` between, so concurrent requests cannot
all slip under it.

Buckets live in memory (one process serves a data directory: `serve` locks it); a restart
forgives everyone, which errs on the side of the customer. Full buckets are dropped now and
then, so keys that went quiet cost nothing.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

PRUNE_EVERY: Final = 1024  # takes between sweeps of full buckets


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class TokenBuckets:
    """One token bucket per key, each holding up to `per_minute` tokens; 0 means no limit."""

    per_minute: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _takes: int = 0

    def take(self, key: str) -> float:
        """Take a token for `key`: 0.0 when taken, else the seconds until one is available."""
        if self.per_minute <= 0:
            return 0.0
        now = self.clock()
        bucket = self._refilled(key, now)
        self._takes += 1
        if self._takes % PRUNE_EVERY == 0:
            self._prune(now)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) * 60.0 / self.per_minute

    def give_back(self, key: str) -> None:
        """Return a token taken for work that did not happen after all."""
        if self.per_minute <= 0:
            return
        bucket = self._refilled(key, self.clock())
        bucket.tokens = min(float(self.per_minute), bucket.tokens + 1.0)

    def _refilled(self, key: str, now: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.per_minute), now)
        else:
            rate = self.per_minute / 60.0
            bucket.tokens = min(float(self.per_minute), bucket.tokens + (now - bucket.at) * rate)
            bucket.at = now
        return bucket

    def _prune(self, now: float) -> None:
        rate = self.per_minute / 60.0
        full = [
            key
            for key, b in self._buckets.items()
            if b.tokens + (now - b.at) * rate >= self.per_minute
        ]
        for key in full:
            del self._buckets[key]


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused, as the API answers it (`429`)."""

    code: str  # `rate_limited` or `too_many_active_runs`
    detail: str
    retry_after_s: int


def retry_after(seconds: float) -> int:
    """Whole seconds for `Retry-After` (RFC 9110 delay-seconds): rounded up, at least 1."""
    return max(1, math.ceil(seconds))


class RateLimits:
    """The limits `create_app` enforces. Each argument 0 (the default) means no limit.

    Args:
        runs_per_minute: Runs each API key may create a minute.
        requests_per_minute: Requests each API key may send a minute (every endpoint).
        max_active_runs: `queued` + `running` runs each customer may have.
        active_retry_s: The `Retry-After` of `too_many_active_runs` (when a run ends is unknown).
        clock: Monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        *,
        runs_per_minute: int = 0,
        requests_per_minute: int = 0,
        max_active_runs: int = 0,
        active_retry_s: int = 30,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runs = TokenBuckets(runs_per_minute, clock)
        self.requests = TokenBuckets(requests_per_minute, clock)
        self.max_active_runs = max_active_runs
        self.active_retry_s = active_retry_s

    def request(self, key: str) -> Refusal | None:
        """Charge one request to the API key with digest `key`; a refusal when over its limit."""
        wait = self.requests.take(key)
        if not wait:
            return None
        return Refusal(
            "rate_limited",
            f"at most {self.requests.per_minute} requests a minute per API key; "
            f"retry in {retry_after(wait)} s",
            retry_after(wait),
        )

    def take_run(self, key: str) -> Refusal | None:
        """Charge one run creation to the API key; a refusal when over its limit."""
        wait = self.runs.take(key)
        if not wait:
            return None
        return Refusal(
            "rate_limited",
            f"at most {self.runs.per_minute} runs a minute per API key; "
            f"retry in {retry_after(wait)} s",
            retry_after(wait),
        )

    def give_back_run(self, key: str) -> None:
        self.runs.give_back(key)

    def active(self, count: int) -> Refusal | None:
        """A refusal when a customer with `count` active runs may not start another."""
        if self.max_active_runs <= 0 or count < self.max_active_runs:
            return None
        return Refusal(
            "too_many_active_runs",
            f"this customer has {count} queued or running runs, the most allowed is "
            f"{self.max_active_runs}; wait for one to end or cancel one",
            self.active_retry_s,
        )
