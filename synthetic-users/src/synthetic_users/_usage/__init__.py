"""Usage and billing: one usage event per persona session, posted to Stripe Meter Events.

- `_store.py`: `UsageStore` (usage events, Stripe customer ids, the meter events owed).
- `_stripe.py`: `StripeBiller`, the asyncio task posting them through the `stripe` SDK.
"""

from __future__ import annotations

from synthetic_users._usage._store import (
    DIMENSIONS,
    MeterPosting,
    Totals,
    UsageRecord,
    UsageStore,
    meter_identifier,
    usage_id,
)
from synthetic_users._usage._stripe import DEFAULT_METERS, BillerSettings, StripeBiller

__all__ = [
    "DEFAULT_METERS",
    "DIMENSIONS",
    "BillerSettings",
    "MeterPosting",
    "StripeBiller",
    "Totals",
    "UsageRecord",
    "UsageStore",
    "meter_identifier",
    "usage_id",
]
