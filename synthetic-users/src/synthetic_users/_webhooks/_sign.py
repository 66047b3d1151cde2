"""Signing secrets and signatures as the Standard Webhooks specification defines them.

A secret is `whsec_` and the base64 of 32 random bytes; the HMAC key is those bytes. A delivery
carries three headers: `webhook-id` (the event's id, the same on every retry, so a receiver can
drop duplicates), `webhook-timestamp` (integer Unix seconds of this attempt) and
`webhook-signature` (`v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`).
See https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Final

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 (a prefix, not a secret)
SECRET_BYTES: Final = 32


def new_secret() -> str:
    """A fresh signing secret, `whsec_…`."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value of one delivery attempt (`v1,<base64>`)."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Every header of a signed delivery, `content-type` included."""
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, message_id, timestamp, body),
    }
