"""Policies of the session and device operations: create (with its retries), read, delete, list.

Creation follows spec/openapi.yaml: an unattended request carries one `Idempotency-Key`, drawn once
per logical call, and is repeated with the same key and body after a network error or a
`503 no_device_available`; a `202` (or a replay still provisioning) is followed by polling
`Location` after `Retry-After` until the session leaves `allocating` / `provisioning` (a `429
rate_limited` on such a poll waits `Retry-After` and polls again). An attended
request has no key, so a network error is not repeated (it could create a second session).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import httpx

from understudy_connector import _responses
from understudy_connector._exceptions import (
    CloseTimeout,
    NoDeviceAvailable,
    ProvisioningTimeout,
    RateLimited,
    SessionNotFound,
    SessionTerminal,
    UnderstudyError,
    UsageError,
)
from understudy_connector._flow import (
    Flow,
    FlowContext,
    Send,
    audited,
    exchange,
    unreachable,
    waiting,
)
from understudy_connector._lifecycle import CreateProgress, SessionLifecycle, SessionState
from understudy_connector.generated.models import (
    DeviceList,
    Problem,
    Session,
    SessionTombstone,
)

if TYPE_CHECKING:
    from uuid import UUID

    from understudy_connector._audit import AuditScope
    from understudy_connector.generated.models import UnattendedSessionRequest

PROVISIONING: Final = frozenset({"allocating", "provisioning"})

# The extension acknowledges a close in about 100 ms, so `close(wait=True)` polls soon and often at
# first, then backs off.
CLOSE_POLL_INITIAL: Final = 0.025
CLOSE_POLL_MAX: Final = 0.5


def session_path(session_id: UUID) -> str:
    """The path of one session."""
    return f"/v1/sessions/{session_id}"


def create_session(
    ctx: FlowContext,
    scope: AuditScope,
    body: UnattendedSessionRequest | None,
    idempotency_key: UUID | None,
    *,
    timeout: float | None = None,
    progress: CreateProgress | None = None,
) -> Flow[Session]:
    """Create a session (attended when `body` is None) and wait while it provisions.

    `progress`, when given, is kept up to date with what the backend may hold so far, for the
    cleanup of a creation interrupted before it returns (`abandon_open`).
    """
    flow = _create(ctx, scope, body, idempotency_key, timeout, progress or CreateProgress())
    session = yield from audited(ctx, scope, flow, lambda created: (created.status, None))
    return session


def get_session(
    ctx: FlowContext, scope: AuditScope, session_id: UUID
) -> Flow[Session | SessionTombstone]:
    """The live session, or its tombstone once it ended (`410`)."""
    reply = yield from _repeatable(ctx, scope, Send("GET", session_path(session_id)))
    if reply.status_code == 200:
        return _responses.parse(reply, Session, "getSession")
    if reply.status_code == 410:
        return _responses.parse(reply, SessionTombstone, "getSession")
    raise _responses.problem(reply, "getSession")


def delete_session(
    ctx: FlowContext, scope: AuditScope, session_id: UUID
) -> Flow[Session | SessionTombstone]:
    """Start or confirm cleanup: the `closing` session (`202`) or its tombstone (`200`)."""
    flow = _delete(ctx, scope, session_id)
    result = yield from audited(ctx, scope, flow, lambda ended: (ended.status, None))
    return result


def list_devices(ctx: FlowContext, scope: AuditScope) -> Flow[DeviceList]:
    """This tenant's devices with health and capacity."""
    reply = yield from _repeatable(ctx, scope, Send("GET", "/v1/devices"))
    if reply.status_code == 200:
        return _responses.parse(reply, DeviceList, "listDevices")
    raise _responses.problem(reply, "listDevices")


def open_session(
    ctx: FlowContext,
    scope: AuditScope,
    life: SessionLifecycle,
    body: UnattendedSessionRequest | None,
    idempotency_key: UUID | None,
) -> Flow[Session]:
    """Create the session of a Session object; a session left provisioning is deleted again."""
    if life.state is not SessionState.NEW:
        raise UsageError(f"this session is already {life.state.value}; create a new one")
    try:
        info = yield from create_session(ctx, scope, body, idempotency_key, progress=life.creating)
    except ProvisioningTimeout as timeout:
        life.move(SessionState.CLOSED)
        life.creating = CreateProgress()  # deleted here: nothing is left for `abandon_open`
        try:
            cleanup_scope = scope.with_operation("deleteSession")
            yield from delete_session(ctx, cleanup_scope, timeout.session_id)
        except UnderstudyError as cleanup:
            timeout.add_note(f"deleting {timeout.session_id} failed too: {cleanup}")
        raise
    except BaseException:
        life.move(SessionState.CLOSED)
        raise
    life.opened(info)
    return info


def abandon_open(
    ctx: FlowContext,
    scope: AuditScope,
    life: SessionLifecycle,
    body: UnattendedSessionRequest | None,
    idempotency_key: UUID | None,
) -> Flow[UUID | None]:
    """Delete what an open that did not return (cancelled, cut off) may have created.

    A session a reply named is deleted. When the `POST` went out and no reply came back, the
    backend may have created a session nobody has heard of: the request is repeated once with the
    same `Idempotency-Key`, which names that session (or creates one, if the first never arrived),
    and the session is deleted. An attended request has no key, so it is not repeated. Returns the
    session deleted, if any.
    """
    progress, life.creating = life.creating, CreateProgress()
    session_id = progress.session_id
    if session_id is None and progress.unanswered and idempotency_key is not None:
        replay = Send(
            "POST",
            "/v1/sessions",
            json=None if body is None else body.to_wire(),
            headers={"Idempotency-Key": str(idempotency_key)},
        )
        reply = yield from exchange(ctx, scope.with_operation("createSession"), replay, 1)
        if isinstance(reply, httpx.Response) and reply.status_code in (200, 201, 202):
            session_id = _responses.parse(reply, Session, "createSession").session_id
    if session_id is None:
        return None
    try:
        yield from delete_session(ctx, scope.with_operation("deleteSession"), session_id)
    except SessionNotFound:
        return None
    return session_id


def close_session(
    ctx: FlowContext,
    scope: AuditScope,
    life: SessionLifecycle,
    *,
    wait: bool = False,
    timeout: float | None = None,
) -> Flow[Session | SessionTombstone | None]:
    """Delete the session of a Session object; closing twice sends no second delete.

    With `wait`, poll until the session is terminal (its tombstone), so that its device capacity
    and origins are free for the next session: a delete only starts cleanup (`202 closing`).
    """
    session_id = life.session_id
    if life.state is SessionState.CLOSED:
        if not wait or session_id is None:
            return None
        closed = yield from wait_terminal(
            ctx, scope.with_operation("getSession"), session_id, timeout
        )
        return closed
    life.move(SessionState.CLOSED)
    if session_id is None:
        return None
    try:
        result = yield from delete_session(ctx, scope, session_id)
    except SessionNotFound:
        return None
    if wait and isinstance(result, Session):
        # It was live a moment ago: the first poll waits, unlike a wait after an earlier close.
        ended = yield from wait_terminal(
            ctx, scope.with_operation("getSession"), session_id, timeout, poll_first=False
        )
        return ended
    return result


def wait_terminal(
    ctx: FlowContext,
    scope: AuditScope,
    session_id: UUID,
    timeout: float | None,
    *,
    poll_first: bool = True,
) -> Flow[SessionTombstone | None]:
    """Poll the session until it is terminal: its tombstone, or None once it is gone (`404`).

    Raises:
        CloseTimeout: Still not terminal after `timeout` (default `RetryConfig.close_timeout`).
    """
    limit = ctx.retry.close_timeout if timeout is None else timeout
    started = ctx.clock()
    deadline = started + limit
    delay = CLOSE_POLL_INITIAL
    attempt = 1

    def wait() -> Flow[None]:
        return waiting(
            ctx,
            delay,
            operation="getSession",
            reason="closing",
            attempt=attempt,
            started=started,
            timeout=limit,
            subject=session_id,
        )

    if not poll_first:
        yield from wait()
    while True:
        try:
            current = yield from get_session(ctx, scope, session_id)
        except SessionNotFound:
            return None
        except RateLimited as limited:
            current = None
            delay = max(delay, limited.retry_after or ctx.retry.default_retry_after)
        if isinstance(current, SessionTombstone):
            return current
        if ctx.clock() + delay > deadline:
            status = "closing" if current is None else current.status
            raise CloseTimeout(session_id, limit, status)
        attempt += 1
        yield from wait()
        delay = min(delay * 2, CLOSE_POLL_MAX)


def terminal_error(tombstone: SessionTombstone) -> SessionTerminal:
    """`SessionTerminal` for a session whose tombstone the backend returned."""
    problem = Problem(
        type="https://understudy.dev/problems/session_terminal",
        title="Session terminal",
        status=410,
        code="session_terminal",
        detail=f"the session is {tombstone.status} ({tombstone.reason})",
    )
    return SessionTerminal(problem, tombstone=tombstone)


def _delete(
    ctx: FlowContext, scope: AuditScope, session_id: UUID
) -> Flow[Session | SessionTombstone]:
    # Deleting again is safe (`202` while closing, `200` once terminal), so a network error repeats.
    reply = yield from _repeatable(ctx, scope, Send("DELETE", session_path(session_id)))
    if reply.status_code == 202:
        return _responses.parse(reply, Session, "deleteSession")
    if reply.status_code == 200:
        return _responses.parse(reply, SessionTombstone, "deleteSession")
    raise _responses.problem(reply, "deleteSession")


def _create(
    ctx: FlowContext,
    scope: AuditScope,
    body: UnattendedSessionRequest | None,
    idempotency_key: UUID | None,
    timeout: float | None,
    progress: CreateProgress,
) -> Flow[Session]:
    retry = ctx.retry
    limit = retry.create_timeout if timeout is None else timeout
    started = ctx.clock()
    deadline = started + limit
    headers = {} if idempotency_key is None else {"Idempotency-Key": str(idempotency_key)}
    payload = None if body is None else body.to_wire()
    post = Send("POST", "/v1/sessions", json=payload, headers=headers)
    current = post
    created: UUID | None = None
    attempt = failures = 0
    while True:
        attempt += 1
        operation = "createSession" if current is post else "getSession"
        if current is post and created is None:
            progress.unanswered = True
        reply = yield from exchange(ctx, scope.with_operation(operation), current, attempt)
        if current is post and isinstance(reply, httpx.Response):
            progress.unanswered = False
        if isinstance(reply, httpx.TransportError):
            failures += 1
            delay = retry.backoff(failures)
            repeatable = current is not post or idempotency_key is not None
            exhausted = failures > retry.network_attempts or ctx.clock() + delay > deadline
            if not repeatable or exhausted:
                if not repeatable:
                    why = " (an attended creation has no idempotency key, so it is not repeated)"
                elif created is not None:
                    why = f"; session {created} may still be provisioning: delete it"
                else:
                    why = ""
                raise unreachable(ctx, operation, reply, why) from reply
            yield from waiting(
                ctx,
                delay,
                operation=operation,
                reason="network_error",
                attempt=attempt + 1,
                started=started,
                timeout=limit,
                subject=created,
            )
            continue
        failures = 0
        if reply.status_code in (200, 201, 202):
            session = _responses.parse(reply, Session, operation)
            created = progress.session_id = session.session_id
            if reply.status_code != 202 and session.status not in PROVISIONING:
                return session
            delay = _responses.wait_seconds(reply, retry.default_retry_after)
            if ctx.clock() + delay > deadline:
                raise ProvisioningTimeout(session.session_id, limit)
            yield from waiting(
                ctx,
                delay,
                operation=operation,
                reason="provisioning",
                attempt=attempt + 1,
                started=started,
                timeout=limit,
                subject=created,
            )
            fallback = session_path(session.session_id)
            current = Send("GET", ctx.same_origin(reply.headers.get("location"), fallback))
            continue
        if reply.status_code == 410 and current is not post:
            raise terminal_error(_responses.parse(reply, SessionTombstone, operation))
        error = _responses.problem(reply, operation)
        if isinstance(error, RateLimited) and created is not None and current is not post:
            # The session exists and keeps provisioning: wait, then poll again. Raising would
            # leave the caller without the id of a session it must delete.
            delay = retry.default_retry_after if error.retry_after is None else error.retry_after
            if ctx.clock() + delay > deadline:
                raise ProvisioningTimeout(created, limit)
            yield from waiting(
                ctx,
                delay,
                operation=operation,
                reason="rate_limited",
                attempt=attempt + 1,
                started=started,
                timeout=limit,
                subject=created,
            )
            continue
        if isinstance(error, NoDeviceAvailable) and current is post:
            delay = retry.default_retry_after if error.retry_after is None else error.retry_after
            if ctx.clock() + delay > deadline:
                raise error
            yield from waiting(
                ctx,
                delay,
                operation=operation,
                reason="no_device",
                attempt=attempt + 1,
                started=started,
                timeout=limit,
                subject=created,
            )
            continue
        raise error


def _repeatable(ctx: FlowContext, scope: AuditScope, send: Send) -> Flow[httpx.Response]:
    """Send a request that is safe to repeat, repeating it after network errors."""
    failures = 0
    started = ctx.clock()
    while True:
        reply = yield from exchange(ctx, scope, send, failures + 1)
        if isinstance(reply, httpx.Response):
            return reply
        failures += 1
        if failures > ctx.retry.network_attempts:
            raise unreachable(ctx, scope.operation, reply) from reply
        yield from waiting(
            ctx,
            ctx.retry.backoff(failures),
            operation=scope.operation,
            reason="network_error",
            attempt=failures + 1,
            started=started,
        )
