"""What each actor may ask of the others: narrow ports instead of the registry of `Services`.

    HTTP ─▶ TenantCoordinator ──DeviceLink──▶ DeviceAgent ─socket─▶ extension
    HTTP ─▶ SessionAgent                                      ◀── frames ──┘
    TenantCoordinator ──SessionLink──▶ SessionAgent
    DeviceAgent ──TenantLink──▶ TenantCoordinator

An actor writes only its own rows. The coordinator owns the session lifecycle and the device
rows' allocation columns; a session agent owns its command rows, and on its session's row only
what admission moves (the idle expiry, the command count) and the writes-blocked mark; a device
agent owns its device's liveness. A cross-actor call is made after the caller's turn committed,
and is safe to repeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from understudy._clock import Clock
    from understudy._node import SharedNode
    from understudy._store import Database
    from understudy._store._ports import Repositories
    from understudy._store.credentials import Device
    from understudy._telemetry import Telemetry
    from understudy.generated import models as m


@dataclass(frozen=True)
class ActorBase:
    """What every actor's turns need: storage, time, telemetry, and the timer-error counter."""

    db: Database
    clock: Clock
    telemetry: Telemetry
    timer_failed: Callable[[str], None]
    node: SharedNode | None = None  # several nodes on PostgreSQL; None: one process (SQLite)

    @property
    def repos(self) -> Repositories:
        """The typed repositories every row goes through (never SQL, never column dictionaries).

        The SQLite engine serves every transaction with one set (one connection), so an actor
        keeps it; a turn's writes join the turn's transaction (`Turns.run`).
        """
        return self.db.storage.repos


class DeviceLink(Protocol):
    """The coordinator's view of its tenant's device sockets."""

    async def send(self, device_id: str, frame: m.DeviceServerFrame) -> None:
        """Send on the device's authoritative socket, if it has one (else it resends on hello)."""
        ...

    def connected(self, device_id: str) -> bool:
        """Whether the device has an authoritative socket right now (on any node)."""
        ...

    def stage(self, device_id: str, frames: list[m.DeviceServerFrame]) -> list[m.DeviceServerFrame]:
        """Inside the caller's turn: route frames for the device's socket. Returns what this
        node sends after the commit (rows still waiting for the socket first); frames for a
        socket on another node become outbox rows of this transaction instead."""
        ...


class SessionLink(Protocol):
    """The coordinator's view of the session agents."""

    async def epoch_lost(self, session_id: str) -> None:
        """The session's lease epoch moved on: its agent settles the commands of older epochs."""
        ...

    async def demote(self, session_id: str) -> None:
        """The session's authority moved: its agent drops the socket and wakes its waiters."""
        ...


class TenantLink(Protocol):
    """What a device agent reports to its tenant's coordinator (lease decisions are its own)."""

    async def device_hello(
        self, device_id: str, hello: m.DeviceClientHello, epoch_changed: bool
    ) -> None: ...

    async def device_disconnected(self, device_id: str) -> None: ...

    async def provision_ack(self, device_id: str, ack: m.DeviceClientProvisionAck) -> None: ...

    async def close_ack(self, device_id: str, ack: m.DeviceClientCloseAck) -> bool: ...

    async def attach_request(
        self, device: Device, request: m.DeviceClientAttachRequest
    ) -> None: ...

    async def recovery_report(
        self, device_id: str, report: m.DeviceClientRecoveryReport
    ) -> None: ...

    async def lease_released(
        self, device_id: str, lease_id: Any, lease_epoch: int, reason: str
    ) -> None: ...

    async def ticket_request(
        self, device_id: str, request: m.DeviceClientTicketRequest
    ) -> None: ...
