"""The operations of spec/synthetic-users/openapi.yaml, one handler each (downloads share)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from litestar import Request, Response, delete, get, post
from litestar.params import FromPath

from synthetic_users._api import _views
from synthetic_users._api._credentials import check_run_credential
from synthetic_users._api._parse import (
    idempotency_key,
    json_body,
    limit_and_cursor,
    run_request,
    validate,
)
from synthetic_users._api._problems import ProblemError, field_error, validation_failed
from synthetic_users._api._ratelimit import RateLimits
from synthetic_users._artifacts import ArtifactNotFound, run_prefix, session_prefix
from synthetic_users._retention import expired
from synthetic_users._safety._ssrf import TargetError, TargetPolicy
from synthetic_users._store import (
    SCHEMA_VERSION,
    BadCursor,
    IdempotencyConflict,
    NewRun,
    PersonaNotFound,
    RunNotFound,
    SessionNotFound,
    key_digest,
)
from synthetic_users.generated import models

if TYPE_CHECKING:
    from synthetic_users._api._ratelimit import Refusal
    from synthetic_users._api._services import Services
    from synthetic_users._artifacts import ArtifactStore
    from synthetic_users._safety._credentials import Credentials
    from synthetic_users._store import PersonaRecord, RunRecord, SessionRecord, Store

JSON: Final = "application/json"
_RUN_ID: Final = re.compile(r"run_[0-9a-f]{32}")
_SESSION_ID: Final = re.compile(r"ses_[0-9a-f]{32}")
_PERSONA_ID: Final = re.compile(r"per_[0-9a-f]{32}")
_SCREENSHOT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,123}\.png")
# Artifact file name -> content type. Reports are self-contained, so their page may load nothing
# but its own inline styles and data: images (the report may quote text from the target site).
MEDIA_TYPES: Final = {
    "report.json": JSON,
    # Litestar adds `; charset=utf-8` to text/* itself.
    "report.md": "text/markdown",
    "report.html": "text/html",
    "transcript.json.gz": "application/gzip",
}
ARTIFACT_HEADERS: Final = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; "
        "frame-ancestors 'none'"
    ),
}
WWW_AUTHENTICATE: Final = {"WWW-Authenticate": 'Bearer realm="synthetic-users"'}


@dataclass(frozen=True)
class RunDefaults:
    """What a run gets for the fields its request leaves out."""

    turn_budget: int = 30
    model: str = "heuristic"


@dataclass(frozen=True)
class ApiState:
    store: Store
    artifacts: ArtifactStore
    services: Services
    defaults: RunDefaults
    targets: TargetPolicy = field(default_factory=TargetPolicy)
    limits: RateLimits = field(default_factory=RateLimits)
    # Where `POST /credentials` seals passwords; a run's `credential_id` is checked against it.
    credentials: Credentials | None = None


def _state(request: Request[Any, Any, Any]) -> ApiState:
    state: ApiState = request.app.state.api
    return state


def _json(
    body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> Response[Any]:
    return Response(body, status_code=status, media_type=JSON, headers=headers or {})


def customer(request: Request[Any, Any, Any]) -> str:
    """The customer whose `Authorization: Bearer <api key>` this is; `401` otherwise."""
    values = request.headers.getall("authorization", [])
    if len(values) > 1:
        # Two credentials: a proxy and the service could each authenticate a different one.
        raise ProblemError(
            401, "unauthorized", "send exactly one Authorization header", headers=WWW_AUTHENTICATE
        )
    scheme, _, token = (values[0] if values else "").partition(" ")
    who = None
    state = _state(request)
    if scheme.lower() == "bearer" and token.strip():
        who = state.store.authenticate(token.strip())
    if who is None:
        raise ProblemError(
            401,
            "unauthorized",
            "send your API key as 'Authorization: Bearer suk_…' (create one with "
            "`synthetic-users keys create --customer <name>`)",
            headers=WWW_AUTHENTICATE,
        )
    # Limits are per key, not per customer: a leaked or runaway key cannot starve the others.
    digest = key_digest(token.strip())
    request.state.api_key_digest = digest
    refused = state.limits.request(digest)
    if refused is not None:
        raise _limited(refused)
    return who


def _limited(refusal: Refusal) -> ProblemError:
    return ProblemError(
        429,
        refusal.code,
        refusal.detail,
        headers={"Retry-After": str(refusal.retry_after_s)},
    )


def _run(state: ApiState, who: str, run_id: str) -> RunRecord:
    if not _RUN_ID.fullmatch(run_id):
        raise ProblemError(404, "run_not_found", "no run with this id")
    try:
        return state.store.get_run(run_id, who)
    except RunNotFound:
        if expired(state.store, run_id, who) is not None:
            raise ProblemError(
                410,
                "run_expired",
                "the run passed its retention period and was deleted with its sessions and "
                "artifacts",
            ) from None
        raise ProblemError(404, "run_not_found", "no run with this id") from None


# -- runs ----------------------------------------------------------------------------------------


@post("/runs", status_code=202)
async def create_run(request: Request[Any, Any, Any]) -> Response[Any]:
    state = _state(request)
    who = customer(request)
    key = idempotency_key(request)
    data = await json_body(request)
    run, created = await submit_run(state, who, data, key, limit_key=request.state.api_key_digest)
    body = models.RunCreated(run_id=run.run_id, status=run.status.value).to_wire()
    return _json(body, 202 if created else 200, {"Location": _views.run_path(run.run_id)})


async def submit_run(
    state: ApiState, who: str, data: Any, key: str | None, *, limit_key: str | None = None
) -> tuple[RunRecord, bool]:
    """Validate a `RunRequest` document, write the run and tell the services; `POST /runs`.

    The dashboard's form calls this too, so both refuse the same requests with the same
    field errors. Returns the run and whether it was created now (False: an idempotent replay).
    The target must pass the target policy (its name resolved); the run is charged to the rate
    limit of `limit_key` (the API key's digest; by default the customer's, for the dashboard).

    Raises:
        ProblemError: `400 validation_failed` (JSON pointers into `data`), `target_not_allowed`
            or `target_unresolvable`; `409` on a reused key; `429` over a limit.
    """
    req = run_request(data)
    personas: list[dict[str, Any]] = []
    missing: list[dict[str, str]] = []
    for i, persona in enumerate(req.personas):
        if isinstance(persona, models.PersonaRef):
            try:
                saved = state.store.get_persona(who, persona.persona_id)
            except PersonaNotFound:
                missing.append({"path": f"/personas/{i}/persona_id", "message": "no such persona"})
                continue
            personas.append({"persona_id": saved.persona_id, **saved.persona})
        else:
            personas.append(persona.to_wire())
    if missing:
        raise validation_failed(missing)
    check_run_credential(state.credentials, who, req.credential_id)
    new = NewRun(
        target_url=req.target_url,
        task=req.task,
        turn_budget=req.turn_budget or state.defaults.turn_budget,
        model=req.model or state.defaults.model,
        personas=personas,
        # The request as validated (defaults filled in), so equal requests hash equal.
        request_hash=hashlib.sha256(
            json.dumps(req.to_wire(), sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest(),
        credential_id=req.credential_id,
    )
    try:
        # A replay answers the run it created, whatever the limits and the target's DNS say now.
        replay = state.store.replay(who, key, new.request_hash) if key is not None else None
        if replay is not None:
            return replay, False
        digest = limit_key or f"customer:{who}"
        refused = state.limits.take_run(digest)
        if refused is not None:
            raise _limited(refused)
        try:
            await _check_target(state, req.target_url)
            # No await from here to the write: concurrent creates cannot all pass the bound.
            refused = state.limits.active(state.store.count_active_runs(who))
            if refused is not None:
                raise _limited(refused)
            run, created = state.store.create_run(who, new, idempotency_key=key)
        except BaseException:
            state.limits.give_back_run(digest)
            raise
        if not created:  # another request with this key won while the target resolved
            state.limits.give_back_run(digest)
    except IdempotencyConflict:
        raise ProblemError(
            409,
            "idempotency_conflict",
            "this Idempotency-Key already created a run from a different request; "
            "use a new key for a new run",
        ) from None
    if created:
        state.services.run_created(run)
    return run, created


async def _check_target(state: ApiState, url: str) -> None:
    """`400 target_not_allowed` / `target_unresolvable` unless `url` is a public target."""
    try:
        await state.targets.check(url)
    except TargetError as exc:
        raise ProblemError(
            400,
            exc.code,
            f"/target_url: {exc.reason}",
            errors=[{"path": "/target_url", "message": exc.reason}],
        ) from None


@get("/runs")
async def list_runs(request: Request[Any, Any, Any]) -> Response[Any]:
    state = _state(request)
    who = customer(request)
    limit, cursor = limit_and_cursor(request)
    try:
        page = state.store.list_runs(who, limit=limit, cursor=cursor)
    except BadCursor as exc:
        raise field_error("cursor", str(exc)) from None
    return _json(_views.run_list(page.items, page.next_cursor))


@get("/runs/{run_id:str}")
async def get_run(request: Request[Any, Any, Any], run_id: FromPath[str]) -> Response[Any]:
    state = _state(request)
    run = _run(state, customer(request), run_id)
    view = _views.run_view(run, state.store.sessions(run_id), state.store.reactions(run_id=run_id))
    return _json(view)


@delete("/runs/{run_id:str}", status_code=200)
async def cancel_run(request: Request[Any, Any, Any], run_id: FromPath[str]) -> Response[Any]:
    state = _state(request)
    who = customer(request)
    _run(state, who, run_id)
    run, changed = state.store.cancel_run(run_id, who)
    if changed:
        state.services.run_cancelled(run)
    view = _views.run_view(run, state.store.sessions(run_id), state.store.reactions(run_id=run_id))
    return _json(view, 202 if changed else 200)


@get("/runs/{run_id:str}/sessions/{session_id:str}")
async def get_session(
    request: Request[Any, Any, Any], run_id: FromPath[str], session_id: FromPath[str]
) -> Response[Any]:
    state = _state(request)
    _run(state, customer(request), run_id)
    session = _session(state, run_id, session_id)
    view = _views.session_detail(
        session,
        state.store.reactions(session_id=session_id),
        state.store.turns(session_id),
    )
    return _json(view)


def _session(state: ApiState, run_id: str, session_id: str) -> SessionRecord:
    if not _SESSION_ID.fullmatch(session_id):
        raise ProblemError(404, "session_not_found", "no session with this id in this run")
    try:
        return state.store.get_session(session_id, run_id)
    except SessionNotFound:
        raise ProblemError(
            404, "session_not_found", "no session with this id in this run"
        ) from None


# -- artifacts -----------------------------------------------------------------------------------


@get(
    [
        "/runs/{run_id:str}/report.json",
        "/runs/{run_id:str}/report.md",
        "/runs/{run_id:str}/report.html",
    ]
)
async def run_report(request: Request[Any, Any, Any], run_id: FromPath[str]) -> Response[Any]:
    state = _state(request)
    run = _run(state, customer(request), run_id)
    name = request.url.path.rsplit("/", 1)[1]
    key = f"{run_prefix(run.customer_id, run_id)}/{name}"
    return _artifact(
        state, key, MEDIA_TYPES[name], "the aggregate report is written when the run ends"
    )


@get(
    [
        "/runs/{run_id:str}/sessions/{session_id:str}/transcript.json.gz",
        "/runs/{run_id:str}/sessions/{session_id:str}/report.json",
        "/runs/{run_id:str}/sessions/{session_id:str}/report.md",
        "/runs/{run_id:str}/sessions/{session_id:str}/report.html",
    ]
)
async def session_artifact(
    request: Request[Any, Any, Any], run_id: FromPath[str], session_id: FromPath[str]
) -> Response[Any]:
    state = _state(request)
    run = _run(state, customer(request), run_id)
    _session(state, run_id, session_id)
    name = request.url.path.rsplit("/", 1)[1]
    key = f"{session_prefix(run.customer_id, run_id, session_id)}/{name}"
    return _artifact(state, key, MEDIA_TYPES[name], f"{name} is written when the session ends")


@get("/runs/{run_id:str}/sessions/{session_id:str}/screenshots/{name:str}")
async def screenshot(
    request: Request[Any, Any, Any],
    run_id: FromPath[str],
    session_id: FromPath[str],
    name: FromPath[str],
) -> Response[Any]:
    state = _state(request)
    run = _run(state, customer(request), run_id)
    _session(state, run_id, session_id)
    if not _SCREENSHOT.fullmatch(name):
        raise ProblemError(404, "artifact_not_found", "no screenshot with this name")
    key = f"{session_prefix(run.customer_id, run_id, session_id)}/screenshots/{name}"
    return _artifact(state, key, "image/png", "no screenshot with this name (yet)")


def _artifact(state: ApiState, key: str, media_type: str, missing: str) -> Response[Any]:
    try:
        data = state.artifacts.get(key)
    except ArtifactNotFound:
        raise ProblemError(404, "artifact_not_found", missing) from None
    headers = dict(ARTIFACT_HEADERS)
    if key.endswith(".gz"):
        # A file to save, not a body to decompress: no Content-Encoding.
        headers["Content-Disposition"] = 'attachment; filename="transcript.json.gz"'
    return Response(data, media_type=media_type, headers=headers)


# -- personas ------------------------------------------------------------------------------------


@post("/personas", status_code=201)
async def create_persona(request: Request[Any, Any, Any]) -> Response[Any]:
    state = _state(request)
    who = customer(request)
    persona = validate(models.PersonaInput, await json_body(request))
    record = state.store.create_persona(who, persona.to_wire())
    return _json(_views.saved_persona(record), 201, {"Location": f"/personas/{record.persona_id}"})


@get("/personas")
async def list_personas(request: Request[Any, Any, Any]) -> Response[Any]:
    state = _state(request)
    who = customer(request)
    limit, cursor = limit_and_cursor(request)
    try:
        page = state.store.list_personas(who, limit=limit, cursor=cursor)
    except BadCursor as exc:
        raise field_error("cursor", str(exc)) from None
    return _json(_views.persona_list(page.items, page.next_cursor))


@get("/personas/{persona_id:str}")
async def get_persona(request: Request[Any, Any, Any], persona_id: FromPath[str]) -> Response[Any]:
    state = _state(request)
    who = customer(request)
    return _json(_views.saved_persona(_persona(state, who, persona_id)))


@delete("/personas/{persona_id:str}", status_code=204)
async def delete_persona(request: Request[Any, Any, Any], persona_id: FromPath[str]) -> None:
    state = _state(request)
    who = customer(request)
    _persona(state, who, persona_id)
    try:
        state.store.delete_persona(who, persona_id)
    except PersonaNotFound:
        raise ProblemError(404, "persona_not_found", "no saved persona with this id") from None


def _persona(state: ApiState, who: str, persona_id: str) -> PersonaRecord:
    try:
        if not _PERSONA_ID.fullmatch(persona_id):
            raise PersonaNotFound(persona_id)
        return state.store.get_persona(who, persona_id)
    except PersonaNotFound:
        raise ProblemError(404, "persona_not_found", "no saved persona with this id") from None


# -- operations ----------------------------------------------------------------------------------


@get("/healthz")
async def healthz(request: Request[Any, Any, Any]) -> Response[Any]:
    _state(request).store.ping()
    return _json(models.Health(status="ok", schema_version=SCHEMA_VERSION).to_wire())


ROUTES: Final = [
    create_run,
    list_runs,
    get_run,
    cancel_run,
    get_session,
    run_report,
    session_artifact,
    screenshot,
    create_persona,
    list_personas,
    get_persona,
    delete_persona,
    healthz,
]
