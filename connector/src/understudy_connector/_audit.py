"""Audit events: what the connector tells the consumer's audit hook.

The consumer stays authoritative for audit; the connector stores nothing. Events are content-free by
default: they name the operation, the command, its kind, ids, statuses and latencies, never the
arguments, URLs, page text or secret references. `audit_content=True` adds those under `content`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

AuditStage = Literal["request", "response", "approval", "outcome"]
"""`request`: an HTTP request is about to leave. `response`: its answer arrived (or the network
failed). `approval`: the approval hook decided on a write. `outcome`: the logical call finished."""


@dataclass(frozen=True)
class AuditEvent:
    """One content-free record of a request or an outcome.

    Attributes:
        stage: What happened (see `AuditStage`).
        operation: The operationId (`submitCommand`, `createSession`, ...).
        session_id: The session concerned, when there is one.
        command: The catalog command name, for command operations.
        kind: `read` or `write`, for command operations.
        command_id: The command id, for command operations.
        dry_run: Whether the command was a dry run.
        attempt: The attempt number of this logical call (1 for the first request).
        http_status: The HTTP status of a `response`.
        code: The problem code or the command error code, when there is one.
        status: For `outcome`: `succeeded`, `failed`, `pending` (timed out), `refused`, `error`,
            or the session status; for `approval`: `approved` or `refused`; `network_error` on a
            `response` that never came.
        latency_ms: Milliseconds spent on the exchange (`response`) or the whole call (`outcome`).
        content: Only with `audit_content=True`: method, URL, body and arguments.
    """

    stage: AuditStage
    operation: str
    session_id: str | None = None
    command: str | None = None
    kind: Literal["read", "write"] | None = None
    command_id: str | None = None
    dry_run: bool | None = None
    attempt: int | None = None
    http_status: int | None = None
    code: str | None = None
    status: str | None = None
    latency_ms: float | None = None
    content: Mapping[str, Any] | None = field(default=None, repr=False)


AuditHook = Callable[[AuditEvent], None]
"""Receives every event inline; an exception it raises propagates to the caller."""


@dataclass(frozen=True)
class AuditScope:
    """The fixed fields of every event of one logical call."""

    operation: str
    session_id: str | None = None
    command: str | None = None
    kind: Literal["read", "write"] | None = None
    command_id: str | None = None
    dry_run: bool | None = None
    include_content: bool = False

    def event(self, stage: AuditStage, **fields: Any) -> AuditEvent:
        """An event of this scope; `content` is dropped unless the scope includes content."""
        if not self.include_content:
            fields.pop("content", None)
        return AuditEvent(
            stage=stage,
            operation=self.operation,
            session_id=self.session_id,
            command=self.command,
            kind=self.kind,
            command_id=self.command_id,
            dry_run=self.dry_run,
            **fields,
        )

    def with_operation(self, operation: str) -> AuditScope:
        """The same scope under another operationId (a poll of a submitted command)."""
        return replace(self, operation=operation)
