"""The webhook and usage operations of the spec (`/webhooks…`, `/usage`), one handler each."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from litestar import Request, Response, delete, get, post
from litestar.params import FromPath

from synthetic_users._api._parse import json_body, limit_and_cursor, validate
from synthetic_users._api._problems import ProblemError, field_error
from synthetic_users._api._routes import _json, _state, customer
from synthetic_users._store import BadCursor, rfc3339
from synthetic_users._usage import UsageStore
from synthetic_users._webhooks import WebhookNotFound, WebhookStore, endpoint_problem
from synthetic_users.generated import models

if TYPE_CHECKING:
    from synthetic_users._store import Store
    from synthetic_users._usage import Totals, UsageRecord
    from synthetic_users._webhooks import DeliveryRecord, WebhookRecord

_WEBHOOK_ID: Final = re.compile(r"whk_[0-9a-f]{32}")
_RUN_ID: Final = re.compile(r"run_[0-9a-f]{32}")
_USAGE_PARAMS: Final = ("run_id", "from", "to")


def _webhooks(request: Request[Any, Any, Any]) -> WebhookStore:
    return WebhookStore(_state(request).store)


def _not_found() -> ProblemError:
    return ProblemError(404, "webhook_not_found", "no webhook with this id")


def _webhook(request: Request[Any, Any, Any], who: str, webhook_id: str) -> WebhookRecord:
    if not _WEBHOOK_ID.fullmatch(webhook_id):
        raise _not_found()
    try:
        return _webhooks(request).get(who, webhook_id)
    except WebhookNotFound:
        raise _not_found() from None


def webhook_view(record: WebhookRecord) -> dict[str, Any]:
    body: dict[str, Any] = {
        "webhook_id": record.webhook_id,
        "url": record.url,
        "events": record.events,
        "status": record.status,
        "created_at": rfc3339(record.created_at),
    }
    if record.disabled_reason:
        body["disabled_reason"] = record.disabled_reason
    return models.Webhook.model_validate(body).to_wire()


def delivery_view(record: DeliveryRecord) -> dict[str, Any]:
    attempts = []
    for a in record.attempts:
        attempt: dict[str, Any] = {
            "attempt": a.attempt,
            "attempted_at": rfc3339(a.attempted_at),
            "duration_ms": round(a.duration_ms, 3),
        }
        if a.status_code is not None:
            attempt["status_code"] = a.status_code
        if a.error is not None:
            attempt["error"] = a.error
        if a.next_retry_at is not None:
            attempt["next_retry_at"] = rfc3339(a.next_retry_at)
        attempts.append(attempt)
    body: dict[str, Any] = {
        "delivery_id": record.delivery_id,
        "event_id": record.event_id,
        "event_type": record.event_type,
        "subject_id": record.subject_id,
        "status": record.status,
        "created_at": rfc3339(record.created_at),
        "attempts": attempts,
    }
    if record.next_attempt_at is not None and record.status == "pending":
        body["next_attempt_at"] = rfc3339(record.next_attempt_at)
    if record.ended_at is not None:
        body["ended_at"] = rfc3339(record.ended_at)
    return models.Delivery.model_validate(body).to_wire()


def register_webhook(
    store: Store, who: str, data: Any, *, allow_loopback: bool
) -> tuple[WebhookRecord, str]:
    """Validate a `WebhookRequest` document and create the endpoint; `POST /webhooks`.

    The dashboard's form calls this too, so both refuse the same endpoints with the same
    field errors. Returns the endpoint and its signing secret (shown once, never again).

    Raises:
        ProblemError: `400 validation_failed`, with JSON pointers into `data`.
    """
    listed = data.get("events") if isinstance(data, dict) else None
    if isinstance(listed, list) and len(set(map(str, listed))) != len(listed):
        # The model says so too, but for the whole body; name the field.
        raise field_error("/events", "name each event once")
    req = validate(models.WebhookRequest, data)
    events: list[str] = list(req.to_wire()["events"])
    problem = endpoint_problem(req.url, allow_loopback=allow_loopback)
    if problem:
        raise field_error("/url", problem)
    return WebhookStore(store).create(who, req.url, events)


def allows_loopback(request: Request[Any, Any, Any]) -> bool:
    return bool(getattr(request.app.state, "allow_loopback", False))


@post("/webhooks", status_code=201)
async def create_webhook(request: Request[Any, Any, Any]) -> Response[Any]:
    who = customer(request)
    data = await json_body(request)
    record, secret = register_webhook(
        _state(request).store, who, data, allow_loopback=allows_loopback(request)
    )
    body = {**webhook_view(record), "secret": secret}
    body = models.WebhookCreated.model_validate(body).to_wire()
    return _json(body, 201, {"Location": f"/webhooks/{record.webhook_id}"})


@get("/webhooks")
async def list_webhooks(request: Request[Any, Any, Any]) -> Response[Any]:
    who = customer(request)
    limit, cursor = limit_and_cursor(request)
    try:
        page = _webhooks(request).list_webhooks(who, limit=limit, cursor=cursor)
    except BadCursor as exc:
        raise field_error("cursor", str(exc)) from None
    body: dict[str, Any] = {"webhooks": [webhook_view(r) for r in page.items]}
    if page.next_cursor:
        body["next_cursor"] = page.next_cursor
    return _json(body)


@get("/webhooks/{webhook_id:str}")
async def get_webhook(request: Request[Any, Any, Any], webhook_id: FromPath[str]) -> Response[Any]:
    return _json(webhook_view(_webhook(request, customer(request), webhook_id)))


@delete("/webhooks/{webhook_id:str}", status_code=204)
async def delete_webhook(request: Request[Any, Any, Any], webhook_id: FromPath[str]) -> None:
    who = customer(request)
    _webhook(request, who, webhook_id)
    try:
        _webhooks(request).delete(who, webhook_id)
    except WebhookNotFound:
        raise _not_found() from None


@get("/webhooks/{webhook_id:str}/deliveries")
async def list_deliveries(
    request: Request[Any, Any, Any], webhook_id: FromPath[str]
) -> Response[Any]:
    who = customer(request)
    _webhook(request, who, webhook_id)
    limit, cursor = limit_and_cursor(request)
    try:
        page = _webhooks(request).deliveries(who, webhook_id, limit=limit, cursor=cursor)
    except BadCursor as exc:
        raise field_error("cursor", str(exc)) from None
    except WebhookNotFound:
        raise _not_found() from None
    body: dict[str, Any] = {"deliveries": [delivery_view(r) for r in page.items]}
    if page.next_cursor:
        body["next_cursor"] = page.next_cursor
    return _json(body)


# -- usage ---------------------------------------------------------------------------------------


def usage_view(record: UsageRecord) -> dict[str, Any]:
    return {
        "usage_id": record.usage_id,
        "run_id": record.run_id,
        "session_id": record.session_id,
        "browser_minutes": round(record.browser_minutes, 3),
        "turns": record.turns,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "created_at": rfc3339(record.created_at),
        "billed": record.posted,
    }


def totals_view(totals: Totals) -> dict[str, Any]:
    return {
        "sessions": totals.sessions,
        "browser_minutes": round(totals.browser_seconds / 60.0, 3),
        "turns": totals.turns,
        "input_tokens": totals.input_tokens,
        "output_tokens": totals.output_tokens,
    }


def _time_param(request: Request[Any, Any, Any], name: str) -> float | None:
    values = request.query_params.getall(name, [])
    if len(values) > 1:
        raise field_error(name, "send it once")
    if not values:
        return None
    try:
        moment = datetime.fromisoformat(values[0])
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise field_error(
            name, "must be an RFC 3339 date-time with a zone, like 2026-12-01T09:00:00Z"
        )
    return moment.timestamp()


@get("/usage")
async def list_usage(request: Request[Any, Any, Any]) -> Response[Any]:
    who = customer(request)
    limit, cursor = limit_and_cursor(request, other=_USAGE_PARAMS)
    run_ids = request.query_params.getall("run_id", [])
    if len(run_ids) > 1:
        raise field_error("run_id", "send it once")
    run_id = run_ids[0] if run_ids else None
    if run_id is not None and not _RUN_ID.fullmatch(run_id):
        raise field_error("run_id", "not a run id (run_ and 32 hex digits)")
    since, until = _time_param(request, "from"), _time_param(request, "to")
    usage = UsageStore(_state(request).store)
    try:
        page = usage.list_usage(
            who, run_id=run_id, since=since, until=until, limit=limit, cursor=cursor
        )
    except BadCursor as exc:
        raise field_error("cursor", str(exc)) from None
    totals = usage.totals(who, run_id=run_id, since=since, until=until)
    body: dict[str, Any] = {
        "usage": [usage_view(r) for r in page.items],
        "totals": totals_view(totals),
    }
    if page.next_cursor:
        body["next_cursor"] = page.next_cursor
    return _json(models.UsageList.model_validate(body).to_wire())


ROUTES: Final = [
    create_webhook,
    list_webhooks,
    get_webhook,
    delete_webhook,
    list_deliveries,
    list_usage,
]
