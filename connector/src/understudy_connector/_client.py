"""`Client` and `AsyncClient`: the operations of spec/openapi.yaml with the outcome rules built in.

Both clients build the same policies (`_command_flow`, `_session_flow`) and only differ in how they
perform the actions those policies yield: blocking calls here, awaits there. No retry rule lives in
this module.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar, assert_never, cast
from uuid import UUID, uuid4

import anyio
import httpx
from pydantic import ValidationError

from understudy_connector import _command_flow, _session_flow
from understudy_connector._audit import AuditHook, AuditScope
from understudy_connector._config import RetryConfig
from understudy_connector._exceptions import UsageError
from understudy_connector._flow import Action, Ask, Emit, Flow, FlowContext, Send, Sleep
from understudy_connector._progress import report_reply, report_wait
from understudy_connector._session import AsyncSession, Session
from understudy_connector.generated.catalog import COMMAND_KINDS
from understudy_connector.generated.models import CommandRequest, UnattendedSessionRequest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from types import TracebackType
    from typing import Self

    from understudy_connector._hooks import ApproveHook
    from understudy_connector._progress import Wait

    ProgressHook = Callable[[Wait], None]
    from understudy_connector.generated import models

T = TypeVar("T")

SessionMode = Literal["unattended", "attended"]
USER_AGENT = "understudy-connector/0.1.0"
DEFAULT_HTTP_TIMEOUT = 30.0
"""Seconds per HTTP request; above the backend's 20 s synchronous command wait."""


class _BaseClient:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        retry: RetryConfig | None,
        audit: AuditHook | None,
        audit_content: bool,
        clock: Callable[[], float],
        progress: ProgressHook | None = None,
    ) -> None:
        self._progress = progress
        if not api_key:
            raise UsageError("an API key is required (a consumer key, usk_...)")
        self._ctx = FlowContext(
            base_url=httpx.URL(base_url),
            retry=retry or RetryConfig(),
            clock=clock,
            audit_content=audit_content,
        )
        self._audit = audit
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json, application/problem+json",
            "User-Agent": USER_AGENT,
        }

    def __repr__(self) -> str:
        # Never the API key.
        return f"{type(self).__name__}({str(self._ctx.base_url)!r})"

    def _before_sleep(self, action: Sleep) -> None:
        if action.wait is None:
            return
        report_wait(action.wait)
        if self._progress is not None:
            self._progress(action.wait)

    def _after_send(self, action: Send, started: float, reply: object) -> None:
        status = reply.status_code if isinstance(reply, httpx.Response) else type(reply).__name__
        report_reply(action.method, action.url, status, (self._ctx.clock() - started) * 1000)

    def _flow_context(self, audit_content: bool | None) -> FlowContext:
        if audit_content is None:
            return self._ctx
        return replace(self._ctx, audit_content=audit_content)

    def _scope(self, operation: str, session_id: UUID | None = None, **fields: Any) -> AuditScope:
        return AuditScope(
            operation=operation,
            session_id=None if session_id is None else str(session_id),
            include_content=self._ctx.audit_content,
            **fields,
        )

    def _create_flow(
        self,
        mode: SessionMode,
        allowed_origins: Sequence[str] | None,
        profile_state_key: str | None,
        device_id: str | None,
        idempotency_key: UUID | None,
        timeout: float | None,
    ) -> Flow[models.Session]:
        body, key = session_request(mode, allowed_origins, profile_state_key, device_id)
        return _session_flow.create_session(
            self._ctx, self._scope("createSession"), body, idempotency_key or key, timeout=timeout
        )

    def _submit_flow(
        self,
        session_id: UUID,
        command: models.Command,
        dry_run: bool,
        command_id: UUID | None,
        timeout: float | None,
    ) -> Flow[models.CommandOutcome]:
        request = CommandRequest(command_id=command_id or uuid4(), dry_run=dry_run, command=command)
        scope = self._scope(
            "submitCommand",
            session_id,
            command=command.name,
            kind=COMMAND_KINDS[command.name],
            command_id=str(request.command_id),
            dry_run=dry_run,
        )
        return _command_flow.run_command(self._ctx, scope, session_id, request, timeout=timeout)

    def _poll_flow(
        self, session_id: UUID, command_id: UUID, timeout: float | None
    ) -> Flow[models.CommandOutcome]:
        scope = self._scope("pollCommand", session_id, command_id=str(command_id))
        return _command_flow.poll_command(self._ctx, scope, session_id, command_id, timeout=timeout)


def session_request(
    mode: SessionMode,
    allowed_origins: Sequence[str] | None,
    profile_state_key: str | None,
    device_id: str | None,
) -> tuple[UnattendedSessionRequest | None, UUID | None]:
    """The creation body and a fresh idempotency key; `(None, None)` for an attended session."""
    if mode == "attended":
        if allowed_origins or profile_state_key or device_id:
            raise UsageError(
                "an attended session takes no allowed_origins, profile_state_key or device_id: "
                "a person attaches one tab from the extension's panel"
            )
        return None, None
    if mode != "unattended":
        raise UsageError(f"mode must be 'unattended' or 'attended', not {mode!r}")
    if not allowed_origins or not profile_state_key:
        raise UsageError("an unattended session needs allowed_origins and profile_state_key")
    try:
        body = UnattendedSessionRequest(
            mode="unattended",
            allowed_origins=list(allowed_origins),
            profile_state_key=profile_state_key,
            device_id=device_id,
        )
    except ValidationError as exc:
        fields = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise UsageError(f"invalid session request: {fields}") from None
    return body, uuid4()


def _decision(value: object) -> bool:
    # Fail closed: anything but a real bool is a broken hook, never an approval.
    if not isinstance(value, bool):
        raise UsageError(f"the approval hook must return a bool, not {type(value).__name__}")
    return value


class Client(_BaseClient):
    """A blocking client of the Understudy API.

    Args:
        base_url: The service origin, e.g. `http://127.0.0.1:8787`.
        api_key: A consumer API key (`usk_...`); sent only in the `Authorization` header.
        retry: Bounds of the built-in retry rules.
        audit: Receives an `AuditEvent` for every request, answer and outcome.
        audit_content: Add arguments, URLs and bodies to audit events (off by default).
        transport: An httpx transport (tests pass `httpx.MockTransport`).
        http_timeout: Seconds per HTTP request.
        sleep: How to wait between attempts (tests pass a fake).
        clock: A monotonic clock in seconds (tests pass a fake).
        progress: Called with a `Wait` before every wait between attempts (retries, polls of
            a pending command or a provisioning session, waits for capacity), for a progress
            display; the same waits are logged at INFO on the `understudy_connector` logger.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        retry: RetryConfig | None = None,
        audit: AuditHook | None = None,
        audit_content: bool = False,
        transport: httpx.BaseTransport | None = None,
        http_timeout: float = DEFAULT_HTTP_TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        progress: ProgressHook | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key,
            retry=retry,
            audit=audit,
            audit_content=audit_content,
            clock=clock,
            progress=progress,
        )
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=base_url,
            headers=self._headers,
            transport=transport,
            timeout=http_timeout,
            follow_redirects=False,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def create_session(
        self,
        mode: SessionMode = "unattended",
        *,
        allowed_origins: Sequence[str] | None = None,
        profile_state_key: str | None = None,
        device_id: str | None = None,
        idempotency_key: UUID | None = None,
        create_timeout: float | None = None,
    ) -> models.Session:
        """Create a session and wait until it is connected (unattended) or awaiting attach.

        An unattended creation carries one idempotency key (drawn here unless given) and is repeated
        with it after a `202`, a network error or `503 no_device_available`. Prefer `session()`,
        which also deletes the session.

        Raises:
            ProvisioningTimeout: Still provisioning after `create_timeout`; the session exists.
            ProblemError: A documented refusal (`CapacityExhausted`, `OriginConflict`, ...).
        """
        return self._drive(
            self._create_flow(
                mode, allowed_origins, profile_state_key, device_id, idempotency_key, create_timeout
            )
        )

    def get_session(self, session_id: UUID) -> models.Session | models.SessionTombstone:
        """The live session, or its tombstone once it ended."""
        return self._drive(
            _session_flow.get_session(self._ctx, self._scope("getSession", session_id), session_id)
        )

    def delete_session(self, session_id: UUID) -> models.Session | models.SessionTombstone:
        """Start or confirm cleanup; safe to repeat."""
        scope = self._scope("deleteSession", session_id)
        return self._drive(_session_flow.delete_session(self._ctx, scope, session_id))

    def submit_command(
        self,
        session_id: UUID,
        command: models.Command,
        *,
        dry_run: bool = False,
        command_id: UUID | None = None,
        command_timeout: float | None = None,
    ) -> models.CommandOutcome:
        """Run one command under the outcome rules and return its durable outcome.

        The command id is drawn once (unless given) and reused on every retry. A `failed` outcome
        is returned, not raised; `Session` methods raise `CommandFailed` instead.

        Raises:
            CommandOutcomeUnknown: A side effect may have happened; never retried.
            OutcomeTimeout: Still pending after `command_timeout`; poll the command id.
            ProblemError: Any other refusal (`SessionTerminal`, `CommandIdConflict`, ...).
        """
        flow = self._submit_flow(session_id, command, dry_run, command_id, command_timeout)
        return self._drive(flow)

    def poll_command(
        self, session_id: UUID, command_id: UUID, *, command_timeout: float | None = None
    ) -> models.CommandOutcome:
        """Poll a submitted command until its durable outcome; polling never re-runs anything."""
        return self._drive(self._poll_flow(session_id, command_id, command_timeout))

    def list_devices(self) -> models.DeviceList:
        """This tenant's devices with health and capacity."""
        return self._drive(_session_flow.list_devices(self._ctx, self._scope("listDevices")))

    def session(
        self,
        mode: SessionMode = "unattended",
        *,
        allowed_origins: Sequence[str] | None = None,
        profile_state_key: str | None = None,
        device_id: str | None = None,
        approve: ApproveHook | None = None,
        preview_writes: bool = False,
        audit: AuditHook | None = None,
        audit_content: bool | None = None,
    ) -> Session:
        """A `Session` context manager: created on enter, always deleted on exit.

        Args:
            mode: `unattended` (an extension-owned tab) or `attended` (a person attaches a tab).
            allowed_origins: Unattended only: the exact origins navigation may reach.
            profile_state_key: Unattended only: names the browser state the session expects.
            device_id: Unattended only: an explicit device; never falls back to another.
            approve: Consulted before each write; returning False raises `WriteRefused`.
            preview_writes: Show the approval hook a dry-run preview of each write first.
            audit: This session's audit hook (defaults to the client's).
            audit_content: Override the client's `audit_content` for this session.
        """
        body, key = session_request(mode, allowed_origins, profile_state_key, device_id)
        return Session(
            self,
            body,
            key,
            approve=approve,
            preview_writes=preview_writes,
            audit=audit or self._audit,
            ctx=self._flow_context(audit_content),
        )

    def _drive(
        self,
        flow: Flow[T],
        *,
        audit: AuditHook | None = None,
        approve: ApproveHook | None = None,
    ) -> T:
        audit = audit or self._audit
        reply: object = None
        with contextlib.closing(flow):
            while True:
                try:
                    action = flow.send(reply)
                except StopIteration as stop:
                    return cast("T", stop.value)
                reply = self._perform(action, audit, approve)

    def _perform(
        self, action: Action, audit: AuditHook | None, approve: ApproveHook | None
    ) -> object:
        if isinstance(action, Send):
            started = self._ctx.clock()
            reply: httpx.Response | httpx.TransportError
            try:
                reply = self._http.request(
                    action.method, action.url, json=action.json, headers=dict(action.headers)
                )
            except httpx.TransportError as exc:
                reply = exc
            self._after_send(action, started, reply)
            return reply
        if isinstance(action, Sleep):
            self._before_sleep(action)
            self._sleep(action.seconds)
            return None
        if isinstance(action, Emit):
            if audit is not None:
                audit(action.event)
            return None
        if isinstance(action, Ask):
            return _decision(_ask_sync(approve, action))
        assert_never(action)


class AsyncClient(_BaseClient):
    """An asyncio client of the Understudy API; the same operations and rules as `Client`.

    Args:
        base_url: The service origin, e.g. `http://127.0.0.1:8787`.
        api_key: A consumer API key (`usk_...`); sent only in the `Authorization` header.
        retry: Bounds of the built-in retry rules.
        audit: Receives an `AuditEvent` for every request, answer and outcome.
        audit_content: Add arguments, URLs and bodies to audit events (off by default).
        transport: An httpx transport (tests pass `httpx.MockTransport`).
        http_timeout: Seconds per HTTP request.
        sleep: How to wait between attempts (tests pass a fake).
        clock: A monotonic clock in seconds (tests pass a fake).
        progress: Called with a `Wait` before every wait between attempts (retries, polls of
            a pending command or a provisioning session, waits for capacity), for a progress
            display; the same waits are logged at INFO on the `understudy_connector` logger.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        retry: RetryConfig | None = None,
        audit: AuditHook | None = None,
        audit_content: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
        http_timeout: float = DEFAULT_HTTP_TIMEOUT,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        clock: Callable[[], float] = time.monotonic,
        progress: ProgressHook | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key,
            retry=retry,
            audit=audit,
            audit_content=audit_content,
            clock=clock,
            progress=progress,
        )
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=self._headers,
            transport=transport,
            timeout=http_timeout,
            follow_redirects=False,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def create_session(
        self,
        mode: SessionMode = "unattended",
        *,
        allowed_origins: Sequence[str] | None = None,
        profile_state_key: str | None = None,
        device_id: str | None = None,
        idempotency_key: UUID | None = None,
        create_timeout: float | None = None,
    ) -> models.Session:
        """Create a session; see `Client.create_session`."""
        return await self._drive(
            self._create_flow(
                mode, allowed_origins, profile_state_key, device_id, idempotency_key, create_timeout
            )
        )

    async def get_session(self, session_id: UUID) -> models.Session | models.SessionTombstone:
        """The live session, or its tombstone once it ended."""
        return await self._drive(
            _session_flow.get_session(self._ctx, self._scope("getSession", session_id), session_id)
        )

    async def delete_session(self, session_id: UUID) -> models.Session | models.SessionTombstone:
        """Start or confirm cleanup; safe to repeat."""
        scope = self._scope("deleteSession", session_id)
        return await self._drive(_session_flow.delete_session(self._ctx, scope, session_id))

    async def submit_command(
        self,
        session_id: UUID,
        command: models.Command,
        *,
        dry_run: bool = False,
        command_id: UUID | None = None,
        command_timeout: float | None = None,
    ) -> models.CommandOutcome:
        """Run one command under the outcome rules; see `Client.submit_command`."""
        return await self._drive(
            self._submit_flow(session_id, command, dry_run, command_id, command_timeout)
        )

    async def poll_command(
        self, session_id: UUID, command_id: UUID, *, command_timeout: float | None = None
    ) -> models.CommandOutcome:
        """Poll a submitted command until its durable outcome."""
        return await self._drive(self._poll_flow(session_id, command_id, command_timeout))

    async def list_devices(self) -> models.DeviceList:
        """This tenant's devices with health and capacity."""
        return await self._drive(_session_flow.list_devices(self._ctx, self._scope("listDevices")))

    def session(
        self,
        mode: SessionMode = "unattended",
        *,
        allowed_origins: Sequence[str] | None = None,
        profile_state_key: str | None = None,
        device_id: str | None = None,
        approve: ApproveHook | None = None,
        preview_writes: bool = False,
        audit: AuditHook | None = None,
        audit_content: bool | None = None,
    ) -> AsyncSession:
        """An `AsyncSession` context manager; see `Client.session`. `approve` may be async."""
        body, key = session_request(mode, allowed_origins, profile_state_key, device_id)
        return AsyncSession(
            self,
            body,
            key,
            approve=approve,
            preview_writes=preview_writes,
            audit=audit or self._audit,
            ctx=self._flow_context(audit_content),
        )

    async def _drive(
        self,
        flow: Flow[T],
        *,
        audit: AuditHook | None = None,
        approve: ApproveHook | None = None,
    ) -> T:
        audit = audit or self._audit
        reply: object = None
        with contextlib.closing(flow):
            while True:
                try:
                    action = flow.send(reply)
                except StopIteration as stop:
                    return cast("T", stop.value)
                reply = await self._perform(action, audit, approve)

    async def _perform(
        self, action: Action, audit: AuditHook | None, approve: ApproveHook | None
    ) -> object:
        if isinstance(action, Send):
            started = self._ctx.clock()
            reply: httpx.Response | httpx.TransportError
            try:
                reply = await self._http.request(
                    action.method, action.url, json=action.json, headers=dict(action.headers)
                )
            except httpx.TransportError as exc:
                reply = exc
            self._after_send(action, started, reply)
            return reply
        if isinstance(action, Sleep):
            self._before_sleep(action)
            await self._sleep(action.seconds)
            return None
        if isinstance(action, Emit):
            if audit is not None:
                audit(action.event)
            return None
        if isinstance(action, Ask):
            decision = _hook(approve, action)(action.request)
            if inspect.isawaitable(decision):
                decision = await decision
            return _decision(decision)
        assert_never(action)


def _hook(approve: ApproveHook | None, action: Ask) -> ApproveHook:
    if approve is None:
        raise TypeError(f"{action.request.name}: a policy asked for approval without a hook")
    return approve


def _ask_sync(approve: ApproveHook | None, action: Ask) -> object:
    decision = _hook(approve, action)(action.request)
    if inspect.isawaitable(decision):
        if inspect.iscoroutine(decision):
            decision.close()  # never awaited: close it so no "never awaited" warning leaks
        raise UsageError("the approval hook returned an awaitable; use AsyncClient for async hooks")
    return decision
