"""The dashboard's webhook and usage pages, over the API's own operations (`_api/_hooks.py`).

- `/dashboard/webhooks`: the customer's endpoints (URL, events, active or disabled and why), a
  form to add one and a button to delete each. The form is validated by `register_webhook`,
  the very function behind `POST /webhooks`; its errors sit beside the control they name. The
  signing secret is on the page that answers the form and nowhere else, ever: it is not
  stored for display, and no later page (nor a reload by GET) can show it again.
- `/dashboard/webhooks/<id>`: the endpoint's delivery log, newest first, each delivery with its
  attempts (time, HTTP status or error, duration, next retry).
- `/dashboard/usage`: the totals and the usage event of each persona session, optionally of
  one run, newest first, a page at a time.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from litestar import Response, get, post
from litestar.params import FromPath

from synthetic_users._api._hooks import allows_loopback, register_webhook
from synthetic_users._api._problems import ProblemError
from synthetic_users._dashboard._auth import DashboardError
from synthetic_users._dashboard._forms import FormErrors, webhook_document, webhook_field
from synthetic_users._dashboard._pages import (
    PAGE_SIZE,
    Req,
    _api,
    _see_other,
    posted,
    run_href,
    session_href,
    signed_in,
)
from synthetic_users._dashboard._render import page
from synthetic_users._store import BadCursor, RunNotFound, SessionNotFound
from synthetic_users._usage import UsageStore
from synthetic_users._webhooks import EVENT_TYPES, WebhookNotFound, WebhookStore

if TYPE_CHECKING:
    from synthetic_users._dashboard._auth import SignIn
    from synthetic_users._store import Page
    from synthetic_users._webhooks import WebhookRecord

_WEBHOOK_ID: Final = re.compile(r"whk_[0-9a-f]{32}")
_RUN_ID: Final = re.compile(r"run_[0-9a-f]{32}")
_CURSOR: Final = re.compile(r"[A-Za-z0-9_-]{1,200}")
EVENT_HINTS: Final = {
    "run.completed": "a run ended (completed, failed or cancelled)",
    "session.completed": "a persona session that was started ended",
}
RUN_CHOICES: Final = 100


def _bad_page_link() -> DashboardError:
    return DashboardError(400, "Bad page link", "this page link is not one the dashboard made")


def _cursor(request: Req) -> str | None:
    cursor = request.query_params.get("cursor")
    if cursor is not None and not _CURSOR.fullmatch(cursor):
        raise _bad_page_link()
    return cursor


def webhook_href(webhook_id: str) -> str:
    return f"/dashboard/webhooks/{webhook_id}"


def _webhook(request: Req, who: SignIn, webhook_id: str) -> WebhookRecord:
    try:
        if not _WEBHOOK_ID.fullmatch(webhook_id):
            raise WebhookNotFound(webhook_id)
        return WebhookStore(_api(request).store).get(who.customer_id, webhook_id)
    except WebhookNotFound:
        raise DashboardError(
            404, "Webhook not found", "there is no webhook endpoint with this id"
        ) from None


# -- webhooks ------------------------------------------------------------------------------------


def _webhooks_page(
    request: Req,
    who: SignIn,
    values: dict[str, Any] | None = None,
    errors: FormErrors | None = None,
    status: int = 200,
    notice: str | None = None,
    created: tuple[WebhookRecord, str] | None = None,
) -> Response[Any]:
    endpoints = WebhookStore(_api(request).store).list_webhooks(who.customer_id, limit=100).items
    return page(
        "dashboard/webhooks.html",
        who,
        "webhooks",
        status,
        endpoints=endpoints,
        values=values or {"url": "", "events": list(EVENT_TYPES)},
        errors=errors or FormErrors(),
        event_types=EVENT_TYPES,
        event_hints=EVENT_HINTS,
        notice=notice,
        created=created,
        webhook_href=webhook_href,
    )


@get("/webhooks", include_in_schema=False)
async def webhooks(request: Req) -> Response[Any]:
    who = signed_in(request)
    notice = {"deleted": "Webhook endpoint deleted."}.get(request.query_params.get("done", ""))
    return _webhooks_page(request, who, notice=notice)


@post("/webhooks", include_in_schema=False)
async def create_webhook(request: Req) -> Response[Any]:
    who, data = await posted(request)
    document = webhook_document(data)
    values = {"url": document["url"], "events": document["events"]}
    try:
        created = register_webhook(
            _api(request).store,
            who.customer_id,
            document,
            allow_loopback=allows_loopback(request),
        )
    except ProblemError as exc:
        errors = FormErrors()
        for error in exc.errors or [{"path": "", "message": exc.detail or exc.code}]:
            name = webhook_field(error["path"])
            message = error["message"]
            if name == "events" and not document["events"]:
                message = "choose at least one event"
            errors.add(name, message)
        return _webhooks_page(request, who, values, errors, 400)
    # The secret is in this answer only (no redirect that would have to carry it); the page
    # is `no-store`, so going back does not bring it out of a cache either.
    return _webhooks_page(request, who, status=201, created=created)


@post("/webhooks/{webhook_id:str}/delete", include_in_schema=False)
async def delete_webhook(request: Req, webhook_id: FromPath[str]) -> Response[Any]:
    who, _data = await posted(request)
    record = _webhook(request, who, webhook_id)
    try:
        WebhookStore(_api(request).store).delete(who.customer_id, record.webhook_id)
    except WebhookNotFound:
        raise DashboardError(
            404, "Webhook not found", "there is no webhook endpoint with this id"
        ) from None
    return _see_other("/dashboard/webhooks?done=deleted")


@get("/webhooks/{webhook_id:str}", include_in_schema=False)
async def webhook_deliveries(request: Req, webhook_id: FromPath[str]) -> Response[Any]:
    who = signed_in(request)
    record = _webhook(request, who, webhook_id)
    cursor = _cursor(request)
    try:
        listing = WebhookStore(_api(request).store).deliveries(
            who.customer_id, record.webhook_id, limit=PAGE_SIZE, cursor=cursor
        )
    except BadCursor:
        raise _bad_page_link() from None
    return page(
        "dashboard/webhook.html",
        who,
        "webhooks",
        webhook=record,
        deliveries=listing.items,
        next_cursor=listing.next_cursor,
        first_page=cursor is None,
        webhook_href=webhook_href,
        run_href=run_href,
    )


# -- usage ---------------------------------------------------------------------------------------


@get("/usage", include_in_schema=False)
async def usage(request: Req) -> Response[Any]:
    who = signed_in(request)
    state = _api(request)
    cursor = _cursor(request)
    run_id = request.query_params.get("run_id") or None
    errors = FormErrors()
    if run_id is not None:
        try:
            if not _RUN_ID.fullmatch(run_id):
                raise RunNotFound(run_id)
            state.store.get_run(run_id, who.customer_id)
        except RunNotFound:
            errors.add("run_id", "there is no run with this id; choose one from the list")
    runs = [run for run, _count in state.store.list_runs(who.customer_id, limit=RUN_CHOICES).items]
    if errors:
        return page(
            "dashboard/usage.html",
            who,
            "usage",
            400,
            errors=errors,
            runs=runs,
            run_id=run_id,
            totals=None,
            rows=[],
            next_cursor=None,
            first_page=True,
        )
    store = UsageStore(state.store)
    try:
        listing: Page = store.list_usage(
            who.customer_id, run_id=run_id, limit=PAGE_SIZE, cursor=cursor
        )
    except BadCursor:
        raise _bad_page_link() from None
    tasks = {run.run_id: run.task for run in runs}
    rows = []
    for record in listing.items:
        if record.run_id not in tasks:
            try:
                tasks[record.run_id] = state.store.get_run(record.run_id, who.customer_id).task
            except RunNotFound:
                tasks[record.run_id] = record.run_id
        try:
            persona = state.store.get_session(record.session_id, record.run_id).persona_name
        except SessionNotFound:
            persona = record.session_id
        rows.append({"usage": record, "task": tasks[record.run_id], "persona": persona})
    return page(
        "dashboard/usage.html",
        who,
        "usage",
        errors=errors,
        runs=runs,
        run_id=run_id,
        totals=store.totals(who.customer_id, run_id=run_id),
        rows=rows,
        next_cursor=listing.next_cursor,
        first_page=cursor is None,
        run_href=run_href,
        session_href=session_href,
    )


HOOK_HANDLERS: Final = [webhooks, create_webhook, delete_webhook, webhook_deliveries, usage]
__all__ = ["HOOK_HANDLERS"]
