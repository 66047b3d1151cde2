"""The lifecycles of runs and persona sessions: an `Enum` of states and a transition function.

    queued ──► running ──► completed
      │           ├──────► failed
      ├───────────┴──────► cancelled
      └──────────────────► failed          (a run or session that could not start)

Terminal states (`completed`, `failed`, `cancelled`) never change again. A move the diagram does
not draw raises `IllegalTransition`, so a bug in the orchestrator shows up where it happens
instead of as a run that quietly went from `completed` back to `running`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from synthetic_users._store._errors import IllegalTransition


class SessionState(StrEnum):
    """The status of one persona session (`SessionStatus` in the spec)."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_SESSION


class RunState(StrEnum):
    """The status of a run (`RunStatus` in the spec)."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_RUN


TERMINAL_SESSION: Final = frozenset(
    {SessionState.COMPLETED, SessionState.FAILED, SessionState.CANCELLED}
)
TERMINAL_RUN: Final = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED})

_SESSION_MOVES: Final[dict[SessionState, frozenset[SessionState]]] = {
    SessionState.QUEUED: frozenset(
        {SessionState.RUNNING, SessionState.FAILED, SessionState.CANCELLED}
    ),
    SessionState.RUNNING: TERMINAL_SESSION,
    SessionState.COMPLETED: frozenset(),
    SessionState.FAILED: frozenset(),
    SessionState.CANCELLED: frozenset(),
}
_RUN_MOVES: Final[dict[RunState, frozenset[RunState]]] = {
    RunState.QUEUED: frozenset({RunState.RUNNING, RunState.FAILED, RunState.CANCELLED}),
    RunState.RUNNING: TERMINAL_RUN,
    RunState.COMPLETED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}


def session_transition(current: SessionState | str, target: SessionState | str) -> SessionState:
    """`target` as a `SessionState` if a session may move there from `current`.

    Raises:
        IllegalTransition: the lifecycle does not allow the move.
        ValueError: `target` is not a session state at all.
    """
    now, then = SessionState(current), SessionState(target)
    if then not in _SESSION_MOVES[now]:
        raise IllegalTransition("persona session", now, then)
    return then


def run_transition(current: RunState | str, target: RunState | str) -> RunState:
    """`target` as a `RunState` if a run may move there from `current`.

    Raises:
        IllegalTransition: the lifecycle does not allow the move.
        ValueError: `target` is not a run state at all.
    """
    now, then = RunState(current), RunState(target)
    if then not in _RUN_MOVES[now]:
        raise IllegalTransition("run", now, then)
    return then
