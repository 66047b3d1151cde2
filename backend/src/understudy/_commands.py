"""The durable states of a command, and the moves between them.

    read:   pending ──result──▶ succeeded | failed
                    └─deadline / socket lost─▶ timed_out          (504, safe to retry)
    write:  preparing ──write_ready──▶ granted ──result──▶ succeeded | failed
               │                          └─25 s deadline / epoch change / no result─▶ unknown
               └─5 s ready deadline / socket lost / restart─▶ not_started    (504, safe to retry)

`not_started` and `timed_out` may be admitted again under the same command id (a retry of the same
logical command); every other end state is final. A move not drawn here raises.
"""

from __future__ import annotations

from enum import StrEnum


class CommandState(StrEnum):
    PENDING = "pending"
    PREPARING = "preparing"
    GRANTED = "granted"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    NOT_STARTED = "not_started"
    UNKNOWN = "unknown"

    @property
    def open(self) -> bool:
        """Still owns the session's admission slot."""
        return self in (CommandState.PENDING, CommandState.PREPARING, CommandState.GRANTED)

    @property
    def retryable(self) -> bool:
        """The same command id may be admitted again: nothing ran."""
        return self in (CommandState.TIMED_OUT, CommandState.NOT_STARTED)


_C = CommandState
_MOVES: dict[CommandState, frozenset[CommandState]] = {
    _C.PENDING: frozenset({_C.SUCCEEDED, _C.FAILED, _C.TIMED_OUT}),
    _C.PREPARING: frozenset({_C.GRANTED, _C.NOT_STARTED, _C.FAILED}),
    _C.GRANTED: frozenset({_C.SUCCEEDED, _C.FAILED, _C.UNKNOWN, _C.NOT_STARTED}),
    _C.TIMED_OUT: frozenset({_C.PENDING}),
    _C.NOT_STARTED: frozenset({_C.PREPARING}),
    _C.SUCCEEDED: frozenset(),
    _C.FAILED: frozenset(),
    _C.UNKNOWN: frozenset(),
}


class IllegalCommandMoveError(RuntimeError):
    """A command state move the protocol does not allow (a programming error)."""


def move(current: CommandState | str, target: CommandState) -> CommandState:
    current = CommandState(current)
    if target not in _MOVES[current]:
        raise IllegalCommandMoveError(f"command cannot move from {current} to {target}")
    return target
