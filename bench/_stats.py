"""Percentiles and summaries of latency samples."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method; NaN for no samples.

    Nearest rank reports a value that was actually observed, which is what a reader expects of a
    p99 taken from a few thousand samples.
    """
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(samples: Sequence[float]) -> dict[str, Any]:
    """Count, mean, p50, p95, p99 and max of ``samples`` (milliseconds in, milliseconds out)."""
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "mean": round(sum(samples) / len(samples), 3),
        "p50": round(percentile(samples, 50), 3),
        "p95": round(percentile(samples, 95), 3),
        "p99": round(percentile(samples, 99), 3),
        "max": round(max(samples), 3),
    }
