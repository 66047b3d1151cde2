"""What the API needs from the rest of the service: a start, a stop and two notifications.

The orchestrator implements `Services`: `create_app` starts it with the app (its lifespan) and
tells it about each run created and cancelled. `IdleServices` does nothing: runs stay `queued`,
which is what the API's own tests and benchmarks want.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from synthetic_users._store import RunRecord


class Services(Protocol):
    async def start(self) -> None:
        """Start background work (resume the runs `Store.claim_resumable_runs` returns)."""
        ...

    async def stop(self) -> None:
        """Stop background work; runs left `running` are resumed by the next start."""
        ...

    def run_created(self, run: RunRecord) -> None:
        """A run was written (durably) and answered `202`. Must not block: queue it."""
        ...

    def run_cancelled(self, run: RunRecord) -> None:
        """A run was cancelled (durably): close its sessions. Must not block."""
        ...


class IdleServices:
    """No background work: runs are written and stay `queued`."""

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def run_created(self, run: RunRecord) -> None:
        return None

    def run_cancelled(self, run: RunRecord) -> None:
        return None
