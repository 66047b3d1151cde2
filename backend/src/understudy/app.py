"""The Litestar application: HTTP routes of spec/openapi.yaml and the two WebSocket routes.

Handlers parse bodies with the generated models (so the spec, not this file, says what is valid),
authenticate, and hand the work to the actors. Every error is problem+json.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from litestar import (
    HttpMethod,
    Litestar,
    Request,
    Response,
    delete,
    get,
    post,
    put,
    route,
    websocket,
)
from litestar.connection import WebSocket
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, WebSocketDisconnect
from litestar.params import FromPath
from pydantic import TypeAdapter, ValidationError

from understudy import _security
from understudy._commands import CommandState
from understudy._connection import (
    CLOSE_FRAME_RATE,
    CLOSE_HELLO_TIMEOUT,
    CLOSE_MESSAGE_TOO_BIG,
    CLOSE_NOT_AUTHORITATIVE,
    CLOSE_TICKET_REFUSED,
)
from understudy._metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from understudy._origins import OriginError, canonicalize_origins
from understudy._problems import ProblemError, invalid_request, problem_response
from understudy._reference import PAGES as REFERENCE_PAGES
from understudy._reference import page as page_bytes
from understudy._store import blocked as blocked_store
from understudy._store import commands as command_store
from understudy._store import credentials, operators, quotas, vault
from understudy._store import dialogs as dialog_store
from understudy._store import sessions as session_store
from understudy._store._migrations import current_version
from understudy._views import at, is_terminal, session_view, tombstone_view
from understudy.coordinator import CREATE_WAIT_S
from understudy.generated import models as m

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from litestar.types import ASGIApp, Message, Receive, Scope, Send

    from understudy._services import Services
    from understudy._store._db import Database
    from understudy._store.commands import CommandRow
    from understudy._store.credentials import Device
    from understudy.generated._wire import WireModel

log = logging.getLogger(__name__)
T = TypeVar("T")
JSON = "application/json"
MAX_BODY_BYTES = 256 * 1024
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
# Far deeper than any body of the spec (a command nests a few levels), far shallower than the
# recursion limits of json and pydantic-core.
MAX_JSON_DEPTH = 128
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = re.compile(r"[\[\]{}]")
RESULTS: TypeAdapter[Any] = TypeAdapter(m.CommandResult)


@dataclass(frozen=True)
class Consumer:
    tenant: str
    actor: str
    digest: str  # of the API key, to end this request's waits if the key is revoked


def _services(request: Request[Any, Any, Any] | WebSocket[Any, Any, Any]) -> Services:
    services: Services = request.app.state.services
    return services


def _json(model: WireModel, status: int, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(model.to_wire(), status_code=status, media_type=JSON, headers=headers or {})


def _bearer(request: Request[Any, Any, Any]) -> str | None:
    values = request.headers.getall("authorization", [])
    if len(values) > 1:
        # Authorization is not a list field, so RFC 9110 §5.3 forbids sending it twice; with
        # two, a proxy and the service could each authenticate a different credential.
        raise ProblemError(
            401,
            "unauthorized",
            "send exactly one Authorization header",
            headers={"WWW-Authenticate": 'Bearer realm="understudy"'},
        )
    header = values[0] if values else ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _unauthorized() -> ProblemError:
    return ProblemError(
        401,
        "unauthorized",
        "send a valid credential as 'Authorization: Bearer …'",
        headers={"WWW-Authenticate": 'Bearer realm="understudy"'},
    )


def _backstop(services: Services, digest: str) -> None:
    """The approximate per-credential abuse backstop (SQLite quotas stay authoritative)."""
    wait = services.limiter.hit(digest)
    if wait is not None:
        raise ProblemError(
            429, "rate_limited", "too many requests with this credential", retry_after=wait
        )


def consumer(request: Request[Any, Any, Any]) -> Consumer:
    services = _services(request)
    token = _bearer(request)
    if token is None or _security.token_kind(token) != "consumer":
        services.telemetry.emit("auth.refused", kind="consumer", reason="malformed")
        raise _unauthorized()
    digest = _security.token_digest(token)
    key = credentials.api_key_by_digest(services.db, digest)
    if key is None or key.revoked_at is not None:
        services.telemetry.emit("auth.refused", kind="consumer", reason="unknown_or_revoked")
        raise _unauthorized()
    _backstop(services, digest)
    services.telemetry.emit("auth.accepted", kind="consumer", tenant=key.tenant, actor=key.actor)
    return Consumer(key.tenant, key.actor, digest)


async def _unless_revoked(services: Services, who: Consumer, waiting: Awaitable[T]) -> T:
    """Await `waiting`, unless the caller's key is revoked first: then 401 at once.

    The waits are pure waits (turns inside them are shielded), so cancelling one loses
    nothing: the command or session it watched keeps its durable state.
    """
    task = asyncio.ensure_future(waiting)
    with services.revocations.key_waits(who.digest) as revoked:
        signal = asyncio.ensure_future(revoked.wait())
        try:
            await asyncio.wait({task, signal}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            signal.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    if not task.cancelled():
        return task.result()
    services.telemetry.emit("auth.refused", kind="consumer", reason="revoked_while_waiting")
    raise ProblemError(
        401,
        "unauthorized",
        "the API key was revoked while this request waited; what it started stays as it is",
        headers={"WWW-Authenticate": 'Bearer realm="understudy"'},
    )


def device_principal(request: Request[Any, Any, Any]) -> Device:
    services = _services(request)
    token = _bearer(request)
    if token is None or _security.token_kind(token) != "device":
        services.telemetry.emit("auth.refused", kind="device", reason="malformed")
        raise _unauthorized()
    digest = _security.token_digest(token)
    device = credentials.device_by_digest(services.db, digest)
    if device is None or device.revoked_at is not None:
        services.telemetry.emit("auth.refused", kind="device", reason="unknown_or_revoked")
        raise _unauthorized()
    _backstop(services, digest)
    services.telemetry.emit(
        "auth.accepted", kind="device", tenant=device.tenant, device=device.device_id
    )
    return device


async def _body(request: Request[Any, Any, Any]) -> bytes:
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise invalid_request(f"the body is larger than {MAX_BODY_BYTES} bytes")
    if body and request.headers.get("content-type", "").split(";")[0].strip() != JSON:
        raise invalid_request("send the body as application/json")
    return body


def _integral(text: str) -> float | int:
    # JSON Schema counts 3.0 as an integer; pydantic's strict mode would refuse it.
    number = float(text)
    return int(number) if number.is_integer() else number


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


class _DuplicateKeyError(ValueError):
    """An object names one key twice (RFC 8259 §4 leaves the meaning open; we refuse it)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key[:64]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Python keeps the last duplicate and pydantic would too, while another parser on the way
    # (a proxy, a gateway's audit log) may keep the first: `{"dryRun":true,"dryRun":false}`
    # would then be logged as a dry run and run as a real write.
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKeyError(key)
        data[key] = value
    return data


def _too_deep(text: str) -> bool:
    """Whether the JSON text nests arrays and objects deeper than `MAX_JSON_DEPTH`.

    Counted on the text with strings blanked out, before parsing: the parsers recurse once per
    level, and a body of 256 KiB of `[` would otherwise end in a RecursionError (a 500).
    """
    depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub('""', text)):
        if bracket in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        else:
            depth -= 1
    return False


def _parse(model: type[Any], body: bytes, *, uuid_fields: tuple[str, ...] = ()) -> Any:
    try:
        text = body.decode("utf-8")  # RFC 8259: JSON between systems is UTF-8
    except ValueError:
        raise invalid_request(
            "/: the body is not valid JSON", [{"path": "/", "message": "invalid JSON"}]
        ) from None
    if _too_deep(text):
        message = f"nested deeper than {MAX_JSON_DEPTH} levels"
        raise invalid_request(f"/: {message}", [{"path": "/", "message": message}])
    try:
        data = json.loads(
            text,
            parse_float=_integral,
            parse_constant=_no_constant,
            object_pairs_hook=_unique_keys,
        )
    except _DuplicateKeyError as exc:
        message = f"an object names the key {json.dumps(exc.key)} twice; send it once"
        raise invalid_request(f"/: {message}", [{"path": "/", "message": message}]) from None
    except (ValueError, RecursionError):
        raise invalid_request(
            "/: the body is not valid JSON", [{"path": "/", "message": "invalid JSON"}]
        ) from None
    if isinstance(data, dict):
        for name in uuid_fields:
            # pydantic takes a UUID in any form uuid.UUID parses (braces, urn:uuid:, 32 bare
            # digits); the spec admits only the hyphenated form, so one id has one spelling.
            value = data.get(name)
            if isinstance(value, str) and not _UUID.fullmatch(value):
                message = (
                    "not a UUID in the 8-4-4-4-12 form, like c3a1e0f2-94d1-4b5e-8d5c-0e6f1a2b3c4d"
                )
                raise invalid_request(
                    f"/{name}: {message}", [{"path": f"/{name}", "message": message}]
                )
    try:
        # Strict: JSON Schema has no coercion, so `false` or "3" is no integer and 1 no string.
        return model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        errors = [
            {"path": "/" + "/".join(str(p) for p in err["loc"]), "message": err["msg"]}
            for err in exc.errors(include_url=False)[:20]
        ]
        first = errors[0] if errors else {"path": "/", "message": "invalid"}
        raise invalid_request(f"{first['path']}: {first['message']}", errors) from None


def _session_id(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ProblemError(404, "session_not_found", "no session with this id") from None


# -- sessions --------------------------------------------------------------------------------------


@post("/v1/sessions")
async def create_session(request: Request[Any, Any, Any]) -> Response[Any]:
    services = _services(request)
    started = time.perf_counter()  # wall time: the histogram is what the caller waited
    mode = ["unknown"]  # set once the body says which
    status = 500
    try:
        response = await _create_session(request, services, mode)
        status = response.status_code or 200
        return response
    except ProblemError as exc:
        status = exc.status
        raise
    finally:
        services.metrics.observe_create(mode[0], status, time.perf_counter() - started)


async def _create_session(
    request: Request[Any, Any, Any], services: Services, mode: list[str]
) -> Response[Any]:
    who = consumer(request)
    body = await _body(request)
    mode[0] = "unattended" if body.strip() else "attended"
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
    if key is not None and not _UUID.fullmatch(key):
        raise invalid_request(
            "Idempotency-Key must be a UUID, like 0f1e2d3c-4b5a-4968-8776-655443322110",
            [{"path": "Idempotency-Key", "message": "not a UUID"}],
        )
    if not body.strip():
        row = await coordinator.create_attended(who.actor)
        return _json(session_view(row), 200)
    if key is None:
        raise invalid_request(
            "an unattended session needs an Idempotency-Key header holding a UUID",
            [{"path": "Idempotency-Key", "message": "a UUID is required"}],
        )
    key = key.lower()
    req: m.UnattendedSessionRequest = _parse(m.UnattendedSessionRequest, body)
    try:
        origins = canonicalize_origins(req.allowed_origins)
    except OriginError as exc:
        raise invalid_request(
            exc.message, [{"path": f"/allowedOrigins/{exc.index}", "message": exc.message}]
        ) from None
    if not _unattended_enabled(services, who.tenant):
        raise ProblemError(
            403,
            "unattended_disabled",
            "unattended sessions are not enabled for your tenant; ask the operator "
            "to add it to UNATTENDED_ENABLED_TENANTS or to enable it through the operator API",
        )
    deadline = services.clock.now() + CREATE_WAIT_S
    outcome = await coordinator.create_unattended(who.actor, req, origins, key)
    row = await _unless_revoked(
        services, who, coordinator.wait_connected(outcome.session.session_id)
    )
    if row.status == "connected" and not outcome.replay:
        # Connected means the tab exists; wait (within the same 5 s) for its session socket too,
        # so the caller's first command does not meet 503 session_unavailable.
        agent = services.session_agent(row.session_id)
        await _unless_revoked(services, who, agent.wait_available(deadline))
    location = f"/v1/sessions/{row.session_id}"
    if is_terminal(row):
        raise ProblemError(
            503,
            "no_device_available",
            "the device refused the session; retry with a new Idempotency-Key",
            retry_after=5,
        )
    if row.status == "provisioning":
        return _json(session_view(row), 202, {"Location": location, "Retry-After": "1"})
    status = 200 if outcome.replay else 201
    return _json(session_view(row), status, {"Location": location} if status == 201 else None)


@get("/v1/sessions/{session_id:str}")
async def get_session(request: Request[Any, Any, Any], session_id: FromPath[str]) -> Response[Any]:
    who = consumer(request)
    row = session_store.get(_services(request).db, _session_id(session_id))
    if row is None or row.tenant != who.tenant:
        raise ProblemError(404, "session_not_found", "no session with this id in your tenant")
    if is_terminal(row):
        return _json(tombstone_view(row), 410)
    db = _services(request).db
    view = session_view(
        row,
        dialog_store.newest(db, row.session_id),
        blocked_store.newest(db, row.session_id),
    )
    return _json(view, 200)


@delete("/v1/sessions/{session_id:str}", status_code=202)
async def delete_session(
    request: Request[Any, Any, Any], session_id: FromPath[str]
) -> Response[Any]:
    who = consumer(request)
    row = await _services(request).coordinator(who.tenant).delete(_session_id(session_id))
    if is_terminal(row):
        return _json(tombstone_view(row), 200)
    return _json(session_view(row), 202)


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


# -- commands --------------------------------------------------------------------------------------


def _outcome(session_id: str, row: CommandRow) -> Response[Any]:
    """The HTTP answer for a command's durable state (the outcome table of the spec)."""
    state = CommandState(row.state)
    command_id = uuid.UUID(row.command_id)
    name: Any = row.name
    if state in (CommandState.SUCCEEDED, CommandState.FAILED):
        error = (
            m.CommandError(code=row.error_code, message=row.error_message or "")  # type: ignore[arg-type]
            if row.error_code
            else None
        )
        result = RESULTS.validate_python(row.result) if row.result is not None else None
        return _json(
            m.CommandOutcome(
                command_id=command_id,
                name=name,
                status="succeeded" if state == CommandState.SUCCEEDED else "failed",
                dry_run=row.dry_run,
                result=result,
                error=error,
                completed_at=at(row.completed_at or row.admitted_at),
            ),
            200,
        )
    if state.open:
        location = f"/v1/sessions/{session_id}/commands/{row.command_id}"
        status: Any = "granted" if state == CommandState.GRANTED else "pending"
        return _json(
            m.CommandPending(
                command_id=command_id, name=name, status=status, retry_policy="poll_same_command"
            ),
            202,
            {"Location": location, "Retry-After": "1"},
        )
    if state == CommandState.UNKNOWN:
        raise ProblemError(
            409,
            "command_outcome_unknown",
            "this write may have run; do not retry it — inspect the page with a read, then decide",
            command_id=row.command_id,
            retry_policy="do_not_retry",
        )
    if state == CommandState.NOT_STARTED:
        raise ProblemError(
            504,
            "command_not_started",
            "the write was not started; retrying the same commandId is safe",
            command_id=row.command_id,
            retry_policy="retry_same_command",
        )
    raise ProblemError(
        504,
        "command_timed_out",
        "the read did not answer in time; retrying the same commandId is safe",
        command_id=row.command_id,
        retry_policy="retry_same_command",
    )


@post("/v1/sessions/{session_id:str}/commands")
async def submit_command(
    request: Request[Any, Any, Any], session_id: FromPath[str]
) -> Response[Any]:
    who = consumer(request)
    services = _services(request)
    sid = _session_id(session_id)
    body = await _body(request)
    if not body:
        raise invalid_request("send a CommandRequest body as application/json")
    req: m.CommandRequest = _parse(m.CommandRequest, body, uuid_fields=("commandId",))
    agent = services.session_agent(sid)
    row = await agent.submit(who.tenant, who.actor, req)
    row = await _unless_revoked(services, who, agent.wait_outcome(row.command_id))
    return _outcome(sid, row)


@get("/v1/sessions/{session_id:str}/commands/{command_id:str}")
async def poll_command(
    request: Request[Any, Any, Any], session_id: FromPath[str], command_id: FromPath[str]
) -> Response[Any]:
    who = consumer(request)
    services = _services(request)
    sid = _session_id(session_id)
    session = session_store.get(services.db, sid)
    if session is None or session.tenant != who.tenant:
        raise ProblemError(404, "session_not_found", "no session with this id in your tenant")
    try:
        cid = str(uuid.UUID(command_id))
    except ValueError:
        raise ProblemError(404, "command_not_found", "no command with this id") from None
    row = command_store.get(services.db, sid, cid)
    if row is None:
        raise ProblemError(404, "command_not_found", "no command with this id in this session")
    return _outcome(sid, row)


# -- devices ---------------------------------------------------------------------------------------


@get("/v1/devices")
async def list_devices(request: Request[Any, Any, Any]) -> Response[Any]:
    who = consumer(request)
    services = _services(request)
    listed = []
    for device in credentials.tenant_devices(services.db, who.tenant):
        used = len(session_store.holding_capacity(services.db, who.tenant, device.device_id))
        listed.append(
            m.Device(
                device_id=device.device_id,
                online=device.online,
                last_seen_at=_at(device.last_seen_at),
                capacity=2,
                used_capacity=used,
                protocol_versions=device.protocol_versions,  # type: ignore[arg-type]
                capabilities=device.capabilities,  # type: ignore[arg-type]
                enrolled_at=_at(device.enrolled_at),
            )
        )
    return _json(m.DeviceList(devices=listed), 200)


@post("/v1/device/connect-ticket")
async def connect_ticket(request: Request[Any, Any, Any]) -> Response[Any]:
    device = device_principal(request)
    services = _services(request)
    req: m.ConnectTicketRequest = _parse(m.ConnectTicketRequest, await _body(request))
    now = services.clock.now()
    with services.db.transaction():
        wait = quotas.take(
            services.db,
            "device_ticket",
            f"{device.tenant}/{device.device_id}",
            services.settings.quota.device_tickets_per_device_per_min,
            now,
        )
    services.telemetry.emit(
        "quota.decision",
        tenant=device.tenant,
        device=device.device_id,
        scope="device_ticket",
        outcome="refused" if wait else "allowed",
    )
    if wait is not None:
        raise ProblemError(
            429, "rate_limited", "too many tickets for this device; retry later", retry_after=wait
        )
    claims = _security.new_ticket_claims(
        aud="device",
        tenant=device.tenant,
        device=device.device_id,
        browser_epoch=str(req.browser_epoch),
        actor=f"device:{device.tenant}/{device.device_id}",
        now=now,
    )
    ticket = _security.sign_ticket(services.keys, claims)
    services.telemetry.emit(
        "ticket.minted", tenant=device.tenant, device=device.device_id, kind="device"
    )
    url = f"{services.settings.socket_base_url}/v1/device/socket?ticket={ticket}"
    return _json(m.ConnectTicket(ticket=ticket, socket_url=url, expires_at=_at(claims.exp)), 200)


def _at(ts: float | None) -> Any:
    from understudy._views import at

    return at(ts) if ts is not None else None


# -- operator --------------------------------------------------------------------------------------

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def _unattended_enabled(services: Services, tenant: str) -> bool:
    """The `UNATTENDED_ENABLED_TENANTS` setting or the tenant's durable flag (operator API)."""
    if tenant in services.settings.unattended_enabled_tenants:
        return True
    return operators.unattended_flag(services.db, tenant)


def operator_principal(request: Request[Any, Any, Any]) -> str:
    """The name of the operator token of this request; 401 for any other credential.

    With no active operator token at all the operator API is off (403), whatever was sent.
    A consumer key or device credential is refused without a lookup: it is the wrong kind.
    """
    services = _services(request)
    token = _bearer(request)
    if not operators.any_active(services.db):
        services.telemetry.emit("auth.refused", kind="operator", reason="operator_api_disabled")
        raise ProblemError(
            403,
            "operator_api_disabled",
            "no operator token exists, so the operator API is off; create one with "
            "`understudy operator-tokens create --name NAME` and send it as 'Authorization: "
            "Bearer uop_…'",
        )
    if token is None or _security.token_kind(token) != "operator":
        services.telemetry.emit("auth.refused", kind="operator", reason="malformed")
        raise _unauthorized()
    digest = _security.token_digest(token)
    found = operators.token_by_digest(services.db, digest)
    if found is None or found.revoked_at is not None:
        services.telemetry.emit("auth.refused", kind="operator", reason="unknown_or_revoked")
        raise _unauthorized()
    _backstop(services, digest)
    services.telemetry.emit("auth.accepted", kind="operator")
    return found.name


def _path_name(value: str, parameter: str) -> str:
    if not _NAME.fullmatch(value):
        message = "use 1-64 lowercase letters, digits, '.', '_' or '-', starting alphanumeric"
        raise invalid_request(f"{parameter}: {message}", [{"path": parameter, "message": message}])
    return value


def _operator_device(services: Services, device: Device) -> m.OperatorDevice:
    used = len(session_store.holding_capacity(services.db, device.tenant, device.device_id))
    revoked = device.revoked_at is not None
    online = device.online and not revoked
    return m.OperatorDevice(
        device_id=device.device_id,
        state="revoked" if revoked else "online" if online else "offline",
        online=online,
        capacity=2,
        used_capacity=used,
        enrolled_at=_at(device.enrolled_at),
        last_seen_at=_at(device.last_seen_at),
        revoked_at=_at(device.revoked_at),
    )


@route(
    "/v1/operator/tenants/{tenant:str}/devices",
    http_method=HttpMethod.OPTIONS,
    status_code=204,
    include_in_schema=False,
)
async def operator_devices_options() -> Response[None]:
    # Two handlers on one path: the Litestar 2 OPTIONS defect of `session_options` again.
    return Response(None, status_code=204, headers={"Allow": "GET, OPTIONS, POST"})


@get("/v1/operator/tenants/{tenant:str}/devices")
async def list_tenant_devices(
    request: Request[Any, Any, Any], tenant: FromPath[str]
) -> Response[Any]:
    operator_principal(request)
    services = _services(request)
    name = _path_name(tenant, "tenant")
    devices = credentials.tenant_devices_all(services.db, name)
    listed = [_operator_device(services, device) for device in devices]
    return _json(m.OperatorDeviceList(tenant=name, devices=listed), 200)


@post("/v1/operator/tenants/{tenant:str}/devices")
async def enroll_device(request: Request[Any, Any, Any], tenant: FromPath[str]) -> Response[Any]:
    operator_principal(request)
    services = _services(request)
    name = _path_name(tenant, "tenant")
    req: m.DeviceEnrollmentRequest = _parse(m.DeviceEnrollmentRequest, await _body(request))
    token = _security.generate_token("device")
    digest = _security.token_digest(token)
    now = services.clock.now()
    device_id = str(req.device_id)
    with services.db.transaction():
        existing = credentials.get_device(services.db, name, device_id)
        if existing is not None and (existing.revoked_at is not None or not req.rotate):
            state = "was revoked" if existing.revoked_at is not None else "is enrolled"
            raise ProblemError(
                409,
                "device_exists",
                f"device {device_id} {state} in tenant {name} already; "
                + (
                    "a revoked id is never reused, enroll the profile under a new id"
                    if existing.revoked_at is not None
                    else "send rotate: true to give it a new credential, or choose a new id"
                ),
            )
        if existing is None:
            credentials.add_device(
                services.db, tenant=name, device_id=device_id, digest=digest, now=now
            )
            enrolled_at, status = now, 201
        else:
            credentials.rotate_device_credential(services.db, name, device_id, digest)
            enrolled_at, status = existing.enrolled_at, 200
    return _json(
        m.DeviceEnrollment(
            tenant=name, device_id=device_id, credential=token, enrolled_at=_at(enrolled_at)
        ),
        status,
    )


@delete("/v1/operator/tenants/{tenant:str}/devices/{device_id:str}", status_code=200)
async def revoke_device(
    request: Request[Any, Any, Any], tenant: FromPath[str], device_id: FromPath[str]
) -> Response[Any]:
    operator_principal(request)
    services = _services(request)
    name = _path_name(tenant, "tenant")
    device_name = _path_name(device_id, "deviceId")
    with services.db.transaction():
        credentials.revoke_device(services.db, name, device_name, services.clock.now())
        device = credentials.get_device(services.db, name, device_name)
    if device is None:
        raise ProblemError(
            404, "device_not_found", f"no device {device_name} was ever enrolled in tenant {name}"
        )
    await services.db.durable()
    await services.revocations.sweep()  # its sockets close now, not at the next watch tick
    return _json(_operator_device(services, device), 200)


@post("/v1/operator/tenants/{tenant:str}/api-keys")
async def create_api_key(request: Request[Any, Any, Any], tenant: FromPath[str]) -> Response[Any]:
    operator_principal(request)
    services = _services(request)
    name = _path_name(tenant, "tenant")
    req: m.ApiKeyRequest = _parse(m.ApiKeyRequest, await _body(request))
    token = _security.generate_token("consumer")
    key_id = "key_" + secrets.token_hex(6)
    now = services.clock.now()
    with services.db.transaction():
        credentials.add_api_key(
            services.db,
            digest=_security.token_digest(token),
            key_id=key_id,
            tenant=name,
            actor=req.actor,
            now=now,
        )
    return _json(
        m.ApiKeyCreated(
            key_id=key_id, tenant=name, actor=req.actor, api_key=token, created_at=_at(now)
        ),
        201,
    )


@put("/v1/operator/tenants/{tenant:str}/settings")
async def update_tenant_settings(
    request: Request[Any, Any, Any], tenant: FromPath[str]
) -> Response[Any]:
    operator_principal(request)
    services = _services(request)
    name = _path_name(tenant, "tenant")
    req: m.TenantSettingsUpdate = _parse(m.TenantSettingsUpdate, await _body(request))
    with services.db.transaction():
        operators.set_unattended_flag(
            services.db, name, req.unattended_enabled, services.clock.now()
        )
    by_setting = name in services.settings.unattended_enabled_tenants
    return _json(
        m.TenantSettings(
            tenant=name,
            unattended_enabled=by_setting or req.unattended_enabled,
            unattended_flag=req.unattended_enabled,
            unattended_by_setting=by_setting,
        ),
        200,
    )


_SECRET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_VAULT_PATH = "/v1/operator/tenants/{tenant:str}/secrets/{name:str}"


def _secret_name(value: str) -> str:
    # The SecretRef pattern of spec/frames/commands.json, without its `vault:` prefix.
    if not _SECRET_NAME.fullmatch(value):
        message = "use 1-128 letters, digits, '.', '_' or '-', starting alphanumeric"
        raise invalid_request(f"name: {message}", [{"path": "name", "message": message}])
    return value


@route(_VAULT_PATH, http_method=HttpMethod.OPTIONS, status_code=204, include_in_schema=False)
async def operator_secret_options() -> Response[None]:
    # Two handlers on one path: the Litestar 2 OPTIONS defect of `session_options` again.
    return Response(None, status_code=204, headers={"Allow": "DELETE, OPTIONS, PUT"})


@put(_VAULT_PATH, status_code=204)
async def put_vault_secret(
    request: Request[Any, Any, Any], tenant: FromPath[str], name: FromPath[str]
) -> Response[None]:
    operator_principal(request)
    services = _services(request)
    tenant_name = _path_name(tenant, "tenant")
    secret_name = _secret_name(name)
    req: m.VaultSecretValue = _parse(m.VaultSecretValue, await _body(request))
    with services.db.transaction():
        vault.put(
            services.db, services.keys, tenant_name, secret_name, req.value, services.clock.now()
        )
    # A `fill_secret` sent right after the 204 must find it, even after a crash in between.
    await services.db.durable()
    return Response(None, status_code=204)


@delete(_VAULT_PATH, status_code=204)
async def delete_vault_secret(
    request: Request[Any, Any, Any], tenant: FromPath[str], name: FromPath[str]
) -> Response[None]:
    operator_principal(request)
    services = _services(request)
    tenant_name = _path_name(tenant, "tenant")
    secret_name = _secret_name(name)
    with services.db.transaction():
        done = vault.delete(services.db, tenant_name, secret_name)
    if not done:
        raise ProblemError(
            404,
            "secret_not_found",
            f"tenant {tenant_name}'s vault holds no secret vault:{secret_name}",
        )
    await services.db.durable()
    return Response(None, status_code=204)


# -- sockets ---------------------------------------------------------------------------------------


class _WsConnection:
    def __init__(self, socket: WebSocket[Any, Any, Any]) -> None:
        self._socket = socket
        self._db = _services(socket).db

    async def send(self, frame: WireModel) -> None:
        # A frame may say what a turn decided: it leaves only once that turn is durable.
        await self._db.durable()
        await self._socket.send_text(frame.to_wire_json())

    async def close(self, code: int, reason: str) -> None:
        await self._socket.close(code=code, reason=reason)


class _Agent(Protocol):
    async def handle(self, serial: int, raw: str | bytes) -> None: ...

    def said_hello(self, serial: int) -> bool: ...


class _FrameBudget:
    """A token bucket: `rate` frames a second sustained, `burst` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._at = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


async def _serve_frames(
    socket: WebSocket[Any, Any, Any], agent: _Agent, serial: int, kind: str, frame_rate: float
) -> None:
    """Feed the socket's frames to its agent until it closes, within the connection limits.

    A socket that has not said an accepted `hello` within the hello timeout closes with 4408; one
    that sends frames faster than its budget closes with 4429; a frame over `ws_max_size` is
    refused by the WebSocket layer with 1009. Each leaves a content-free `connection.closed`.
    """
    services = _services(socket)
    limits = services.settings.connection_limits
    budget = _FrameBudget(frame_rate, limits.socket_frame_burst)
    hello_by = asyncio.get_running_loop().time() + limits.hello_timeout_s
    while True:
        try:
            if agent.said_hello(serial):
                data = await socket.receive_data(mode="text")
            else:
                async with asyncio.timeout_at(hello_by):
                    data = await socket.receive_data(mode="text")
        except TimeoutError:
            await _close(socket, kind, CLOSE_HELLO_TIMEOUT, "hello_timeout", "no hello in time")
            return
        except WebSocketDisconnect as exc:
            if exc.code == CLOSE_MESSAGE_TOO_BIG:
                services.telemetry.emit("connection.closed", kind=kind, reason="frame_too_big")
            return
        if not budget.take():
            await _close(socket, kind, CLOSE_FRAME_RATE, "frame_rate", "too many frames")
            return
        await agent.handle(serial, data)


async def _close(
    socket: WebSocket[Any, Any, Any], kind: str, code: int, reason: str, text: str
) -> None:
    _services(socket).telemetry.emit("connection.closed", kind=kind, reason=reason)
    with contextlib.suppress(Exception):  # the peer may be gone already
        await socket.close(code=code, reason=text)


class _Refused(Exception):
    """The upgrade is refused before it is accepted (HTTP 403): a foreign page origin."""


async def _ticket(
    socket: WebSocket[Any, Any, Any], audience: str, session_id: str | None = None
) -> _security.TicketClaims | None:
    """Verify origin, signature, audience, expiry and path before any routing.

    A foreign `Origin` is refused at the handshake (403). A bad ticket gets the accepted socket
    closed with 4401, so the extension can tell "take a new ticket" from other failures.
    """
    services = _services(socket)
    if not services.settings.socket_origin_allowed(socket.headers.get("origin")):
        services.telemetry.emit("ticket.refused", kind=audience, reason="origin")
        raise _Refused
    token = socket.query_params.get("ticket", "")
    try:
        claims = _security.verify_ticket(
            services.keys,
            token,
            audience=audience,  # type: ignore[arg-type]
            now=services.clock.now(),
        )
    except _security.TicketError as exc:
        services.telemetry.emit("ticket.refused", kind=audience, reason=exc.reason)
        return None
    if session_id is not None and claims.session != session_id:
        services.telemetry.emit("ticket.refused", kind=audience, reason="wrong_path")
        return None
    return claims


async def _refuse(socket: WebSocket[Any, Any, Any]) -> None:
    await socket.accept()
    await socket.close(code=CLOSE_TICKET_REFUSED, reason="ticket refused")


@websocket("/v1/device/socket")
async def device_socket(socket: WebSocket[Any, Any, Any]) -> None:
    try:
        claims = await _ticket(socket, "device")
    except _Refused:
        await socket.close(code=CLOSE_NOT_AUTHORITATIVE, reason="origin refused")
        return
    if claims is None:
        await _refuse(socket)
        return
    services = _services(socket)
    agent = services.device_agent(claims.tenant, claims.device)
    await socket.accept()
    conn = _WsConnection(socket)
    serial = await agent.accept(conn, claims)
    if serial is None:
        await socket.close(code=CLOSE_TICKET_REFUSED, reason="ticket refused")
        return
    rate = services.settings.connection_limits.socket_frames_per_s
    try:
        await _serve_frames(socket, agent, serial, "device", rate)
    finally:
        await agent.disconnected(serial)


@websocket("/v1/sessions/{session_id:str}/socket")
async def session_socket(socket: WebSocket[Any, Any, Any], session_id: FromPath[str]) -> None:
    try:
        claims = await _ticket(socket, "session", session_id)
    except _Refused:
        await socket.close(code=CLOSE_NOT_AUTHORITATIVE, reason="origin refused")
        return
    if claims is None:
        await _refuse(socket)
        return
    services = _services(socket)
    agent = services.session_agent(session_id)
    await socket.accept()
    serial = await agent.accept(_WsConnection(socket), claims)
    if serial is None:
        await socket.close(code=CLOSE_TICKET_REFUSED, reason="ticket refused")
        return
    # Up to three frames per command the session quota admits (write_ready, result, a dialog).
    quota = services.settings.quota.commands_per_session_per_min
    rate = max(services.settings.connection_limits.socket_frames_per_s, 3 * quota / 60)
    try:
        await _serve_frames(socket, agent, serial, "session", rate)
    finally:
        await agent.disconnected(serial)


# -- operations ------------------------------------------------------------------------------------


@get("/healthz")
async def healthz() -> Response[Any]:
    return _json(m.Health(status="ok"), 200)


@get("/readyz")
async def readyz(request: Request[Any, Any, Any]) -> Response[Any]:
    services = _services(request)
    if not services.ready:
        raise ProblemError(503, "not_ready", "starting up or shutting down")
    return _json(m.Health(status="ok", schema_version=current_version(services.db)), 200)


@get("/metrics")
async def metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    return Response(_services(request).metrics.render(), media_type=METRICS_CONTENT_TYPE)


@get(["/", "/docs", "/docs/{page:str}"], include_in_schema=False)
async def reference(page: FromPath[str] = "api.html") -> Response[Any]:
    if page not in ("api.html", "frames.html"):
        raise ProblemError(404, "not_found", "no such page; see /docs")
    return _reference_file(page)


@get(["/openapi.yaml", "/openapi.json"], include_in_schema=False)
async def openapi_document(request: Request[Any, Any, Any]) -> Response[Any]:
    return _reference_file(request.url.path.removeprefix("/"))


def _reference_file(name: str) -> Response[Any]:
    # Packaged with the code (codegen copies them into understudy.generated), so an installed
    # wheel serves the same references as a checkout.
    return Response(page_bytes(name), media_type=REFERENCE_PAGES[name][1])


# -- errors ----------------------------------------------------------------------------------------


def _on_problem(request: Request[Any, Any, Any], exc: ProblemError) -> Response[Any]:
    return problem_response(exc)


def _on_http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    code = {
        404: "not_found",
        405: "method_not_allowed",
        413: "payload_too_large",
        415: "unsupported_media_type",
    }.get(exc.status_code, "invalid_request")
    headers = dict(exc.headers or {})
    return problem_response(ProblemError(exc.status_code, code, str(exc.detail), headers=headers))


def _on_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    # The route template, never the path: paths carry session and command ids.
    log.exception("unhandled error on %s %s", request.method, request.scope.get("path_template"))
    return problem_response(ProblemError(500, "internal_error", "an unexpected error occurred"))


def _durable_responses(db: Database) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware: an HTTP response starts only once every turn taken so far is durable.

    With group commit a handler may read state another actor wrote in the open group (same
    connection); the caller must never learn of anything a crash could still take back.
    """

    def middleware(app: ASGIApp) -> ASGIApp:
        async def durable_app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return

            async def send_when_durable(message: Message) -> None:
                if message["type"] == "http.response.start":
                    await db.durable()
                await send(message)

            await app(scope, receive, send_when_durable)

        return durable_app

    return middleware


def create_app(services: Services) -> Litestar:
    """The ASGI app; `services` are started and stopped with it."""

    async def startup() -> None:
        await services.start()

    async def shutdown() -> None:
        await services.stop()

    app = Litestar(
        route_handlers=[
            create_session,
            session_options,
            get_session,
            delete_session,
            submit_command,
            poll_command,
            list_devices,
            connect_ticket,
            operator_devices_options,
            list_tenant_devices,
            enroll_device,
            revoke_device,
            create_api_key,
            update_tenant_settings,
            operator_secret_options,
            put_vault_secret,
            delete_vault_secret,
            device_socket,
            session_socket,
            healthz,
            readyz,
            metrics,
            reference,
            openapi_document,
        ],
        exception_handlers={
            ProblemError: _on_problem,
            HTTPException: _on_http,
            Exception: _on_error,
        },
        middleware=[_durable_responses(services.db)],
        on_startup=[startup],
        on_shutdown=[shutdown],
        openapi_config=None,
        request_max_body_size=MAX_BODY_BYTES * 4,
        debug=False,
    )
    app.state.services = services
    return app
