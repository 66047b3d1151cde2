"""What the store raises (drawn in the package docstring)."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class NotFound(StoreError, LookupError):
    """No such row for this customer."""


class RunNotFound(NotFound):
    pass


class SessionNotFound(NotFound):
    pass


class PersonaNotFound(NotFound):
    pass


class IdempotencyConflict(StoreError):
    """The idempotency key was used before with a different request."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"the idempotency key already created {run_id} from another request")
        self.run_id = run_id


class TurnConflict(StoreError):
    """A turn number was recorded before with a different body (a loop bug, never a retry)."""


class IllegalTransition(StoreError, ValueError):
    """A state change the lifecycle does not allow (`completed` → `running`, …)."""

    def __init__(self, kind: str, current: str, target: str) -> None:
        super().__init__(f"a {kind} cannot go from {current} to {target}")
        self.kind = kind
        self.current = current
        self.target = target


class BadCursor(StoreError, ValueError):
    """A pagination cursor this store did not write."""
