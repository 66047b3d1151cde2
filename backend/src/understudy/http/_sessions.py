"""`/v1/sessions`: create (attended or unattended), read, delete, and their OPTIONS."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from litestar import HttpMethod, Request, Response, delete, get, post, route
from litestar.params import FromPath

from understudy._origins import OriginError, canonicalize_origins
from understudy._policy import CREATE_WAIT_S
from understudy._problems import ProblemError, invalid_request
from understudy._views import is_terminal, session_view, tombstone_view
from understudy.generated import models as m
from understudy.http._auth import ConsumerDep, ServicesDep, consumer_guard, unless_revoked
from understudy.http._parsing import UUID, parse, parse_session_id, read_body
from understudy.http._responses import json_response

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

    from understudy._services import Services


def _timed_creates(app: ASGIApp) -> ASGIApp:
    """Middleware: the create histogram, by mode and status, of what the caller waited.

    Around the guard too, so refused credentials are counted; the handler says the mode once
    the body shows it.
    """

    async def timed(scope: Scope, receive: Receive, send: Send) -> None:
        services: Services = scope["litestar_app"].state.services
        started = time.perf_counter()  # wall time: the histogram is what the caller waited
        status = 500

        async def seen(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await app(scope, receive, seen)
        finally:
            mode = scope.get("state", {}).get("create_mode", "unknown")
            services.metrics.observe_create(mode, status, time.perf_counter() - started)

    return timed


def unattended_enabled(services: Services, tenant: str) -> bool:
    """The `UNATTENDED_ENABLED_TENANTS` setting or the tenant's durable flag (operator API)."""
    if tenant in services.settings.unattended_enabled_tenants:
        return True
    return services.repos.operators.unattended_flag(tenant)


@post("/v1/sessions", guards=[consumer_guard], middleware=[_timed_creates])
async def create_session(
    request: Request[Any, Any, Any],
    services: ServicesDep,
    who: ConsumerDep,
) -> Response[Any]:
    body = await read_body(request)
    request.state.create_mode = "unattended" if body.strip() else "attended"
    coordinator = services.coordinator(who.tenant)
    keys = request.headers.getall("idempotency-key", [])
    if len(keys) > 1:
        # Which one a proxy or a retry library would keep is anyone's guess; refuse both.
        raise invalid_request(
            "send one Idempotency-Key header",
            [{"path": "Idempotency-Key", "message": "sent more than once"}],
        )
    key = keys[0] if keys else None
    # The spec types the header as a UUID wherever it is sent, attended creates included.
    if key is not None and not UUID.fullmatch(key):
        raise invalid_request(
            "Idempotency-Key must be a UUID, like 0f1e2d3c-4b5a-4968-8776-655443322110",
            [{"path": "Idempotency-Key", "message": "not a UUID"}],
        )
    if not body.strip():
        row = await coordinator.create_attended(who.actor)
        return json_response(session_view(row), 200)
    if key is None:
        raise invalid_request(
            "an unattended session needs an Idempotency-Key header holding a UUID",
            [{"path": "Idempotency-Key", "message": "a UUID is required"}],
        )
    key = key.lower()
    req: m.UnattendedSessionRequest = parse(m.UnattendedSessionRequest, body)
    try:
        origins = canonicalize_origins(req.allowed_origins)
    except OriginError as exc:
        raise invalid_request(
            exc.message, [{"path": f"/allowedOrigins/{exc.index}", "message": exc.message}]
        ) from None
    if not unattended_enabled(services, who.tenant):
        raise ProblemError(
            403,
            "unattended_disabled",
            "unattended sessions are not enabled for your tenant; ask the operator "
            "to add it to UNATTENDED_ENABLED_TENANTS or to enable it through the operator API",
        )
    deadline = services.clock.now() + CREATE_WAIT_S
    outcome = await coordinator.create_unattended(who.actor, req, origins, key)
    row = await unless_revoked(
        services, who, coordinator.wait_connected(outcome.session.session_id)
    )
    if row.status == "connected" and not outcome.replay:
        # Connected means the tab exists; wait (within the same 5 s) for its session socket too,
        # so the caller's first command does not meet 503 session_unavailable.
        agent = services.session_agent(row.session_id)
        await unless_revoked(services, who, agent.wait_available(deadline))
    location = f"/v1/sessions/{row.session_id}"
    if is_terminal(row):
        raise ProblemError(
            503,
            "no_device_available",
            "the device refused the session; retry with a new Idempotency-Key",
            retry_after=5,
        )
    if row.status == "provisioning":
        return json_response(session_view(row), 202, {"Location": location, "Retry-After": "1"})
    status = 200 if outcome.replay else 201
    headers = {"Location": location} if status == 201 else None
    return json_response(session_view(row), status, headers)


@get("/v1/sessions/{session_id:str}", guards=[consumer_guard])
async def get_session(
    services: ServicesDep, who: ConsumerDep, session_id: FromPath[str]
) -> Response[Any]:
    row = services.repos.sessions.get(parse_session_id(session_id))
    if row is None or row.tenant != who.tenant:
        raise ProblemError(404, "session_not_found", "no session with this id in your tenant")
    if is_terminal(row):
        return json_response(tombstone_view(row), 410)
    view = session_view(
        row,
        services.repos.dialogs.newest(row.session_id),
        services.repos.blocked.newest(row.session_id),
    )
    return json_response(view, 200)


@delete("/v1/sessions/{session_id:str}", status_code=202, guards=[consumer_guard])
async def delete_session(
    services: ServicesDep, who: ConsumerDep, session_id: FromPath[str]
) -> Response[Any]:
    row = await services.coordinator(who.tenant).delete(parse_session_id(session_id))
    if is_terminal(row):
        return json_response(tombstone_view(row), 200)
    return json_response(session_view(row), 202)


@route(
    "/v1/sessions/{session_id:str}",
    http_method=HttpMethod.OPTIONS,
    status_code=204,
    include_in_schema=False,
)
async def session_options() -> Response[None]:
    # Litestar 2 answers OPTIONS from the first handler registered on a path only, so this path,
    # served by two handlers, would claim GET alone (litestar-org/litestar#4169, fixed in v3).
    # Registered before them, it keeps Litestar from adding its own.
    return Response(None, status_code=204, headers={"Allow": "DELETE, GET, OPTIONS"})
