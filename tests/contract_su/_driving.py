"""What the contract tests do to a generated case before sending it.

- A positive case whose path names a run, a session, a screenshot, a persona or a webhook is
  pointed, for about half of the generated values, at one the live service holds (the seeded
  completed run and its session, a saved persona, the seeded endpoint), so reads and downloads
  answer 200 instead of stopping at 404. Deletes are never pointed at the seeded resources:
  every later read needs them; the scenarios prove `204`. The choice follows from the generated
  value (a CRC, not Python's salted `hash`), so a replayed case lands on the same target.
- A positive `createRun` gets a fresh `Idempotency-Key` when it sends one (the generator reuses
  small values, which would turn distinct creates into `409 idempotency_conflict`) and its
  `{persona_id}` entries name saved personas (an unknown one is a `400` about state, not data).
- A positive list case that sends a `cursor` gets one the service wrote for that list: cursors
  are opaque, so a generated one is a `400` about state (the scenarios prove that refusal).
- A positive `createRun` gets a public https target (`https://shop.example.com/<n>`): the
  schema's pattern admits `http` and any host, the public-HTTPS-host rule is the service's
  (documented in prose; `tests/synthetic_users/safety/test_ssrf.py` tries to break it).
- A positive `createWebhook` gets a public https URL: the schema's `url` is a bare string, the
  public-host rule is the service's (documented in prose), so most generated values are refused.
"""

from __future__ import annotations

import uuid
import zlib
from typing import TYPE_CHECKING, Any

from requests.structures import CaseInsensitiveDict
from schemathesis.core.parameters import ParameterLocation

from tests.contract_su._checks import operation_id
from tests.contract_su._live import SCREENSHOT, WEBHOOK_URL

if TYPE_CHECKING:
    from tests.contract_su._checks import Case
    from tests.contract_su._live import LiveService

DELETES = {"deletePersona", "deleteWebhook", "deleteCredential"}
# List operations, and the path whose first page gives a cursor the service wrote.
LISTS = {
    "listRuns": "/runs",
    "listPersonas": "/personas",
    "listWebhooks": "/webhooks",
    "listWebhookDeliveries": "/webhooks/{webhook}/deliveries",
    "listUsage": "/usage",
    "listCredentials": "/credentials",
}


def _is_positive(case: Case, location: ParameterLocation | None = None) -> bool:
    meta = case.meta
    if meta is None:
        return True
    if location is not None:
        return not meta.is_negative_at(location)
    return bool(meta.generation.mode.is_positive)


def _even(value: Any) -> bool:
    return zlib.crc32(str(value).encode()) % 2 == 0


def prepare(case: Case, live: LiveService, *, substitute: bool = True) -> None:
    """Adjust a generated case before it is sent (see the module docstring)."""
    op = operation_id(case)
    body = case.body
    if op == "createRun" and isinstance(body, dict) and _is_positive(case):
        case.body = _positive_run(body, live)
        headers = dict(case.headers or {})
        if "Idempotency-Key" in headers and _is_positive(case, ParameterLocation.HEADER):
            headers["Idempotency-Key"] = str(uuid.uuid4())
            case.headers = CaseInsensitiveDict(headers)
    if op == "createWebhook" and isinstance(body, dict) and _is_positive(case):
        url = body.get("url")
        if isinstance(url, str):
            case.body = {**body, "url": f"{WEBHOOK_URL}/{zlib.crc32(url.encode())}"}
    params = case.path_parameters
    if substitute and params and op not in DELETES and _is_positive(case, ParameterLocation.PATH):
        case.path_parameters = _substitute(dict(params), live)
    if params and op in DELETES:
        case.path_parameters = _spare_seeded(dict(params), live)
    query = case.query
    if op == "listUsage" and query and "run_id" in query and _is_positive(case):
        if _even(query["run_id"]):
            case.query = query = {**query, "run_id": live.run_id}
    if query and "cursor" in query and _is_positive(case, ParameterLocation.QUERY):
        case.query = {**query, "cursor": live.cursor(LISTS[op].format(webhook=live.webhook_id))}


def _positive_run(body: dict[str, Any], live: LiveService) -> dict[str, Any]:
    url = body.get("target_url")
    if isinstance(url, str):  # see the module docstring: which hosts are allowed is prose
        body = {**body, "target_url": f"https://shop.example.com/{zlib.crc32(url.encode())}"}
    # An unknown credential is a 400 about state, not data, and a stateful chain may have
    # deleted the seeded one (its id is in list responses): positive runs name none.
    body = {k: v for k, v in body.items() if k != "credential_id"}
    personas = body.get("personas")
    if not isinstance(personas, list):
        return body
    fixed = [
        {"persona_id": live.personas[zlib.crc32(str(p["persona_id"]).encode()) % 2]}
        if isinstance(p, dict) and "persona_id" in p
        else p
        for p in personas
    ]
    return {**body, "personas": fixed}


def _spare_seeded(params: dict[str, Any], live: LiveService) -> dict[str, Any]:
    """A delete never removes a seeded persona, webhook or credential: later positive cases
    name them (a stateful chain finds their ids in list responses). It deletes an unknown id of
    the same form instead, which answers 404 as documented."""
    seeded = {*live.personas, live.webhook_id, live.credential_id}
    for name, value in params.items():
        if isinstance(value, str) and value in seeded:
            prefix = value.rsplit("_", 1)[0]
            params[name] = f"{prefix}_{uuid.uuid4().hex}"
    return params


def _substitute(params: dict[str, Any], live: LiveService) -> dict[str, Any]:
    if "run_id" in params and _even(params["run_id"]):
        params["run_id"] = live.run_id
        if "session_id" in params and _even(params["session_id"]):
            params["session_id"] = live.session_id
    if "name" in params and _even(params["name"]):
        params["name"] = SCREENSHOT
    if "persona_id" in params and _even(params["persona_id"]):
        params["persona_id"] = live.personas[0]
    if "webhook_id" in params and _even(params["webhook_id"]):
        params["webhook_id"] = live.webhook_id
    if "credential_id" in params and _even(params["credential_id"]):
        params["credential_id"] = live.credential_id
    return params
