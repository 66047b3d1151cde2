"""One command of a Session: approval for writes, the outcome rules, a typed result.

A write (not a dry run) is shown to the consumer's approval hook first; with `preview_writes` the
hook also sees the dry-run preview, which is a separate command with its own id (`dryRun` is part of
the request fingerprint). A refusal raises `WriteRefused` and sends nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar
from uuid import UUID, uuid4

from understudy_connector._audit import AuditScope
from understudy_connector._command_flow import run_command
from understudy_connector._exceptions import (
    CommandFailed,
    ResponseValidationError,
    SessionTerminal,
    WriteRefused,
)
from understudy_connector._flow import Emit, Flow, FlowContext, ask
from understudy_connector._hooks import WriteRequest
from understudy_connector.generated._wire import WireModel
from understudy_connector.generated.catalog import COMMAND_KINDS
from understudy_connector.generated.models import CommandRequest, WriteResult

if TYPE_CHECKING:
    from understudy_connector._hooks import ApproveHook
    from understudy_connector._lifecycle import SessionLifecycle
    from understudy_connector.generated.models import Command, CommandOutcome, CommandResult

R = TypeVar("R", bound=WireModel)


@dataclass(frozen=True)
class Governance:
    """The consumer's hooks for one session."""

    approve: ApproveHook | None = None
    preview_writes: bool = False


def governed_command(
    ctx: FlowContext,
    life: SessionLifecycle,
    governance: Governance,
    command: Command,
    *,
    dry_run: bool = False,
    timeout: float | None = None,
) -> Flow[CommandResult]:
    """Run one command of an open session and return its result.

    Raises:
        SessionClosedError: The session is not open; nothing was sent.
        WriteRefused: The approval hook refused the write.
        CommandFailed: The durable outcome is `failed`.
    """
    session_id = life.require_open()
    command_id = uuid4()
    if COMMAND_KINDS[command.name] == "write" and not dry_run and governance.approve is not None:
        preview: WriteResult | None = None
        if governance.preview_writes:
            dry = yield from _submit(ctx, life, session_id, command, uuid4(), True, timeout)
            preview = expect(dry, WriteResult, command.name)
        approved = yield from ask(WriteRequest(session_id, command_id, command, preview))
        scope = _scope(ctx, session_id, command, command_id, dry_run)
        yield Emit(scope.event("approval", status="approved" if approved else "refused"))
        if not approved:
            raise WriteRefused(command.name, command_id)
    result = yield from _submit(ctx, life, session_id, command, command_id, dry_run, timeout)
    return result


def expect(result: CommandResult, model: type[R], command: str) -> R:
    """`result` as the result model of its command."""
    if not isinstance(result, model):
        raise ResponseValidationError(
            f"{command} returned a {type(result).__name__}, not a {model.__name__}",
            operation="submitCommand",
            status=200,
        )
    return result


def _submit(
    ctx: FlowContext,
    life: SessionLifecycle,
    session_id: UUID,
    command: Command,
    command_id: UUID,
    dry_run: bool,
    timeout: float | None,
) -> Flow[CommandResult]:
    request = CommandRequest(command_id=command_id, dry_run=dry_run, command=command)
    scope = _scope(ctx, session_id, command, command_id, dry_run)
    try:
        outcome = yield from run_command(ctx, scope, session_id, request, timeout=timeout)
    except SessionTerminal:
        life.ended()
        raise
    return _succeeded(outcome)


def _succeeded(outcome: CommandOutcome) -> CommandResult:
    if outcome.status == "failed":
        raise CommandFailed(outcome)
    if outcome.result is None:
        raise ResponseValidationError(
            f"{outcome.name} succeeded without a result", operation="submitCommand", status=200
        )
    return outcome.result


def _scope(
    ctx: FlowContext, session_id: UUID, command: Command, command_id: UUID, dry_run: bool
) -> AuditScope:
    return AuditScope(
        operation="submitCommand",
        session_id=str(session_id),
        command=command.name,
        kind=COMMAND_KINDS[command.name],
        command_id=str(command_id),
        dry_run=dry_run,
        include_content=ctx.audit_content,
    )
