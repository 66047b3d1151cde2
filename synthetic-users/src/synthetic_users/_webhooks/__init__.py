"""Webhooks: endpoints per customer, a durable outbox, signed deliveries with retries.

- `_sign.py`: secrets and signatures (Standard Webhooks).
- `_store.py`: `WebhookStore`, the rows (endpoints, outbox, deliveries, attempts).
- `_worker.py`: `WebhookWorker`, the asyncio task that sends due deliveries.
- `_url.py`: which endpoint URLs are accepted.

Exceptions: `WebhookNotFound` (a `synthetic_users._store.NotFound`).
"""

from __future__ import annotations

from synthetic_users._webhooks._sign import headers, new_secret, signature
from synthetic_users._webhooks._store import (
    EVENT_TYPES,
    AttemptRecord,
    DeliveryRecord,
    DueDelivery,
    WebhookNotFound,
    WebhookRecord,
    WebhookStore,
)
from synthetic_users._webhooks._url import endpoint_problem
from synthetic_users._webhooks._worker import WebhookWorker, WorkerSettings, classify

__all__ = [
    "EVENT_TYPES",
    "AttemptRecord",
    "DeliveryRecord",
    "DueDelivery",
    "WebhookNotFound",
    "WebhookRecord",
    "WebhookStore",
    "WebhookWorker",
    "WorkerSettings",
    "classify",
    "endpoint_problem",
    "headers",
    "new_secret",
    "signature",
]
