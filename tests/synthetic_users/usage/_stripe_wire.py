"""A local stand-in for Stripe's `POST /v1/billing/meter_events`, per Stripe's API reference.

It checks the bearer key, parses the form-encoded body (`payload[value]=…`), and answers:
- 200 with a `billing.meter_event` object (`object`, `created`, `event_name`, `identifier`,
  `livemode`, `payload`, `timestamp`);
- the same body again, with `Idempotent-Replayed: true`, for an `Idempotency-Key` it has
  answered before (Stripe's documented replay);
- scripted errors in Stripe's error shape `{"error": {type, code, message, param?}}`: a 429
  (`rate_limit`) or a 400 (`invalid_request_error`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from .._http import Recorded, Reply

API_KEY = "sk_test_synthetic_users_local"
PATH = "/v1/billing/meter_events"

RATE_LIMITED = Reply(
    429,
    {
        "error": {
            "type": "invalid_request_error",
            "code": "rate_limit",
            "message": "Request rate limit exceeded. Learn more about rate limits here "
            "https://stripe.com/docs/rate-limits.",
        }
    },
)


def bad_request(message: str, param: str) -> Reply:
    return Reply(
        400, {"error": {"type": "invalid_request_error", "message": message, "param": param}}
    )


@dataclass
class StripeWire:
    """Answers meter events; `script` holds error replies for the next requests."""

    script: list[Reply] = field(default_factory=list)
    missing_meters: set[str] = field(default_factory=set)
    answered: dict[str, bytes] = field(default_factory=dict)  # Idempotency-Key -> first body
    created: list[dict[str, str]] = field(default_factory=list)  # meter events Stripe kept

    def __call__(self, request: Recorded) -> Reply:
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return Reply(401, {"error": {"type": "invalid_request_error", "message": "bad key"}})
        if request.path != PATH:
            return Reply(404, {"error": {"type": "invalid_request_error", "message": "no route"}})
        key = request.headers.get("idempotency-key", "")
        if key in self.answered:
            return Reply(200, self.answered[key], {"Idempotent-Replayed": "true"})
        if self.script:
            return self.script.pop(0)
        params = form(request)
        if params["event_name"] in self.missing_meters:
            return bad_request(
                f"No active meter was found for event_name {params['event_name']}", "event_name"
            )
        body = json.dumps(
            {
                "object": "billing.meter_event",
                "created": int(time.time()),
                "event_name": params["event_name"],
                "identifier": params["identifier"],
                "livemode": False,
                "payload": {
                    "stripe_customer_id": params["payload[stripe_customer_id]"],
                    "value": params["payload[value]"],
                },
                "timestamp": int(params["timestamp"]),
            }
        ).encode()
        self.answered[key] = body
        self.created.append(params)
        return Reply(200, body, {"Request-Id": f"req_{len(self.created)}"})


def form(request: Recorded) -> dict[str, Any]:
    return dict(parse_qsl(request.body.decode()))
