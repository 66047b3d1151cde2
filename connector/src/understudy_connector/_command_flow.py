"""The outcome rules of `submitCommand` and `pollCommand`, written once.

| Answer | What the policy does |
|---|---|
| `200` | Return the durable outcome (`succeeded` or `failed`) |
| `202` (`poll_same_command`) | Poll `Location` after `Retry-After`, until terminal or the timeout |
| `409 command_outcome_unknown` | Raise `CommandOutcomeUnknown` at once; never retried |
| `409 command_id_conflict` | Raise `CommandIdConflict` |
| `504 command_not_started` / `command_timed_out` | Resubmit the same id and body, with backoff |
| `429 session_busy` / `rate_limited` | Wait `Retry-After`, resubmit the same id and body |
| `503 session_unavailable` | Wait `Retry-After`, resubmit the same id and body |
| `410 session_terminal`, `426`, others | Raise the problem |
| network error | Repeat the same request (same id: the backend deduplicates), with backoff |

Every resubmission carries the same `commandId` and the same body, so the backend either admits the
command once or answers with its durable outcome; the timeout bounds the whole call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from understudy_connector import _responses
from understudy_connector._exceptions import (
    CommandNotStarted,
    CommandTimedOut,
    OutcomeTimeout,
    RateLimited,
    ResponseValidationError,
    SessionBusy,
    SessionUnavailable,
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
from understudy_connector.generated.models import CommandOutcome, CommandPending

if TYPE_CHECKING:
    from uuid import UUID

    from understudy_connector._audit import AuditScope
    from understudy_connector.generated.models import CommandRequest

_RESUBMIT = (CommandNotStarted, CommandTimedOut)
_WAIT_FOR_SLOT = (SessionBusy, SessionUnavailable, RateLimited)


def commands_path(session_id: UUID) -> str:
    """The submitCommand path of a session."""
    return f"/v1/sessions/{session_id}/commands"


def run_command(
    ctx: FlowContext,
    scope: AuditScope,
    session_id: UUID,
    request: CommandRequest,
    *,
    timeout: float | None = None,
) -> Flow[CommandOutcome]:
    """Submit `request` and follow the outcome rules until a durable outcome."""
    submit = Send("POST", commands_path(session_id), json=request.to_wire())
    name = request.command.name
    flow = _follow(ctx, scope, session_id, name, request.command_id, submit, timeout)
    outcome = yield from audited(ctx, scope, flow, _describe)
    return outcome


def poll_command(
    ctx: FlowContext,
    scope: AuditScope,
    session_id: UUID,
    command_id: UUID,
    *,
    timeout: float | None = None,
) -> Flow[CommandOutcome]:
    """Poll a command already submitted until a durable outcome.

    A `504` while polling is raised: without the original body the command cannot be resubmitted.
    """
    flow = _follow(ctx, scope, session_id, scope.command, command_id, None, timeout)
    outcome = yield from audited(ctx, scope, flow, _describe)
    return outcome


def _follow(
    ctx: FlowContext,
    scope: AuditScope,
    session_id: UUID,
    name: str | None,
    command_id: UUID,
    submit: Send | None,
    timeout: float | None,
) -> Flow[CommandOutcome]:
    retry = ctx.retry
    limit = retry.command_timeout if timeout is None else timeout
    started = ctx.clock()
    deadline = started + limit
    poll = Send("GET", f"{commands_path(session_id)}/{command_id}")
    current = submit if submit is not None else poll
    attempt = resubmits = network_failures = 0
    while True:
        attempt += 1
        operation = "submitCommand" if current is submit else "pollCommand"
        reply = yield from exchange(ctx, scope.with_operation(operation), current, attempt)
        if isinstance(reply, httpx.TransportError):
            network_failures += 1
            delay = retry.backoff(network_failures)
            if network_failures > retry.network_attempts or ctx.clock() + delay > deadline:
                raise unreachable(
                    ctx,
                    operation,
                    reply,
                    f"; the command may have been admitted: poll {command_id} or resubmit it with "
                    "the same id",
                    command_id,
                ) from reply
            yield from waiting(
                ctx,
                delay,
                operation=operation,
                reason="network_error",
                attempt=attempt + 1,
                started=started,
                timeout=limit,
                subject=command_id,
            )
            continue
        network_failures = 0
        if reply.status_code == 200:
            outcome = _responses.parse(reply, CommandOutcome, operation)
            _check_id(outcome.command_id, command_id, operation, 200)
            return outcome
        if reply.status_code == 202:
            pending = _responses.parse(reply, CommandPending, operation)
            _check_id(pending.command_id, command_id, operation, 202)
            delay = _responses.wait_seconds(reply, retry.default_retry_after)
            if ctx.clock() + delay > deadline:
                raise OutcomeTimeout(name or pending.name, command_id, limit)
            yield from waiting(
                ctx,
                delay,
                operation=operation,
                reason="pending",
                attempt=attempt + 1,
                started=started,
                timeout=limit,
                subject=command_id,
            )
            current = Send("GET", ctx.same_origin(reply.headers.get("location"), poll.url))
            continue
        error = _responses.problem(reply, operation)
        if error.command_id is None:
            error.command_id = command_id
        if isinstance(error, _RESUBMIT) and submit is not None:
            resubmits += 1
            delay = retry.backoff(resubmits)
            if resubmits > retry.resubmit_attempts or ctx.clock() + delay > deadline:
                raise error
            yield from waiting(
                ctx,
                delay,
                operation=operation,
                reason="not_started",
                attempt=attempt + 1,
                started=started,
                timeout=limit,
                subject=command_id,
            )
            current = submit
            continue
        if isinstance(error, _WAIT_FOR_SLOT) and submit is not None:
            delay = retry.default_retry_after if error.retry_after is None else error.retry_after
            if ctx.clock() + delay > deadline:
                raise error
            yield from waiting(
                ctx,
                delay,
                operation=operation,
                reason="busy",
                attempt=attempt + 1,
                started=started,
                timeout=limit,
                subject=command_id,
            )
            current = submit
            continue
        raise error


def _describe(outcome: CommandOutcome) -> tuple[str, str | None]:
    return outcome.status, outcome.error.code if outcome.error is not None else None


def _check_id(received: UUID, expected: UUID, operation: str, status: int) -> None:
    if received != expected:
        raise ResponseValidationError(
            f"the answer concerns command {received}, not {expected}",
            operation=operation,
            status=status,
        )
