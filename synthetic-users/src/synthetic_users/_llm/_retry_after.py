"""How long a provider asked us to wait, read from its response headers.

Both providers send `retry-after` (RFC 9110 §10.2.3: delay-seconds or an HTTP-date) on a 429, and
OpenAI-compatible servers also send the non-standard `retry-after-ms`. The SDKs parse these only
for their own (disabled) retries, privately, so the adapters read them here.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping


def retry_after_s(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait before trying again, or None when the headers do not say.

    `retry-after-ms` wins (it is the more precise), then `retry-after` as seconds (fractions
    allowed, as servers send them), then `retry-after` as an HTTP-date relative to `now`. A date
    in the past means "now" (0.0); a negative or non-finite number is ignored.

    Args:
        headers: response headers; lookups must be case-insensitive (httpx's `Headers` are).
        now: the current POSIX time, for tests; defaults to `time.time()`.
    """
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            delay = float(value)
        except ValueError:
            continue
        if math.isfinite(delay) and delay >= 0:
            return delay / divisor
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000" parses zone-less; RFC 9110 dates are all GMT
        when = when.replace(tzinfo=datetime.UTC)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
