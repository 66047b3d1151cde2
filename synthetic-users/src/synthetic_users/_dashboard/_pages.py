"""The dashboard's route handlers: sign-in, runs, the live view, reports, personas."""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from litestar import Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Redirect

from synthetic_users._api._parse import run_request, validate
from synthetic_users._api._problems import ProblemError
from synthetic_users._api._routes import submit_run
from synthetic_users._artifacts import ArtifactNotFound, session_prefix
from synthetic_users._dashboard import _auth
from synthetic_users._dashboard._auth import (
    CSRF_FIELD,
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    CsrfRefused,
    DashboardError,
    SignedOut,
    SignIn,
    SignIns,
)
from synthetic_users._dashboard._forms import (
    CHOICES,
    PERSONA_DEFAULTS,
    FormErrors,
    RunForm,
    persona_document,
    persona_field,
)
from synthetic_users._dashboard._live import aggregate, run_live
from synthetic_users._dashboard._render import (
    FRAME,
    PAGE_HEADERS,
    STATIC_TYPES,
    environment,
    frame_context,
    html_response,
    page,
    render,
    static_file,
)
from synthetic_users._reports import read_transcript, render_aggregate_html, render_session_html
from synthetic_users._reports._render import ReportFrame
from synthetic_users._store import BadCursor, PersonaNotFound, RunNotFound, SessionNotFound
from synthetic_users.generated import models

if TYPE_CHECKING:
    from synthetic_users._api._routes import ApiState
    from synthetic_users._store import RunRecord, SessionRecord

log = logging.getLogger(__name__)
Req = Request[Any, Any, Any]
Form = dict[str, list[str]]
_RUN_ID: Final = re.compile(r"run_[0-9a-f]{32}")
_SESSION_ID: Final = re.compile(r"ses_[0-9a-f]{32}")
_PERSONA_ID: Final = re.compile(r"per_[0-9a-f]{32}")
_SCREENSHOT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,123}\.png")
_CURSOR: Final = re.compile(r"[A-Za-z0-9_-]{1,200}")
_NEXT: Final = re.compile(r"/dashboard(/[A-Za-z0-9_./-]*)?")
_IDEMPOTENCY: Final = re.compile(r"[\x21-\x7e]{1,255}")
PAGE_SIZE: Final = 20
POLL_MS: Final = 2000


# -- plumbing ------------------------------------------------------------------------------------


def _api(request: Req) -> ApiState:
    state: ApiState = request.app.state.api
    return state


def current_sign_in(request: Req) -> SignIn | None:
    return SignIns(_api(request).store).get(request.cookies.get(SESSION_COOKIE))


def signed_in(request: Req) -> SignIn:
    """The request's sign-in; `SignedOut` (a redirect to the sign-in page) when there is none."""
    who = current_sign_in(request)
    if who is None:
        raise SignedOut
    return who


async def _form(request: Req) -> Form:
    data = await request.form()
    return {key: [str(v) for v in data.getall(key)] for key in data}


def _first(form: Form, name: str) -> str:
    values = form.get(name) or [""]
    return values[0]


async def posted(request: Req) -> tuple[SignIn, Form]:
    """A POST's sign-in and form, after the CSRF checks (origin, then the session's token)."""
    _auth.check_origin(request)
    who = current_sign_in(request)
    if who is None:
        raise DashboardError(
            403, "Signed out", "your sign-in has ended; sign in again and send the form again"
        )
    form = await _form(request)
    _auth.check_token(who.csrf_token, _first(form, CSRF_FIELD))
    return who, form


def _see_other(path: str) -> Response[Any]:
    return Redirect(path, status_code=303, headers={"Cache-Control": "no-store"})


def on_dashboard_error(request: Req, exc: DashboardError) -> Response[Any]:
    if isinstance(exc, SignedOut):
        target = "/dashboard/sign-in"
        if request.method == "GET" and _NEXT.fullmatch(request.url.path):
            target += "?next=" + quote(request.url.path, safe="/")
        return Redirect(target, status_code=302, headers={"Cache-Control": "no-store"})
    who = None if isinstance(exc, CsrfRefused) else current_sign_in(request)
    return page("dashboard/error.html", who, None, exc.status, error=exc)


def on_unexpected(request: Req, exc: Exception) -> Response[Any]:
    # The route template, never the path: paths carry run and session ids.
    log.exception("dashboard error on %s %s", request.method, request.scope.get("path_template"))
    error = DashboardError(500, "Something went wrong", "an unexpected error occurred")
    return page("dashboard/error.html", None, None, 500, error=error)


def _run(state: ApiState, who: SignIn, run_id: str) -> RunRecord:
    try:
        if not _RUN_ID.fullmatch(run_id):
            raise RunNotFound(run_id)
        return state.store.get_run(run_id, who.customer_id)
    except RunNotFound:
        raise DashboardError(404, "Run not found", "there is no run with this id") from None


def _session(state: ApiState, run: RunRecord, session_id: str) -> SessionRecord:
    try:
        if not _SESSION_ID.fullmatch(session_id):
            raise SessionNotFound(session_id)
        return state.store.get_session(session_id, run.run_id)
    except SessionNotFound:
        raise DashboardError(
            404, "Persona session not found", "this run has no persona session with this id"
        ) from None


def run_href(run_id: str) -> str:
    return f"/dashboard/runs/{run_id}"


def session_href(run_id: str, session_id: str) -> str:
    return f"/dashboard/runs/{run_id}/sessions/{session_id}"


def screenshot_href(run_id: str, session_id: str, name: str) -> str:
    return f"{session_href(run_id, session_id)}/screenshots/{name}"


# -- sign-in -------------------------------------------------------------------------------------


@get("/", include_in_schema=False)
async def home(request: Req) -> Response[Any]:
    signed_in(request)
    return Redirect("/dashboard/runs", status_code=302)


def _sign_in_page(
    request: Req, next_path: str, error: str | None = None, status: int = 200
) -> Response[Any]:
    token = _auth.new_form_token()
    response = page(
        "dashboard/sign_in.html",
        None,
        None,
        status,
        form_token=token,
        next_path=next_path,
        error=error,
    )
    _auth.set_cookie(response, request, SIGN_IN_COOKIE, token, _auth.SIGN_IN_FORM_LIFETIME_S)
    return response


def _next(value: str | None) -> str:
    # Only a page of the dashboard: anything else would make the form an open redirect.
    if value and _NEXT.fullmatch(value) and "//" not in value:
        return value
    return "/dashboard/runs"


@get("/sign-in", include_in_schema=False)
async def sign_in_form(request: Req) -> Response[Any]:
    next_path = _next(request.query_params.get("next"))
    if current_sign_in(request) is not None:
        return Redirect(next_path, status_code=302)
    return _sign_in_page(request, next_path)


@post("/sign-in", include_in_schema=False)
async def sign_in(request: Req) -> Response[Any]:
    _auth.check_origin(request)
    form = await _form(request)
    _auth.check_token(request.cookies.get(SIGN_IN_COOKIE), _first(form, CSRF_FIELD))
    next_path = _next(_first(form, "next"))
    key = _first(form, "api_key").strip()
    created = SignIns(_api(request).store).create(key) if key else None
    if created is None:
        message = "enter your API key" if not key else "this API key is unknown or has been revoked"
        return _sign_in_page(request, next_path, message, 400)
    session_id, _who = created
    response = _see_other(next_path)
    _auth.set_cookie(response, request, SESSION_COOKIE, session_id, _auth.SESSION_LIFETIME_S)
    _auth.clear_cookie(response, request, SIGN_IN_COOKIE)
    return response


@post("/sign-out", include_in_schema=False)
async def sign_out(request: Req) -> Response[Any]:
    await posted(request)
    SignIns(_api(request).store).delete(request.cookies.get(SESSION_COOKIE))
    response = _see_other("/dashboard/sign-in")
    _auth.clear_cookie(response, request, SESSION_COOKIE)
    return response


# -- runs ----------------------------------------------------------------------------------------


@get("/runs", include_in_schema=False)
async def runs(request: Req) -> Response[Any]:
    who = signed_in(request)
    state = _api(request)
    cursor = request.query_params.get("cursor")
    if cursor is not None and not _CURSOR.fullmatch(cursor):
        raise DashboardError(400, "Bad page link", "this page link is not one the dashboard made")
    try:
        listing = state.store.list_runs(who.customer_id, limit=PAGE_SIZE, cursor=cursor)
    except BadCursor:
        raise DashboardError(
            400, "Bad page link", "this page link is not one the dashboard made"
        ) from None
    rows = [
        {"run": run, "progress": state.store.session_progress(run.run_id), "count": count}
        for run, count in listing.items
    ]
    return page(
        "dashboard/runs.html",
        who,
        "runs",
        rows=rows,
        next_cursor=listing.next_cursor,
        first_page=cursor is None,
        run_href=run_href,
    )


def _new_run_page(
    request: Req,
    who: SignIn,
    form: RunForm,
    errors: FormErrors | None = None,
    idempotency_key: str | None = None,
    status: int = 200,
) -> Response[Any]:
    saved = _api(request).store.list_personas(who.customer_id, limit=100).items
    return page(
        "dashboard/new_run.html",
        who,
        "new-run",
        status,
        form=form,
        errors=errors or FormErrors(),
        saved=saved,
        choices=CHOICES,
        idempotency_key=idempotency_key or str(uuid.uuid4()),
    )


@get("/runs/new", include_in_schema=False)
async def new_run(request: Req) -> Response[Any]:
    who = signed_in(request)
    return _new_run_page(request, who, RunForm.blank())


@post("/runs", include_in_schema=False)
async def start_run(request: Req) -> Response[Any]:
    who, data = await posted(request)
    state = _api(request)
    form = RunForm.parse(data)
    key = _first(data, "idempotency_key")
    key_or_none = key if _IDEMPOTENCY.fullmatch(key) else None
    if "add_persona" in data:
        # The no-script way to get one more fieldset: the same form back, one persona longer.
        form.add_inline()
        return _new_run_page(request, who, form, idempotency_key=key_or_none)
    errors = FormErrors()
    document = form.document(errors)
    try:
        run_request(document)  # the API's own validation, every field at once
    except ProblemError as exc:
        _field_errors(form, exc, errors)
    if errors:
        return _new_run_page(request, who, form, errors, key_or_none, status=400)
    try:
        run, _created = await submit_run(state, who.customer_id, document, key_or_none)
    except ProblemError as exc:
        _field_errors(form, exc, errors)
        if exc.code == "idempotency_conflict":
            key_or_none = None  # a fresh form: this one already started a run
        return _new_run_page(request, who, form, errors, key_or_none, status=exc.status)
    return _see_other(run_href(run.run_id))


def _field_errors(form: RunForm, exc: ProblemError, errors: FormErrors) -> None:
    if exc.code == "idempotency_conflict":
        errors.add(None, "This form already started a run; check the fields and send it again.")
        return
    for error in exc.errors or [{"path": "", "message": exc.detail or exc.code}]:
        name = form.field_for(error["path"])
        message = error["message"]
        if name == "personas":
            message = "choose at least one saved persona or write one (at most 10 in all)"
        elif name == "saved":
            message = "a chosen persona no longer exists; choose again"
        errors.add(name, message)


@get("/runs/{run_id:str}", include_in_schema=False)
async def run_page(request: Req, run_id: FromPath[str]) -> Response[Any]:
    who = signed_in(request)
    state = _api(request)
    live = run_live(state, _run(state, who, run_id))
    return page("dashboard/run.html", who, "runs", live=live, poll_ms=POLL_MS, **_links())


@get("/runs/{run_id:str}/live", include_in_schema=False)
async def run_live_fragment(request: Req, run_id: FromPath[str]) -> Response[Any]:
    """The live section alone, for the page's script to swap in (polling)."""
    who = signed_in(request)
    state = _api(request)
    live = run_live(state, _run(state, who, run_id))
    html = render("dashboard/_live.html", {"live": live, **_links()})
    return html_response(html)


def _links() -> dict[str, Any]:
    return {
        "run_href": run_href,
        "session_href": session_href,
        "screenshot_href": screenshot_href,
    }


@post("/runs/{run_id:str}/cancel", include_in_schema=False)
async def cancel_run(request: Req, run_id: FromPath[str]) -> Response[Any]:
    who, _form_data = await posted(request)
    state = _api(request)
    run = _run(state, who, run_id)
    run, changed = state.store.cancel_run(run.run_id, who.customer_id)
    if changed:
        state.services.run_cancelled(run)
    return _see_other(run_href(run.run_id))


# -- reports -------------------------------------------------------------------------------------


def _frame(who: SignIn, title_suffix: str, src: Any, href: Any = None) -> ReportFrame:
    return ReportFrame(
        environment=environment(),
        template=FRAME,
        # `frame` is the report's to set (from `template`); the rest is what the layout needs.
        context={
            **{k: v for k, v in frame_context(who, "runs").items() if k != "frame"},
            "title_suffix": title_suffix,
        },
        src=src,
        href=href,
    )


@get("/runs/{run_id:str}/report", include_in_schema=False)
async def aggregate_report(request: Req, run_id: FromPath[str]) -> Response[Any]:
    who = signed_in(request)
    state = _api(request)
    run = _run(state, who, run_id)
    report = aggregate(state, run)
    if report is None:
        raise DashboardError(
            404, "No report yet", "the aggregate report is written when the run ends"
        )
    sessions: dict[str, Any] = {}
    shots: dict[str, set[str]] = {}
    for persona in report["personas"]:
        sid = persona["session_id"]
        prefix = session_prefix(run.customer_id, run.run_id, sid)
        try:
            sessions[sid] = json.loads(state.artifacts.get(f"{prefix}/report.json"))
        except ArtifactNotFound:
            pass
        shots[sid] = {k.rsplit("/", 1)[1] for k in state.artifacts.list(f"{prefix}/screenshots")}

    def src(session_id: str, name: str) -> str | None:
        if name not in shots.get(session_id, set()):
            return None
        return screenshot_href(run.run_id, session_id, name)

    def href(session_id: str) -> str:
        return session_href(run.run_id, session_id)

    html = render_aggregate_html(report, sessions, frame=_frame(who, "Aggregate report", src, href))
    return html_response(html)


@get("/runs/{run_id:str}/sessions/{session_id:str}", include_in_schema=False)
async def session_report(
    request: Req, run_id: FromPath[str], session_id: FromPath[str]
) -> Response[Any]:
    who = signed_in(request)
    state = _api(request)
    run = _run(state, who, run_id)
    session = _session(state, run, session_id)
    prefix = session_prefix(run.customer_id, run.run_id, session.session_id)
    try:
        report = json.loads(state.artifacts.get(f"{prefix}/report.json"))
        transcript = read_transcript(state.artifacts.get(f"{prefix}/transcript.json.gz"))
    except ArtifactNotFound:
        raise DashboardError(
            404,
            "No timeline yet",
            f"the timeline of {session.persona_name} is written when the session ends",
        ) from None
    shots = {k.rsplit("/", 1)[1] for k in state.artifacts.list(f"{prefix}/screenshots")}

    def src(name: str) -> str | None:
        return screenshot_href(run.run_id, session.session_id, name) if name in shots else None

    html = render_session_html(
        report, transcript=transcript, frame=_frame(who, "Persona timeline", src)
    )
    return html_response(html)


@get("/runs/{run_id:str}/sessions/{session_id:str}/screenshots/{name:str}", include_in_schema=False)
async def screenshot(
    request: Req, run_id: FromPath[str], session_id: FromPath[str], name: FromPath[str]
) -> Response[Any]:
    who = signed_in(request)
    state = _api(request)
    run = _run(state, who, run_id)
    session = _session(state, run, session_id)
    missing = DashboardError(404, "Screenshot not found", "no screenshot with this name (yet)")
    if not _SCREENSHOT.fullmatch(name):
        raise missing
    prefix = session_prefix(run.customer_id, run.run_id, session.session_id)
    try:
        data = state.artifacts.get(f"{prefix}/screenshots/{name}")
    except ArtifactNotFound:
        raise missing from None
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=3600"}
    return Response(data, media_type="image/png", headers=headers)


# -- personas ------------------------------------------------------------------------------------


def _personas_page(
    request: Req,
    who: SignIn,
    values: dict[str, str] | None = None,
    errors: FormErrors | None = None,
    status: int = 200,
    notice: str | None = None,
) -> Response[Any]:
    saved = _api(request).store.list_personas(who.customer_id, limit=100).items
    return page(
        "dashboard/personas.html",
        who,
        "personas",
        status,
        saved=saved,
        values=values or dict(PERSONA_DEFAULTS),
        errors=errors or FormErrors(),
        choices=CHOICES,
        notice=notice,
    )


@get("/personas", include_in_schema=False)
async def personas(request: Req) -> Response[Any]:
    who = signed_in(request)
    notice = {"created": "Persona saved.", "deleted": "Persona deleted."}.get(
        request.query_params.get("done", "")
    )
    return _personas_page(request, who, notice=notice)


@post("/personas", include_in_schema=False)
async def create_persona(request: Req) -> Response[Any]:
    who, data = await posted(request)
    values = {name: _first(data, name) for name in PERSONA_DEFAULTS}
    try:
        persona = validate(models.PersonaInput, persona_document(values))
    except ProblemError as exc:
        errors = FormErrors()
        for error in exc.errors or []:
            errors.add(persona_field(error["path"]), error["message"])
        return _personas_page(request, who, values, errors, 400)
    _api(request).store.create_persona(who.customer_id, persona.to_wire())
    return _see_other("/dashboard/personas?done=created")


@post("/personas/{persona_id:str}/delete", include_in_schema=False)
async def delete_persona(request: Req, persona_id: FromPath[str]) -> Response[Any]:
    who, _data = await posted(request)
    try:
        if not _PERSONA_ID.fullmatch(persona_id):
            raise PersonaNotFound(persona_id)
        _api(request).store.delete_persona(who.customer_id, persona_id)
    except PersonaNotFound:
        raise DashboardError(
            404, "Persona not found", "there is no saved persona with this id"
        ) from None
    return _see_other("/dashboard/personas?done=deleted")


# -- static files --------------------------------------------------------------------------------


@get("/static/{name:str}", include_in_schema=False)
async def static(name: FromPath[str]) -> Response[Any]:
    data = static_file(name)
    suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    if data is None or suffix not in STATIC_TYPES:
        raise DashboardError(404, "Not found", "no such file")
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "public, max-age=300"}
    return Response(data, media_type=STATIC_TYPES[suffix], headers=headers)


HANDLERS: Final = [
    home,
    sign_in_form,
    sign_in,
    sign_out,
    runs,
    new_run,
    start_run,
    run_page,
    run_live_fragment,
    cancel_run,
    aggregate_report,
    session_report,
    screenshot,
    personas,
    create_persona,
    delete_persona,
    static,
]
__all__ = ["HANDLERS", "PAGE_HEADERS", "on_dashboard_error", "on_unexpected"]
