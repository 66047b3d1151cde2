"""The sans-I/O core: policies are generators of actions that a sync or an async driver performs.

Every retry rule is written once, as a generator that yields `Send`, `Sleep`, `Emit` and `Ask`
actions and receives their results. `Client` and `AsyncClient` only perform actions, so the two
cannot drift apart, and tests can drive a policy with scripted responses and a fake clock.

Protocol: the driver answers `Send` with an `httpx.Response` (its body read) or the
`httpx.TransportError` it caught, `Ask` with the approval decision (`bool`), and `Sleep` / `Emit`
with `None`. The generator's return value is the result of the call; its exceptions are the call's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

import httpx

from understudy_connector._exceptions import (
    BackendUnreachable,
    CommandOutcomeUnknown,
    OutcomeTimeout,
    ProblemError,
    ResponseValidationError,
    UnderstudyError,
)
from understudy_connector._progress import Wait

if TYPE_CHECKING:
    from uuid import UUID

    from understudy_connector._audit import AuditEvent, AuditScope
    from understudy_connector._config import RetryConfig
    from understudy_connector._hooks import WriteRequest
    from understudy_connector._progress import WaitReason

T = TypeVar("T")


@dataclass(frozen=True)
class Send:
    """Send one HTTP request. `url` is relative to the base URL, or an absolute same-origin URL."""

    method: Literal["GET", "POST", "DELETE"]
    url: str
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Sleep:
    """Wait before the next attempt; `wait` says why, for the log and progress callbacks."""

    seconds: float
    wait: Wait | None = None


@dataclass(frozen=True)
class Emit:
    """Hand an event to the audit hook."""

    event: AuditEvent


@dataclass(frozen=True)
class Ask:
    """Consult the approval hook about a write."""

    request: WriteRequest


Action: TypeAlias = Send | Sleep | Emit | Ask
Flow: TypeAlias = Generator[Action, object, T]
Reply: TypeAlias = httpx.Response | httpx.TransportError


@dataclass(frozen=True)
class FlowContext:
    """What every policy needs besides its arguments: the bounds, the clock and the base URL."""

    base_url: httpx.URL
    retry: RetryConfig
    clock: Callable[[], float]
    audit_content: bool = False

    def same_origin(self, location: str | None, fallback: str) -> str:
        """`location` resolved against the base URL, or `fallback` when it points elsewhere.

        The API key travels with every request, so a `Location` on another origin is never followed.
        """
        if not location:
            return fallback
        target = self.base_url.join(location)
        base = self.base_url
        if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
            return fallback
        return str(target)


def exchange(ctx: FlowContext, scope: AuditScope, send: Send, attempt: int) -> Flow[Reply]:
    """Send one request, auditing it and its answer."""
    content = {"method": send.method, "url": str(ctx.base_url.join(send.url)), "body": send.json}
    yield Emit(scope.event("request", attempt=attempt, content=content))
    started = ctx.clock()
    reply = yield send
    latency_ms = _ms(ctx, started)
    if isinstance(reply, httpx.TransportError):
        yield Emit(
            scope.event("response", attempt=attempt, status="network_error", latency_ms=latency_ms)
        )
        return reply
    if not isinstance(reply, httpx.Response):
        raise TypeError(f"a driver answered Send with {type(reply).__name__}")
    yield Emit(
        scope.event(
            "response",
            attempt=attempt,
            http_status=reply.status_code,
            code=_problem_code(reply),
            latency_ms=latency_ms,
        )
    )
    return reply


def unreachable(
    ctx: FlowContext,
    operation: str,
    error: httpx.TransportError,
    advice: str = "",
    command_id: UUID | None = None,
) -> BackendUnreachable:
    """The error for a request that failed on the network on every attempt."""
    message = f"{operation}: {ctx.base_url} could not be reached ({_network_cause(error)})"
    return BackendUnreachable(message + advice, command_id=command_id)


def _network_cause(error: httpx.TransportError) -> str:
    """The error's class and what the operating system said, like `ConnectError: Connection
    refused`: httpx's own text is often only "All connection attempts failed"."""
    said = str(error)
    seen: BaseException | None = error
    for _ in range(10):  # a bounded walk down the chain of causes
        seen = seen.__cause__ or seen.__context__ if seen is not None else None
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno:
            said = os.strerror(seen.errno)  # asyncio's strerror is "Connect call failed (...)"
    return f"{type(error).__name__}: {said}" if said else type(error).__name__


def sleep(seconds: float, wait: Wait | None = None) -> Flow[None]:
    """Wait `seconds`, for the reason `wait` gives."""
    yield Sleep(seconds, wait)


def waiting(
    ctx: FlowContext,
    seconds: float,
    *,
    operation: str,
    reason: WaitReason,
    attempt: int,
    started: float,
    timeout: float | None = None,
    subject: object = None,
) -> Flow[None]:
    """Wait `seconds` before request number `attempt` of a call that began at `started`."""
    wait = Wait(
        operation=operation,
        reason=reason,
        seconds=seconds,
        attempt=attempt,
        elapsed=round(ctx.clock() - started, 3),
        timeout=timeout,
        subject=None if subject is None else str(subject),
    )
    yield Sleep(seconds, wait)


def ask(request: WriteRequest) -> Flow[bool]:
    """The approval hook's decision on `request`."""
    decision = yield Ask(request)
    if not isinstance(decision, bool):
        raise TypeError(f"a driver answered Ask with {type(decision).__name__}")
    return decision


def audited(
    ctx: FlowContext,
    scope: AuditScope,
    flow: Flow[T],
    describe: Callable[[T], tuple[str, str | None]],
) -> Flow[T]:
    """Run `flow` and emit one `outcome` event for it, whether it returns or raises.

    `describe` turns the result into the event's `(status, code)`.
    """
    started = ctx.clock()
    try:
        result = yield from flow
    except UnderstudyError as error:
        status, code = _describe_error(error)
        yield Emit(scope.event("outcome", status=status, code=code, latency_ms=_ms(ctx, started)))
        raise
    status, code = describe(result)
    yield Emit(scope.event("outcome", status=status, code=code, latency_ms=_ms(ctx, started)))
    return result


def _describe_error(error: UnderstudyError) -> tuple[str, str | None]:
    if isinstance(error, CommandOutcomeUnknown):
        return "unknown", error.code
    if isinstance(error, ProblemError):
        return "error", error.code
    if isinstance(error, OutcomeTimeout):
        return "pending", None
    if isinstance(error, BackendUnreachable):
        return "network_error", None
    if isinstance(error, ResponseValidationError):
        return "invalid_response", None
    return "error", None


def _ms(ctx: FlowContext, started: float) -> float:
    return round((ctx.clock() - started) * 1000, 3)


def _problem_code(response: httpx.Response) -> str | None:
    # A tolerant peek for the audit event only; the policy parses the body strictly.
    if response.status_code < 400:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    code = body.get("code") if isinstance(body, dict) else None
    return code if isinstance(code, str) else None
