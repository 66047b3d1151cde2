"""An in-process, approximate sliding-window rate limiter.

This is the abuse backstop in front of authentication (300 requests/min per credential
pseudonym), standing in for the Workers Rate Limiting binding. It is approximate on purpose; the
exact quotas are counted in SQLite by the actors.

The two-bucket approximation counts hits in fixed windows and weighs the previous window by how
much of it still overlaps the sliding window ending now::

    estimate = previous * (1 - elapsed / window) + current

Refused hits are not counted, so a client that honours ``Retry-After`` gets through when told to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass
class _Buckets:
    window_index: int
    previous: int
    current: int
    last_seen: float


class ApproximateLimiter:
    """Allow at most about ``limit`` hits per key in any ``window_s``-second sliding window.

    Args:
        limit: Hits allowed per window, at least 1.
        window_s: Window length in seconds.
        now: Monotonic clock, injected so tests can move time without sleeping.
    """

    def __init__(self, limit: int, window_s: float, now: Callable[[], float]) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if not window_s > 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self._limit = limit
        self._window = window_s
        self._now = now
        self._keys: dict[str, _Buckets] = {}
        self._last_sweep = now()

    def __len__(self) -> int:
        """Number of keys currently tracked."""
        return len(self._keys)

    def hit(self, key: str) -> float | None:
        """Count one hit for ``key``.

        Returns:
            None when the hit is allowed; otherwise the whole number of seconds (at least 1) after
            which a retry will be allowed, for a ``Retry-After`` header.
        """
        now = self._now()
        self._sweep(now)
        index = math.floor(now / self._window)
        buckets = self._keys.get(key)
        if buckets is None:
            buckets = self._keys[key] = _Buckets(index, 0, 0, now)
        elif index != buckets.window_index:
            # Roll forward: the old current window becomes the previous one only if adjacent.
            buckets.previous = buckets.current if index == buckets.window_index + 1 else 0
            buckets.current = 0
            buckets.window_index = index
        buckets.last_seen = now
        elapsed = now / self._window - index  # fraction of the current window gone, in [0, 1)
        # The epsilon absorbs float rounding, so a retry at exactly the advised time is allowed.
        if buckets.previous * (1 - elapsed) + buckets.current + 1 <= self._limit + 1e-9:
            buckets.current += 1
            return None
        return float(max(1, math.ceil(self._wait(buckets, elapsed) * self._window)))

    def _wait(self, buckets: _Buckets, elapsed: float) -> float:
        """Return, in windows, how long until one more hit fits."""
        room = self._limit - 1
        if buckets.current <= room:
            # Still this window: wait until the previous window's weight has decayed enough.
            needed = 1 - (room - buckets.current) / buckets.previous
            return needed - elapsed
        # Next window: the current count becomes the previous one and must decay in turn.
        needed = 1 - room / buckets.current
        return (1 - elapsed) + needed

    def _sweep(self, now: float) -> None:
        # Amortised: at most one pass per window. A key idle for two windows has an estimate of
        # zero, so dropping it changes no decision.
        if now - self._last_sweep < self._window:
            return
        self._last_sweep = now
        horizon = now - 2 * self._window
        for key in [key for key, b in self._keys.items() if b.last_seen < horizon]:
            del self._keys[key]
