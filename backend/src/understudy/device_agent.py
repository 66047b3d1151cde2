"""`DeviceAgent`: the one authoritative device-control socket of an enrolled profile.

A socket becomes authoritative only with a valid, unexpired, correctly addressed ticket whose JTI
this agent consumes for the first time; a replayed or forged ticket is refused and never displaces
the current connection. The first frame must be `hello` with the ticket's browser epoch. Lease
decisions belong to the tenant's coordinator (reached through `TenantLink`); this agent records
liveness and relays. Accepting a ticket, the hello and each heartbeat are turns (`_turns.py`):
their reply leaves after the commit.

On several nodes (PostgreSQL) the authoritative socket is a row (`actors`): accepting a ticket
claims it for this node with a serial that only grows, the hello marks it, a disconnect releases
it, and the hello and heartbeat turns are fenced by it (`Turns.run(fence=…)`): a socket another
node superseded is closed with 4409 the first time it acts. Frames that coordinators on other
nodes decided for this socket arrive as outbox rows (`deliver_outbox`).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, assert_never

from pydantic import TypeAdapter, ValidationError

from understudy._clock import utc
from understudy._connection import CLOSE_NOT_AUTHORITATIVE, CLOSE_SHUTDOWN, CLOSE_SUPERSEDED
from understudy._policy import HEARTBEAT_INTERVAL_MS
from understudy._store.cluster import actor_key
from understudy._turns import Outbox as TurnOutbox
from understudy._turns import SocketSupersededError, Turns
from understudy.generated import models as m

if TYPE_CHECKING:
    from understudy._connection import Connection
    from understudy._ports import ActorBase, TenantLink
    from understudy._security import TicketClaims
    from understudy._store._ports import Repositories
    from understudy._store.cluster import ActorRow

__all__ = ["DeviceAgent"]

log = logging.getLogger(__name__)
CLIENT_FRAMES: TypeAdapter[m.DeviceClientFrame] = TypeAdapter(m.DeviceClientFrame)
SERVER_FRAMES: TypeAdapter[m.DeviceServerFrame] = TypeAdapter(m.DeviceServerFrame)
_SUPERSEDED = (CLOSE_SUPERSEDED, "superseded by a newer connection")
_TAKEN_OVER = (CLOSE_SUPERSEDED, "another node took this socket over; reconnect")


@dataclass
class _Outbox(TurnOutbox):
    frames: list[m.DeviceServerFrame] = field(default_factory=list)
    hello_serial: int | None = None  # the connection whose hello this turn accepted
    pending: list[m.DeviceServerFrame] = field(default_factory=list)  # other nodes' rows, first


class DeviceAgent:
    """One enrolled device's actor: its authoritative socket and its liveness.

    Args:
        base: storage, clock and telemetry.
        tenant: the device's tenant.
        device_id: the device.
        coordinator: where lease events go (the tenant's coordinator).
    """

    def __init__(
        self, base: ActorBase, tenant: str, device_id: str, *, coordinator: TenantLink
    ) -> None:
        self.repos: Repositories = base.repos
        self.clock = base.clock
        self._telemetry = base.telemetry
        self.tenant = tenant
        self.device_id = device_id
        self._coordinator = coordinator
        self._node = base.node
        self._storage = base.db.storage
        self.key = actor_key("device", tenant, device_id)
        self._turns: Turns[_Outbox] = Turns(
            db=base.db,
            clock=base.clock,
            telemetry=base.telemetry,
            outbox=_Outbox,
            deliver=self._deliver,
            node=base.node,
            actor=("device", tenant, device_id),
            stage=self._stage,
        )
        self._conn: Connection | None = None
        self._conn_serial = 0
        self._browser_epoch: str | None = None
        self._hello_serial = 0  # the connection whose hello was accepted
        self._delivered_seq = 0  # the last outbox row of this key sent (or dropped) here

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def said_hello(self, serial: int) -> bool:
        """Whether connection `serial` is authoritative and its hello was accepted."""
        return serial == self._conn_serial == self._hello_serial and self._conn is not None

    def holds(self, serial: int) -> bool:
        """Whether this node's authoritative socket is connection `serial`."""
        return self._conn is not None and self._conn_serial == serial

    def pending(self, row: ActorRow) -> list[m.DeviceServerFrame]:
        """Inside a turn that sends to this node's socket: the outbox rows other nodes wrote for
        it before, so they leave first (frames keep the order their turns committed in)."""
        if self._node is None:
            return []
        waiting, self._delivered_seq = self._node.take_waiting(
            self.repos, self.key, row.outbox_seq, self._delivered_seq
        )
        frames: list[m.DeviceServerFrame] = []
        for taken in waiting:
            # A close names an older socket (a newer one holds the row): nothing to send.
            if taken.close is None and self.holds(taken.serial):
                frames += [SERVER_FRAMES.validate_json(text) for text in taken.frames]
        return frames

    def _stage(self, out: _Outbox) -> None:
        row = out.actor
        if row is not None and row.sock_node == self._node_id and self.holds(row.sock_serial):
            out.pending = self.pending(row)

    @property
    def _node_id(self) -> str | None:
        return self._node.node_id if self._node is not None else None

    async def deliver_outbox(self) -> None:
        """Send this node's outbox rows for the device on its socket, if it still holds it (a
        row for an older socket is dropped: the device resends on hello)."""
        if self._node is not None:
            await self._node.deliver_outbox(
                self._storage,
                self._turns.lock,
                self.key,
                holds=self.holds,
                send=self._send_row,
                taken=self._taken,
                disconnect=self._disconnect_row,
            )

    async def _send_row(self, text: str) -> None:
        await self.send(SERVER_FRAMES.validate_json(text))

    def _taken(self, seq: int) -> None:
        self._delivered_seq = max(self._delivered_seq, seq)

    async def _disconnect_row(self, serial: int, close: tuple[int, str]) -> None:
        await self.disconnected(serial, close=close)

    async def _deliver(self, out: _Outbox) -> None:
        if out.hello_serial is not None:
            self._hello_serial = out.hello_serial
        committed = out.committed
        for frame in out.pending:
            await self.send(frame, committed=committed)
        for frame in out.frames:
            await self.send(frame, committed=committed)

    async def accept(self, conn: Connection, claims: TicketClaims) -> int | None:
        """Make `conn` authoritative if its ticket is fresh; returns its serial, or None."""

        def body(out: _Outbox, now: float) -> int | None:
            fresh = self.repos.tickets.consume(claims.jti, claims.exp, now)
            device = self.repos.devices.get(self.tenant, self.device_id)
            if not fresh or device is None or device.revoked_at is not None:
                reason = "replayed" if not fresh else "revoked"
                self._turns.report(
                    "ticket.refused",
                    tenant=self.tenant,
                    device=self.device_id,
                    kind="device",
                    reason=reason,
                )
                return None
            self._turns.report(
                "ticket.consumed", tenant=self.tenant, device=self.device_id, kind="device"
            )
            return self._claim(out, claims.browser_epoch)

        async with self._turns.lock:
            # Not waiting for the fsync, as the coordinator's turn after the hello does.
            serial = await self._turns.run_locked(body, durable=False)
            if serial is None:
                return None
            old, self._conn = self._conn, conn
            self._conn_serial = serial
            self._browser_epoch = claims.browser_epoch
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close(*_SUPERSEDED)
        return serial

    def _claim(self, out: _Outbox, browser_epoch: str | None) -> int:
        """The accepted socket's serial; on several nodes, the row says this node holds it, and
        the node that held the one before is told to close it."""
        node, row = self._node, out.actor
        if node is None or row is None:
            return self._conn_serial + 1
        serial = self.repos.actors.claim_socket(self.key, node.node_id, browser_epoch, None)
        if row.sock_node is not None and row.sock_node != node.node_id:
            node.write_outbox(
                self.repos,
                key=self.key,
                node=row.sock_node,
                serial=row.sock_serial,
                frames=[],
                close=_SUPERSEDED,
            )
        out.actor = replace(row, sock_node=node.node_id, sock_serial=serial)
        return serial

    async def handle(self, serial: int, raw: str | bytes) -> None:
        """One frame from connection `serial`; frames from a superseded connection are ignored."""
        if serial != self._conn_serial or self._conn is None:
            return
        try:
            frame = CLIENT_FRAMES.validate_json(raw)
        except ValidationError as exc:
            await self.send(
                m.DeviceServerError(type="error", code="invalid_frame", message=_frame_error(exc))
            )
            return
        try:
            await self._dispatch(serial, frame)
        except SocketSupersededError:
            await self.disconnected(serial, close=_SUPERSEDED)

    async def _dispatch(self, serial: int, frame: m.DeviceClientFrame) -> None:
        coordinator = self._coordinator
        match frame:
            case m.DeviceClientHello():
                await self._hello(serial, frame)
            case m.DeviceClientHeartbeat():
                # The ack says the frame arrived, not that its time is on disk.
                await self._turns.run(
                    lambda out, now: self._heartbeat(out, now, frame), durable=False, fence=serial
                )
            case m.DeviceClientProvisionAck():
                await coordinator.provision_ack(self.device_id, frame)
            case m.DeviceClientCloseAck():
                if not await coordinator.close_ack(self.device_id, frame):
                    await self.send(
                        m.DeviceServerError(
                            type="error",
                            code="stale_lease_epoch",
                            message="close_ack does not match a lease being closed",
                        )
                    )
            case m.DeviceClientAttachRequest():
                device = self.repos.devices.get(self.tenant, self.device_id)
                if device is not None:
                    await coordinator.attach_request(device, frame)
            case m.DeviceClientRecoveryReport():
                await coordinator.recovery_report(self.device_id, frame)
            case m.DeviceClientLeaseReleased():
                await coordinator.lease_released(
                    self.device_id, frame.lease_id, frame.lease_epoch, frame.reason
                )
            case m.DeviceClientTicketRequest():
                await coordinator.ticket_request(self.device_id, frame)
            case m.DeviceClientHealth():
                # Content-free counters only: dialog overflow or interruption, popups closed,
                # navigations blocked, debugger detaches.
                for counter, count in sorted(frame.counters.to_wire().items()):
                    self._telemetry.emit(
                        "device.health",
                        tenant=self.tenant,
                        device=self.device_id,
                        status=frame.status,
                        reason=counter,
                        count=count,
                    )
            case m.DeviceClientError():
                log.info("device reported error code=%s", frame.code)
            case _:
                assert_never(frame)

    def _heartbeat(self, out: _Outbox, now: float, frame: m.DeviceClientHeartbeat) -> None:
        self.repos.devices.seen(self.tenant, self.device_id, now)
        out.frames.append(
            m.DeviceServerHeartbeatAck(type="heartbeat_ack", seq=frame.seq, server_time=utc(now))
        )

    async def _hello(self, serial: int, hello: m.DeviceClientHello) -> None:
        epoch = str(hello.browser_epoch)
        if epoch != self._browser_epoch:
            await self._refuse(serial, "hello.browserEpoch differs from the ticket's browser epoch")
            return

        def body(out: _Outbox, now: float) -> bool:
            before = self.repos.devices.get(self.tenant, self.device_id)
            previous = before.browser_epoch if before is not None else None
            connection_epoch = self.repos.devices.connected(
                self.tenant,
                self.device_id,
                now=now,
                browser_epoch=epoch,
                protocol_versions=sorted(set(hello.protocol_versions)),
                capabilities=sorted(set(hello.capabilities)),
                local_policy=hello.local_origin_policy.to_wire(),
            )
            version = max(hello.protocol_versions)
            if self._node is not None:
                self.repos.actors.said_hello(self.key, serial, hello.to_wire_json())
            self._turns.report(
                "device.connected",
                tenant=self.tenant,
                device=self.device_id,
                protocol_version=version,
            )
            out.hello_serial = serial
            out.frames.append(
                m.DeviceServerWelcome(
                    type="welcome",
                    device_id=self.device_id,
                    protocol_version=version,
                    # 0: the device row is gone (no epoch was counted for it)
                    connection_epoch=connection_epoch if connection_epoch is not None else 0,
                    heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                    server_time=utc(now),
                )
            )
            return previous is not None and previous != epoch

        # The welcome leaves at once; the coordinator's turn that follows waits for the commit
        # before it sends a lease frame.
        changed = await self._turns.run(body, durable=False, fence=serial)
        await self._coordinator.device_hello(self.device_id, hello, changed)

    async def _refuse(self, serial: int, message: str) -> None:
        await self.send(
            m.DeviceServerError(type="error", code="not_authoritative", message=message)
        )
        await self.disconnected(serial, close=(CLOSE_NOT_AUTHORITATIVE, message))

    async def send(self, frame: m.DeviceServerFrame, *, committed: bool = False) -> None:
        """Send if a socket is authoritative; otherwise the coordinator resends on reconnect
        (`committed`: see `Connection.send`)."""
        conn = self._conn
        if conn is None:
            return
        try:
            await conn.send(frame, committed=committed)
        except Exception:  # a dying socket; its reader reports the disconnect
            log.debug("device send failed", exc_info=True)

    async def disconnected(self, serial: int, close: tuple[int, str] | None = None) -> None:
        async with self._turns.lock:
            if serial != self._conn_serial or self._conn is None:
                return
            conn, self._conn = self._conn, None
        self._telemetry.emit("device.disconnected", tenant=self.tenant, device=self.device_id)
        if close is not None:
            with contextlib.suppress(Exception):
                await conn.close(*close)
        if self._node is not None:
            await self._release(serial)
        await self._coordinator.device_disconnected(self.device_id)

    async def _release(self, serial: int, dead_after_s: float | None = None) -> bool:
        """The row forgets socket `serial` (False: a newer socket holds it already, or, with
        `dead_after_s`, the node holding it is no longer gone)."""
        return await self._turns.run(
            lambda out, now: self.repos.actors.release_socket(
                self.key, serial, dead_after_s=dead_after_s
            )
        )

    async def socket_lost_elsewhere(
        self, serial: int, *, dead_after_s: float | None = None
    ) -> None:
        """Socket `serial` was held by a node that is gone: the disconnect it never ran (with
        `dead_after_s`, only while that node's heartbeat is still that old)."""
        if await self._release(serial, dead_after_s):
            self._telemetry.emit("device.disconnected", tenant=self.tenant, device=self.device_id)
            await self._coordinator.device_disconnected(self.device_id)

    def open_serial(self) -> int | None:
        """The serial of this node's open socket, or None."""
        return self._conn_serial if self._conn is not None else None

    async def taken_over(self, serial: int) -> bool:
        """Another node ran the disconnect of this node's socket `serial` (it took this node for
        gone): close it so the extension reconnects; False when it was no longer open."""
        async with self._turns.lock:
            if serial != self._conn_serial or self._conn is None:
                return False
            conn, self._conn = self._conn, None
        with contextlib.suppress(Exception):
            await conn.close(*_TAKEN_OVER)
        return True

    async def close_current(self, code: int, reason: str) -> None:
        """Close the authoritative connection, if any, as if it had disconnected."""
        await self.disconnected(self._conn_serial, close=(code, reason))

    async def shutdown(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(CLOSE_SHUTDOWN, "server shutting down")


def _frame_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    path = "/".join(str(p) for p in first["loc"])
    return f"{path}: {first['msg']}"[:2000]
