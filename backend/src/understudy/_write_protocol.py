"""The backend's side of the command protocol as one decision table, and its HTTP answers.

`decide(kind, state, event, journal)` is a pure function: from a command's kind, its durable
state (None: no row), what happened, and (on a session hello only) the extension's journal
entry for it, to the next state and the effects the caller carries out. Every path that settles
a command calls it: admission, the extension's frames, the session hello, the deadline timer, a
lost socket and a browser-epoch change. A combination that cannot occur (a read in a write's
state, a journal entry outside a hello, settling a command that has no row) raises
`IllegalCommandEventError` instead of guessing.

    read:   (none) ─admit─▶ pending ─read result─▶ succeeded | failed
                               └─deadline / socket lost / hello / epoch lost─▶ timed_out
    write:  (none) ─admit─▶ preparing ─write_ready─▶ granted ─result─▶ succeeded | failed
                               │   └─no secret─▶ failed     └─deadline / epoch lost / hello
                               │                               without a result─▶ unknown
                               └─ready deadline / socket lost / hello / epoch lost─▶ not_started

The grant carries the command and leaves exactly once: only `preparing` → `granted` sends it,
and no event leads back to `preparing` except admitting a retry of a write that never started.
`http_answer` maps a durable state to the HTTP outcome table of the spec (200 / 202 / 409 / 504).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Literal

from understudy._commands import CommandState, move
from understudy._problems import ProblemError
from understudy.generated import models as m

if TYPE_CHECKING:
    from understudy._store.commands import CommandRow
    from understudy.generated._wire import WireModel

Kind = Literal["read", "write"]
JournalState = Literal["prepared", "started", "completed_unacked"]
KINDS: Final[tuple[Kind, ...]] = ("read", "write")
JOURNAL_STATES: Final[tuple[JournalState, ...]] = ("prepared", "started", "completed_unacked")

_S = CommandState
# The states a command of each kind can be in; any other pairing is refused.
STATES_OF: Final[dict[Kind, frozenset[CommandState]]] = {
    "read": frozenset({_S.PENDING, _S.SUCCEEDED, _S.FAILED, _S.TIMED_OUT}),
    "write": frozenset(
        {_S.PREPARING, _S.GRANTED, _S.SUCCEEDED, _S.FAILED, _S.NOT_STARTED, _S.UNKNOWN}
    ),
}


class Event(StrEnum):
    """What happened to a command."""

    ADMIT = "admit"  # POST /commands for this command id
    READ_SUCCEEDED = "read_succeeded"  # read_result, outcome succeeded
    READ_FAILED = "read_failed"  # read_result, outcome failed
    WRITE_READY = "write_ready"  # the extension persisted `prepared`
    READY_STALE_EPOCH = "ready_stale_epoch"  # write_ready for another lease epoch
    READY_NOT_IN_VAULT = "ready_not_in_vault"  # write_ready for a fill_secret whose secret is gone
    WRITE_SUCCEEDED = "write_succeeded"  # result, outcome succeeded
    WRITE_FAILED = "write_failed"  # result, outcome failed
    HELLO = "hello"  # a session hello, with the extension's journal entry (if any)
    DEADLINE = "deadline"  # the command's current deadline passed
    SOCKET_LOST = "socket_lost"  # the session socket closed
    EPOCH_LOST = "epoch_lost"  # the browser epoch changed: the lease epoch moved on


class Effect(StrEnum):
    """What the caller does besides persisting the next state."""

    REPLAY = "replay"  # answer with the durable row of the earlier admission
    SEND_READ = "send_read"
    SEND_PREPARE = "send_prepare"  # write_prepare, metadata only
    SEND_GRANT = "send_grant"  # write_grant: the command, sent once, never again
    SEND_RESULT_ACK = "send_result_ack"
    CANCEL_READY_DEADLINE = "cancel_ready_deadline"  # cancel frame, reason ready_deadline
    CANCEL_DEADLINE = "cancel_deadline"  # cancel frame, reason deadline
    CANCEL_SUPERSEDED = "cancel_superseded"  # cancel frame, reason superseded
    ERROR_UNKNOWN_COMMAND = "error_unknown_command"  # error frame: no write with this id
    ERROR_NOT_GRANTED = "error_not_granted"  # error frame: a result for a write never granted
    ERROR_STALE_LEASE_EPOCH = "error_stale_lease_epoch"  # error frame
    HELLO_CANCEL = "hello_cancel"  # listed in hello_ack.cancel: drop the preparation
    HELLO_UNKNOWN = "hello_unknown"  # listed in hello_ack.unknown: drop the started entry
    RECORD_OUTCOME = "record_outcome"  # keep the reported result or error (and its latency)
    BLOCK_WRITES = "block_writes"  # the session's writes stay blocked: unknown_outcome


@dataclass(frozen=True)
class Decision:
    """The next state (None: unchanged) and the effects, in the order they apply."""

    target: CommandState | None = None
    effects: tuple[Effect, ...] = ()
    step: str | None = None  # the persisted write step taken, for crash points (`_faults`)

    def has(self, effect: Effect) -> bool:
        return effect in self.effects


class IllegalCommandEventError(RuntimeError):
    """A (kind, state, event, journal) combination the protocol never produces."""


_NOTHING: Final = Decision()
# Every decision taken so far, by its inputs (a raising combination is never kept).
_DECIDED: Final[dict[tuple[str, str | None, str, str | None], Decision]] = {}


def decide(
    kind: Kind,
    state: CommandState | str | None,
    event: Event,
    journal: JournalState | None = None,
) -> Decision:
    """The decision for `event` on a command of `kind` in `state` (None: no row yet).

    Raises:
        IllegalCommandEventError: the combination cannot occur.
    """
    # Pure and over a few dozen combinations: each is worked out once (several per write).
    key = (kind, state, event, journal)
    known = _DECIDED.get(key)
    if known is not None:
        return known
    decision = _checked(kind, state, event, journal)
    _DECIDED[key] = decision
    return decision


def _checked(
    kind: Kind,
    state: CommandState | str | None,
    event: Event,
    journal: JournalState | None,
) -> Decision:
    current = CommandState(state) if state is not None else None
    if current is not None and current not in STATES_OF[kind]:
        raise IllegalCommandEventError(f"a {kind} is never {current}")
    if journal is not None and event != Event.HELLO:
        raise IllegalCommandEventError(f"the journal is consulted on hello only, not {event}")
    decision = _decide(kind, current, event, journal)
    if decision.target is not None:
        if current is None:
            if event != Event.ADMIT:
                raise AssertionError(f"{event} created a row")  # pragma: no cover - table bug
        else:
            move(current, decision.target)  # the table never draws a move the enum forbids
    return decision


def _decide(
    kind: Kind, state: CommandState | None, event: Event, journal: JournalState | None
) -> Decision:
    read = kind == "read"
    match event:
        case Event.ADMIT:
            if state is None or state.retryable:
                if read:
                    return Decision(_S.PENDING, (Effect.SEND_READ,))
                return Decision(_S.PREPARING, (Effect.SEND_PREPARE,), step="preparing")
            return Decision(effects=(Effect.REPLAY,))  # open or final: the first admission holds
        case Event.READ_SUCCEEDED | Event.READ_FAILED:
            if state != _S.PENDING:
                return _NOTHING  # late (timed out), duplicated, or naming a write: ignored
            ended = _S.SUCCEEDED if event == Event.READ_SUCCEEDED else _S.FAILED
            return Decision(ended, (Effect.RECORD_OUTCOME,))
        case Event.WRITE_READY | Event.READY_STALE_EPOCH | Event.READY_NOT_IN_VAULT:
            if state is None or not state.open:
                # Late or unknown: make sure the extension drops its preparation.
                return Decision(effects=(Effect.CANCEL_READY_DEADLINE,))
            if state != _S.PREPARING:
                # A duplicate write_ready for a granted write (never resend the payload), or one
                # naming a pending read.
                return _NOTHING
            if event == Event.READY_STALE_EPOCH:
                return Decision(effects=(Effect.ERROR_STALE_LEASE_EPOCH,))
            if event == Event.READY_NOT_IN_VAULT:
                return Decision(_S.FAILED, (Effect.RECORD_OUTCOME, Effect.CANCEL_SUPERSEDED))
            return Decision(_S.GRANTED, (Effect.SEND_GRANT,), step="granted")
        case Event.WRITE_SUCCEEDED | Event.WRITE_FAILED:
            if read or state is None:
                return Decision(effects=(Effect.ERROR_UNKNOWN_COMMAND,))
            if state == _S.GRANTED:
                ended = _S.SUCCEEDED if event == Event.WRITE_SUCCEEDED else _S.FAILED
                return Decision(
                    ended, (Effect.RECORD_OUTCOME, Effect.SEND_RESULT_ACK), step="result"
                )
            if state in (_S.SUCCEEDED, _S.FAILED, _S.UNKNOWN):
                # A replay of a result we hold (or gave up on): just acknowledge it.
                return Decision(effects=(Effect.SEND_RESULT_ACK,))
            return Decision(effects=(Effect.ERROR_NOT_GRANTED,))
        case Event.HELLO:
            return _hello(state, journal)
        case Event.DEADLINE | Event.SOCKET_LOST | Event.EPOCH_LOST:
            if state is None:
                raise IllegalCommandEventError(f"{event} for a command with no row")
            return _lost(state, event)
    raise AssertionError(f"unhandled event {event}")  # pragma: no cover - Event is closed


def _hello(state: CommandState | None, journal: JournalState | None) -> Decision:
    """A new authoritative socket said hello: settle what can no longer run, then tell the
    extension which of its journal entries to drop."""
    target: CommandState | None = None
    effects: list[Effect] = []
    cancel = unknown = False
    if state == _S.PENDING:
        target = _S.TIMED_OUT  # reads in flight were lost with the old socket
    elif state == _S.PREPARING or (state == _S.GRANTED and journal == "prepared"):
        # Never granted, or the grant never arrived: it cannot run any more.
        target = _S.NOT_STARTED
        cancel = journal is not None
    elif state == _S.GRANTED and journal != "completed_unacked":
        # Started with no result, or lost from the journal: it may have run.
        target = _S.UNKNOWN
        effects.append(Effect.BLOCK_WRITES)
        unknown = True
    # What the extension holds, against the state this hello leaves.
    settled = target or state
    if journal == "prepared" and (settled is None or not settled.open):
        cancel = True
    elif journal == "started" and (settled is None or settled == _S.UNKNOWN):
        # Already unknown (a deadline or an earlier hello): say so again, or the extension keeps
        # the entry and reports it on every hello of this epoch.
        unknown = True
    if cancel:
        effects.append(Effect.HELLO_CANCEL)
    if unknown:
        effects.append(Effect.HELLO_UNKNOWN)
    return Decision(target, tuple(effects))


def _lost(state: CommandState, event: Event) -> Decision:
    """A deadline passed, the socket closed, or the browser epoch changed."""
    if not state.open:
        return _NOTHING  # already settled
    if state == _S.PENDING:
        cancel = (Effect.CANCEL_DEADLINE,) if event == Event.DEADLINE else ()
        return Decision(_S.TIMED_OUT, cancel)
    if state == _S.PREPARING:
        cancel = (Effect.CANCEL_READY_DEADLINE,) if event == Event.DEADLINE else ()
        return Decision(_S.NOT_STARTED, cancel)
    if event == Event.SOCKET_LOST:
        return _NOTHING  # granted: the result may still come on a new socket of this epoch
    return Decision(_S.UNKNOWN, (Effect.BLOCK_WRITES,))  # it may have run: never guess


# -- the HTTP answers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpAnswer:
    """A command's durable state as an HTTP answer (an error state raises `ProblemError`).

    `body` is a model, or for an outcome its JSON text already (`outcome_json`).
    """

    status: int
    body: WireModel | bytes
    headers: dict[str, str]


def outcome_json(row: CommandRow) -> bytes:
    """The `CommandOutcome` of a settled command as JSON, written from its row directly.

    The result was validated in the extension's frame and stored as that model's wire form;
    building the outcome model would validate it a second time, for every command. The other
    fields are the row's own (the error through `CommandError`, whose codes are fewer than a
    frame's). `tests/backend/unit/test_write_protocol.py` holds this text equal to the model's.
    """
    outcome: dict[str, Any] = {
        "commandId": row.command_id,
        "name": row.name,
        "status": row.state,
        "dryRun": row.dry_run,
    }
    if row.result is not None:
        outcome["result"] = row.result
    if row.error_code:  # the outcome's error codes are fewer than a frame's: checked here
        error = m.CommandError(code=row.error_code, message=row.error_message or "")  # type: ignore[arg-type]
        outcome["error"] = error.to_wire()
    completed = datetime.fromtimestamp(row.completed_at or row.admitted_at, UTC)
    outcome["completedAt"] = completed.isoformat().replace("+00:00", "Z")
    return json.dumps(outcome, ensure_ascii=False, separators=(",", ":")).encode()


def http_answer(session_id: str, row: CommandRow) -> HttpAnswer:
    """The HTTP answer for a command's durable state (the outcome table of the spec).

    Raises:
        ProblemError: unknown (409), not started or timed out (504).
    """
    state = CommandState(row.state)
    if state in (_S.SUCCEEDED, _S.FAILED):
        return HttpAnswer(200, outcome_json(row), {})
    if state.open:
        location = f"/v1/sessions/{session_id}/commands/{row.command_id}"
        status: Any = "granted" if state == _S.GRANTED else "pending"
        name: Any = row.name
        pending = m.CommandPending(
            command_id=uuid.UUID(row.command_id),
            name=name,
            status=status,
            retry_policy="poll_same_command",
        )
        return HttpAnswer(202, pending, {"Location": location, "Retry-After": "1"})
    if state == _S.UNKNOWN:
        raise ProblemError(
            409,
            "command_outcome_unknown",
            "this write may have run; do not retry it — inspect the page with a read, then decide",
            command_id=row.command_id,
            retry_policy="do_not_retry",
        )
    if state == _S.NOT_STARTED:
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
