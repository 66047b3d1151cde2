"""Session lifecycle as an explicit state machine.

    awaiting_attach ──attach──▶ connected            (attended)
    allocating ─▶ provisioning ─▶ connected ⇄ recovering   (unattended)
    any live state ──delete/expiry──▶ closing ──close_ack / loss deadline──▶ closed | expired | lost
    provisioning, recovering ──deadline──▶ lost (capacity still held until the close is settled)

A move not drawn here raises `IllegalTransitionError`; callers never assign a status directly.
"""

from __future__ import annotations

from enum import StrEnum


class SessionState(StrEnum):
    AWAITING_ATTACH = "awaiting_attach"
    ALLOCATING = "allocating"
    PROVISIONING = "provisioning"
    CONNECTED = "connected"
    RECOVERING = "recovering"
    CLOSING = "closing"
    CLOSED = "closed"
    EXPIRED = "expired"
    LOST = "lost"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def live(self) -> bool:
        """Accepts commands (subject to connection and write blocks)."""
        return self in LIVE


TERMINAL = frozenset({SessionState.CLOSED, SessionState.EXPIRED, SessionState.LOST})
LIVE = frozenset(
    {
        SessionState.CONNECTED,
        SessionState.RECOVERING,
        SessionState.PROVISIONING,
        SessionState.ALLOCATING,
        SessionState.AWAITING_ATTACH,
    }
)

_S = SessionState
_MOVES: dict[SessionState, frozenset[SessionState]] = {
    _S.AWAITING_ATTACH: frozenset({_S.CONNECTED, _S.CLOSING, _S.EXPIRED}),
    _S.ALLOCATING: frozenset({_S.PROVISIONING, _S.CLOSING, _S.LOST}),
    _S.PROVISIONING: frozenset({_S.CONNECTED, _S.CLOSING, _S.LOST}),
    _S.CONNECTED: frozenset({_S.RECOVERING, _S.CLOSING, _S.LOST}),
    _S.RECOVERING: frozenset({_S.CONNECTED, _S.CLOSING, _S.LOST}),
    _S.CLOSING: frozenset({_S.CLOSED, _S.EXPIRED, _S.LOST}),
    _S.CLOSED: frozenset(),
    _S.EXPIRED: frozenset(),
    _S.LOST: frozenset(),
}


class IllegalTransitionError(RuntimeError):
    """A lifecycle move the state machine does not allow (a programming error)."""


def transition(current: SessionState | str, target: SessionState) -> SessionState:
    """Return `target` if `current -> target` is a legal move, else raise."""
    current = SessionState(current)
    if target not in _MOVES[current]:
        raise IllegalTransitionError(f"session cannot move from {current} to {target}")
    return target
