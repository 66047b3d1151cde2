"""The life of a Session object, as an explicit state machine.

    NEW ──open──▶ OPEN ──410──▶ ENDED
     │              │             │
     └────close─────┴────close────┴──▶ CLOSED

`ENDED` means the backend answered `410`: commands are refused locally, and closing still sends one
`DELETE` to confirm cleanup. `CLOSED` is final.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from understudy_connector._exceptions import SessionClosedError, UsageError

if TYPE_CHECKING:
    from uuid import UUID

    from understudy_connector.generated.models import Session


class SessionState(enum.Enum):
    """Where a Session object is in its life."""

    NEW = "new"
    OPEN = "open"
    ENDED = "ended"
    CLOSED = "closed"


_MOVES: Final[dict[SessionState, frozenset[SessionState]]] = {
    SessionState.NEW: frozenset({SessionState.OPEN, SessionState.CLOSED}),
    SessionState.OPEN: frozenset({SessionState.ENDED, SessionState.CLOSED}),
    SessionState.ENDED: frozenset({SessionState.CLOSED}),
    SessionState.CLOSED: frozenset(),
}


@dataclass
class CreateProgress:
    """What an unfinished creation left on the backend, for the cleanup of an interrupted open.

    `session_id` is the session a reply named; `unanswered` says a `POST` went out and no reply to
    it came back (cancelled or cut off while waiting), so the backend may hold a session nobody
    has heard of.
    """

    session_id: UUID | None = None
    unanswered: bool = False


class SessionLifecycle:
    """The state of one Session object and the backend session it holds."""

    def __init__(self) -> None:
        self.state = SessionState.NEW
        self.session_id: UUID | None = None
        self.info: Session | None = None
        self.creating = CreateProgress()

    def move(self, target: SessionState) -> None:
        """Go to `target`.

        Raises:
            UsageError: The move is not allowed from the current state (opening twice, reusing a
                closed session).
        """
        if target not in _MOVES[self.state]:
            raise UsageError(f"a session cannot go from {self.state.value} to {target.value}")
        self.state = target

    def opened(self, info: Session) -> None:
        """The backend created the session."""
        self.move(SessionState.OPEN)
        self.session_id = info.session_id
        self.info = info
        self.creating = CreateProgress()  # the session is ours now: `close` deletes it

    def ended(self) -> None:
        """The backend said the session is terminal (`410`)."""
        if self.state is SessionState.OPEN:
            self.move(SessionState.ENDED)

    def require_open(self) -> UUID:
        """The session id, when commands may be sent.

        Raises:
            SessionClosedError: The session is not open.
        """
        if self.state is not SessionState.OPEN or self.session_id is None:
            raise SessionClosedError(
                f"this session is {self.state.value}; create a new session to send commands"
            )
        return self.session_id
