"""`TenantCoordinator`: allocation, lifecycle transitions, exact quotas, create idempotency and
lease expiry for one tenant.

Every change is one turn (`_turns.py`): one SQLite transaction computes the new state and the
frames it implies; the frames leave only after the commit. One timer per coordinator sleeps until
the earliest deadline of the tenant (provisioning, grace, hard and idle expiry, device liveness);
every turn re-arms it, and start-up re-arms it from SQLite, so deadlines that passed while the
process was down fire at once. The coordinator reaches device sockets and session agents only
through its ports (`_ports.py`) and never writes their rows: a browser-epoch change asks each
session agent to settle its own commands, after this turn committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from understudy import _security
from understudy._allocation import allocate
from understudy._clock import utc, wait_until
from understudy._lifecycle import SessionState, transition
from understudy._policy import (
    CREATE_WAIT_S,
    DEVICE_CAPACITY,
    GRACE_S,
    HARD_TTL_S,
    IDLE_TTL_S,
    OFFLINE_AFTER_S,
    PROVISION_DEADLINE_S,
)
from understudy._problems import ProblemError
from understudy._store.sessions import NewSession
from understudy._turns import WAIT_FALLBACK_S, Timer, Turns
from understudy._turns import Outbox as TurnOutbox
from understudy.generated import models as m

if TYPE_CHECKING:
    from understudy._config import Settings
    from understudy._ports import ActorBase, DeviceLink, SessionLink
    from understudy._security import Keys
    from understudy._store._ports import Repositories
    from understudy._store.credentials import Device
    from understudy._store.sessions import SessionRow

__all__ = ["CreateOutcome", "Outbox", "TenantCoordinator"]

ATTENDED_CAPABILITY = "attended_v1"


@dataclass
class Outbox(TurnOutbox):
    """What a turn decided to send, released after its transaction commits."""

    frames: list[tuple[str, m.DeviceServerFrame]] = field(default_factory=list)
    wake: list[str] = field(default_factory=list)  # session ids whose waiters should re-read
    demote: list[str] = field(default_factory=list)  # session ids whose sockets lost authority
    epoch_lost: list[str] = field(default_factory=list)  # session ids whose lease epoch moved

    def send(self, device_id: str, frame: m.DeviceServerFrame) -> None:
        self.frames.append((device_id, frame))


@dataclass(frozen=True)
class CreateOutcome:
    session: SessionRow
    replay: bool


class TenantCoordinator:
    """The tenant's actor: allocation, session lifecycle, quotas and lease expiry.

    Args:
        base: storage, clock, telemetry and the timer-error counter.
        tenant: the tenant it serves.
        keys: for fingerprints, profile hashes and session tickets.
        settings: quotas and the socket base URL.
        devices: the tenant's device sockets.
        sessions: the session agents.
    """

    def __init__(
        self,
        base: ActorBase,
        tenant: str,
        *,
        keys: Keys,
        settings: Settings,
        devices: DeviceLink,
        sessions: SessionLink,
    ) -> None:
        self.repos: Repositories = base.repos
        self.clock = base.clock
        self.keys = keys
        self.settings = settings
        self.tenant = tenant
        self._devices = devices
        self._sessions = sessions
        # Each waiter has its own event: a waiter that saw the change before its turn delivered
        # must not take the wake-up away from one still waiting for it.
        self._waiters: dict[str, set[asyncio.Event]] = {}
        timer = Timer(
            clock=base.clock,
            due=self._next_deadline,
            fire=lambda: self._turns.run(self._tick),
            failed=base.timer_failed,
            actor="tenant",
        )
        self._node = base.node
        self._turns: Turns[Outbox] = Turns(
            db=base.db,
            clock=base.clock,
            telemetry=base.telemetry,
            outbox=Outbox,
            deliver=self._deliver,
            timer=timer,
            node=base.node,
            actor=("tenant", tenant, ""),
            stage=self._stage,
        )

    # -- turns ---------------------------------------------------------------------------------

    async def _deliver(self, out: Outbox) -> None:
        # Sessions settle the commands of the old epoch before any frame can start a new one.
        for session_id in out.epoch_lost:
            await self._sessions.epoch_lost(session_id)
        for device_id, frame in out.frames:
            await self._devices.send(device_id, frame)
        for session_id in out.demote:
            await self._sessions.demote(session_id)
        for session_id in out.wake:
            for event in self._waiters.get(session_id, ()):
                event.set()

    def _stage(self, out: Outbox) -> None:
        """Several nodes, last in the turn's transaction: each device's frames go to the node
        holding its socket (outbox rows for another node); waiters anywhere are woken."""
        by_device: dict[str, list[m.DeviceServerFrame]] = {}
        for device_id, frame in out.frames:
            by_device.setdefault(device_id, []).append(frame)
        out.frames = [
            (device_id, frame)
            for device_id, frames in by_device.items()
            for frame in self._devices.stage(device_id, frames)
        ]
        out.wake_sessions.update(out.wake)

    def woken(self, session_id: str) -> None:
        """Another node changed the session: this node's waiters for it re-read."""
        for event in self._waiters.get(session_id, ()):
            event.set()

    async def fire_timer(self) -> None:
        """The timer turn, when another node's poll took this tenant's due row."""
        await self._turns.run(self._tick)

    # -- consumer operations -------------------------------------------------------------------

    async def create_unattended(
        self, actor: str, request: m.UnattendedSessionRequest, origins: list[str], key: str
    ) -> CreateOutcome:
        profile_hash = _security.profile_state_hash(
            self.keys, self.tenant, request.profile_state_key
        )
        fingerprint = _security.request_fingerprint(
            self.keys,
            self.tenant,
            "create_session",
            {
                "mode": "unattended",
                "deviceId": request.device_id,
                "allowedOrigins": origins,
                "profileStateHash": profile_hash,
            },
        )

        def body(out: Outbox, now: float) -> CreateOutcome:
            prior = self.repos.sessions.by_idempotency_key(self.tenant, key)
            if prior is not None:
                if not _security.digests_equal(prior.fingerprint or "", fingerprint):
                    raise ProblemError(
                        409,
                        "idempotency_conflict",
                        "this Idempotency-Key was used with a different request; "
                        "use a new key for a new session",
                    )
                if SessionState(prior.status).terminal:
                    raise ProblemError(
                        409,
                        "idempotency_conflict",
                        "the session created with this Idempotency-Key has ended; "
                        "use a new key to create another",
                    )
                return CreateOutcome(prior, replay=True)
            self._take_quota(
                "session_create",
                actor,
                self.settings.quota.session_creates_per_actor_per_min,
                now,
            )
            device = self._allocate(request.device_id, origins, profile_hash)
            session_id = str(uuid.uuid4())
            lease_id = str(uuid.uuid4())
            self.repos.sessions.insert(
                NewSession(
                    session_id=session_id,
                    tenant=self.tenant,
                    actor=actor,
                    mode="unattended",
                    status=SessionState.PROVISIONING.value,
                    device_id=device.device_id,
                    lease_id=lease_id,
                    lease_epoch=1,
                    allowed_origins=origins,
                    profile_hash=profile_hash,
                    idempotency_key=key,
                    fingerprint=fingerprint,
                    created_at=now,
                    expires_at=now + HARD_TTL_S,
                    idle_expires_at=now + IDLE_TTL_S,
                    provision_deadline=now + PROVISION_DEADLINE_S,
                    capacity_held=True,
                )
            )
            self.repos.devices.assigned(self.tenant, device.device_id, now)
            self._telemetry(
                "allocation.granted",
                outcome="granted",
                device=device.device_id,
                session=session_id,
                actor=actor,
                mode="unattended",
            )
            self._telemetry(
                "lifecycle.transition",
                session=session_id,
                from_state="allocating",
                to_state="provisioning",
            )
            out.send(
                device.device_id,
                self._provision_frame(session_id, lease_id, 1, origins, now + PROVISION_DEADLINE_S),
            )
            row = self.repos.sessions.require(session_id)
            return CreateOutcome(row, replay=False)

        outcome = await self._turns.run(body)
        return outcome

    async def wait_connected(self, session_id: str, timeout_s: float = CREATE_WAIT_S) -> SessionRow:
        """Wait (on the injected clock) until the session leaves provisioning, or the timeout."""
        deadline = self.clock.now() + timeout_s
        event = asyncio.Event()
        waiting = self._waiters.setdefault(session_id, set())
        waiting.add(event)
        try:
            while True:
                row = self.repos.sessions.require(session_id)
                if row.status != SessionState.PROVISIONING or self.clock.now() >= deadline:
                    return row
                event.clear()
                if self._node is None:
                    await wait_until(event, self.clock, deadline)
                    continue
                # Several nodes: the device's turn may run on any of them; a wake-up from it may
                # be missed, the row never is.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(WAIT_FALLBACK_S):
                        await wait_until(event, self.clock, deadline)
        finally:
            waiting.discard(event)
            if not waiting:
                self._waiters.pop(session_id, None)

    async def create_attended(self, actor: str) -> SessionRow:
        def body(out: Outbox, now: float) -> SessionRow:
            self._take_quota(
                "session_create",
                actor,
                self.settings.quota.session_creates_per_actor_per_min,
                now,
            )
            session_id = str(uuid.uuid4())
            self.repos.sessions.insert(
                NewSession(
                    session_id=session_id,
                    tenant=self.tenant,
                    actor=actor,
                    mode="attended",
                    status=SessionState.AWAITING_ATTACH.value,
                    allowed_origins=[],
                    created_at=now,
                    expires_at=now + HARD_TTL_S,
                    idle_expires_at=now + IDLE_TTL_S,
                )
            )
            self._telemetry(
                "lifecycle.transition",
                session=session_id,
                actor=actor,
                mode="attended",
                to_state="awaiting_attach",
            )
            return self.repos.sessions.require(session_id)

        return await self._turns.run(body)

    async def delete(self, session_id: str) -> SessionRow:
        def body(out: Outbox, now: float) -> SessionRow:
            row = self._own(session_id)
            if SessionState(row.status).live:
                self._begin_close(out, row, now, intent=SessionState.CLOSED, reason="deleted")
            return self.repos.sessions.require(session_id)

        return await self._turns.run(body)

    # -- device events -------------------------------------------------------------------------

    async def device_hello(
        self, device_id: str, hello: m.DeviceClientHello, epoch_changed: bool
    ) -> None:
        """Reconcile the device's leases with ours after it (re)connected."""
        leases = {str(lease.lease_id): lease for lease in hello.leases}

        def body(out: Outbox, now: float) -> None:
            reported = dict(leases)  # a turn may run again (several nodes): start from all
            for row in self.repos.sessions.holding_capacity(self.tenant, device_id):
                reported.pop(row.lease_id or "", None)
                self._reconcile(out, row, now, hello, epoch_changed)
            for lease_id, lease in reported.items():  # leases we no longer know as live
                out.send(
                    device_id,
                    m.DeviceServerClose(
                        type="close",
                        lease_id=lease.lease_id,
                        session_id=lease.session_id,
                        lease_epoch=lease.lease_epoch,
                        reason="superseded",
                    ),
                )
                del lease_id

        await self._turns.run(body)

    def _reconcile(
        self,
        out: Outbox,
        row: SessionRow,
        now: float,
        hello: m.DeviceClientHello,
        epoch_changed: bool,
    ) -> None:
        state = SessionState(row.status)
        device_id = row.device_id or ""
        new_epoch = str(hello.browser_epoch)
        held = {str(lease.lease_id) for lease in hello.leases}
        if state == SessionState.CLOSING and epoch_changed and row.lease_id not in held:
            # A new browser holds nothing of the one the session was closing in (its tab went
            # with it): the close is done now, not at a close_ack race away, so a session made
            # right after this hello does not meet the old one's capacity and origins.
            self._finish(row, now, SessionState(row.end_intent or SessionState.CLOSED.value))
            return
        if state == SessionState.CLOSING or state.terminal:
            out.send(device_id, self._close_frame(row, "late_ack" if state.terminal else "deleted"))
            return
        if row.mode == "attended" and (epoch_changed or row.lease_id not in held):
            # An attended tab is a person's tab: never re-created or re-attached automatically.
            self._lose(out, row, now, "device_lost", release=True)
            return
        if epoch_changed:
            if row.grace_deadline is not None and now >= row.grace_deadline:
                self._lose(out, row, now, "device_lost", release=True)
                return
            epoch = row.lease_epoch + 1
            grace = row.grace_deadline or now + GRACE_S
            self.repos.sessions.rebind_epoch(
                row.session_id,
                lease_epoch=epoch,
                browser_epoch=new_epoch,
                writes_blocked_reason=row.writes_blocked_reason or "browser_epoch_changed",
                grace_deadline=grace,
                status=(
                    self._move(row, SessionState.RECOVERING)
                    if state == SessionState.CONNECTED
                    else None
                ),
            )
            out.epoch_lost.append(row.session_id)
            out.demote.append(row.session_id)
            out.send(
                device_id,
                self._provision_frame(
                    row.session_id,
                    row.lease_id or "",
                    epoch,
                    row.allowed_origins,
                    grace,
                ),
            )
            return
        if state == SessionState.PROVISIONING or row.lease_id not in held:
            if state != SessionState.PROVISIONING:
                self._lose(out, row, now, "device_lost", release=True)
                return
            out.send(
                device_id,
                self._provision_frame(
                    row.session_id,
                    row.lease_id or "",
                    row.lease_epoch,
                    row.allowed_origins,
                    row.provision_deadline or now + PROVISION_DEADLINE_S,
                ),
            )
            return
        if (
            state == SessionState.RECOVERING
            and row.writes_blocked_reason != "browser_epoch_changed"
        ):
            self.repos.sessions.mark_connected(
                row.session_id, status=self._move(row, SessionState.CONNECTED)
            )
        out.send(device_id, self._ticket_frame(row, now))

    async def provision_ack(self, device_id: str, ack: m.DeviceClientProvisionAck) -> None:
        def body(out: Outbox, now: float) -> None:
            row = self.repos.sessions.by_lease(str(ack.lease_id))
            if row is None or row.tenant != self.tenant or row.device_id != device_id:
                out.send(
                    device_id,
                    m.DeviceServerClose(
                        type="close",
                        lease_id=ack.lease_id,
                        session_id=ack.session_id,
                        lease_epoch=ack.lease_epoch,
                        reason="late_ack",
                    ),
                )
                return
            state = SessionState(row.status)
            current = ack.lease_epoch == row.lease_epoch
            if not current or state not in (SessionState.PROVISIONING, SessionState.RECOVERING):
                # A late or stale acknowledgement: whatever tab it made must go.
                if ack.outcome == "provisioned":
                    out.send(
                        device_id,
                        m.DeviceServerClose(
                            type="close",
                            lease_id=ack.lease_id,
                            session_id=ack.session_id,
                            lease_epoch=ack.lease_epoch,
                            reason="late_ack",
                        ),
                    )
                return
            if ack.outcome == "refused":
                self._lose(out, row, now, "provisioning_failed", release=True)
                return
            updated = self.repos.sessions.provisioned(
                row.session_id,
                status=self._move(row, SessionState.CONNECTED),
                tab_id=ack.tab_id,
                browser_epoch=str(ack.browser_epoch),
            )
            assert updated is not None  # noqa: S101 - read in this turn
            out.send(device_id, self._ticket_frame(updated, now))
            out.wake.append(row.session_id)

        await self._turns.run(body)

    async def recovery_report(self, device_id: str, report: m.DeviceClientRecoveryReport) -> None:
        for lease in report.leases:
            if lease.status == "recreated":
                await self.provision_ack(
                    device_id,
                    m.DeviceClientProvisionAck(
                        type="provision_ack",
                        lease_id=lease.lease_id,
                        session_id=lease.session_id,
                        lease_epoch=lease.lease_epoch,
                        browser_epoch=report.browser_epoch,
                        outcome="provisioned",
                        tab_id=lease.tab_id,
                    ),
                )
            else:
                await self.lease_released(device_id, lease.lease_id, lease.lease_epoch, "lost")

    async def close_ack(self, device_id: str, ack: m.DeviceClientCloseAck) -> bool:
        """Settle a fenced close. False when the acknowledgement is stale."""

        def body(out: Outbox, now: float) -> bool:
            row = self.repos.sessions.by_lease(str(ack.lease_id))
            if row is None or row.tenant != self.tenant or row.device_id != device_id:
                return False
            if ack.lease_epoch != row.lease_epoch or not row.capacity_held:
                return False
            state = SessionState(row.status)
            if state == SessionState.CLOSING:
                self._finish(row, now, SessionState(row.end_intent or SessionState.CLOSED.value))
            elif state.terminal:
                self.repos.sessions.release_capacity(row.session_id)
            else:
                return False
            out.wake.append(row.session_id)
            return True

        return await self._turns.run(body)

    async def lease_released(
        self, device_id: str, lease_id: Any, lease_epoch: int, reason: str
    ) -> None:
        def body(out: Outbox, now: float) -> None:
            row = self.repos.sessions.by_lease(str(lease_id))
            if row is None or row.device_id != device_id or lease_epoch != row.lease_epoch:
                return
            state = SessionState(row.status)
            if state == SessionState.CLOSING:
                self._finish(row, now, SessionState(row.end_intent or SessionState.CLOSED.value))
            elif state.terminal:
                self.repos.sessions.release_capacity(row.session_id)
            elif row.mode == "attended" and reason in ("tab_closed", "detached_by_user"):
                self._begin_close(
                    out, row, now, intent=SessionState.CLOSED, reason=reason, notify=False
                )
                closing = self.repos.sessions.require(row.session_id)
                self._finish(closing, now, SessionState.CLOSED)
            else:
                self._lose(
                    out,
                    row,
                    now,
                    "tab_closed" if reason == "tab_closed" else "device_lost",
                    release=True,
                )

        await self._turns.run(body)

    async def attach_request(self, device: Device, request: m.DeviceClientAttachRequest) -> None:
        def body(out: Outbox, now: float) -> None:
            def refuse(code: str, message: str) -> None:
                out.send(
                    device.device_id,
                    m.DeviceServerAttachResult(
                        type="attach_result",
                        request_id=request.request_id,
                        session_id=request.session_id,
                        outcome="refused",
                        error=m.ErrorInfo(code=code, message=message),
                    ),
                )

            row = self.repos.sessions.get(str(request.session_id))
            if row is None or row.tenant != self.tenant or row.mode != "attended":
                refuse("session_not_found", "no attended session with this id in your tenant")
                return
            if row.status != SessionState.AWAITING_ATTACH:
                refuse("not_awaiting_attach", f"the session is {row.status}, not awaiting attach")
                return
            if ATTENDED_CAPABILITY not in device.capabilities:
                refuse("protocol_upgrade_required", "update the extension to attach tabs")
                return
            used = len(self.repos.sessions.holding_capacity(self.tenant, device.device_id))
            if used >= DEVICE_CAPACITY:
                refuse("capacity_exhausted", "this browser already controls two tabs; close one")
                return
            lease_id = str(uuid.uuid4())
            updated = self.repos.sessions.attached(
                row.session_id,
                status=self._move(row, SessionState.CONNECTED),
                device_id=device.device_id,
                lease_id=lease_id,
                lease_epoch=1,
                tab_id=request.tab_id,
                browser_epoch=str(request.browser_epoch),
            )
            assert updated is not None  # noqa: S101 - read in this turn
            self.repos.devices.assigned(self.tenant, device.device_id, now)
            out.send(
                device.device_id,
                m.DeviceServerAttachResult(
                    type="attach_result",
                    request_id=request.request_id,
                    session_id=request.session_id,
                    outcome="attached",
                    lease_id=uuid.UUID(lease_id),
                    lease_epoch=1,
                ),
            )
            out.send(device.device_id, self._ticket_frame(updated, now))
            self._telemetry(
                "lifecycle.transition",
                session=row.session_id,
                from_state="awaiting_attach",
                to_state="connected",
            )

        await self._turns.run(body)

    async def ticket_request(self, device_id: str, request: m.DeviceClientTicketRequest) -> None:
        def body(out: Outbox, now: float) -> None:
            row = self.repos.sessions.by_lease(str(request.lease_id))
            if (
                row is None
                or row.device_id != device_id
                or row.lease_epoch != request.lease_epoch
                or row.status not in (SessionState.CONNECTED, SessionState.RECOVERING)
            ):
                out.send(
                    device_id,
                    m.DeviceServerError(
                        type="error",
                        code="stale_lease",
                        message="no live lease with this id and epoch; close its tab",
                    ),
                )
                return
            out.send(device_id, self._ticket_frame(row, now))

        await self._turns.run(body)

    # -- the timer -----------------------------------------------------------------------------

    def arm(self) -> None:
        """(Re)arm the one timer at the tenant's earliest deadline."""
        self._turns.timer.arm()  # type: ignore[union-attr]  # this actor always has a timer

    async def shutdown(self) -> None:
        """Stop the timer for good; a tick already under way ends first."""
        await self._turns.timer.stop()  # type: ignore[union-attr]

    def _next_deadline(self) -> float | None:
        """The earliest moment `_tick` has something to do; SQLite computes it from indexes.

        Every turn ends here, so this must not load the tenant's rows into Python: a tenant of
        1,000 devices would otherwise make each connect O(N). The cases are `_tick`'s own.
        """
        return self.repos.sessions.next_deadline(self.tenant, offline_after_s=OFFLINE_AFTER_S)

    def _offline(self, device_id: str, seen: float, reason: str) -> None:
        """The device is gone: its sessions recover until `GRACE_S` after it was last seen."""
        self.repos.devices.offline(self.tenant, device_id)
        self._telemetry("device.offline", device=device_id, reason=reason)
        for row in self.repos.sessions.holding_capacity(self.tenant, device_id):
            if row.status == SessionState.CONNECTED:
                self.repos.sessions.start_grace(
                    row.session_id,
                    grace_deadline=seen + GRACE_S,
                    status=self._move(row, SessionState.RECOVERING),
                )
            elif row.grace_deadline is None:
                self.repos.sessions.start_grace(row.session_id, grace_deadline=seen + GRACE_S)

    async def device_disconnected(self, device_id: str) -> None:
        """The device's authoritative socket closed: it is offline now, not 75 s from now.

        The 75 s rule is for a socket that stays open but stops heartbeating. A closed socket
        leaves no doubt, and an online flag kept meanwhile would let allocation provision new
        sessions on a device that cannot hear it.
        """

        def body(out: Outbox, now: float) -> None:
            if self._devices.connected(device_id):
                return  # it reconnected before this turn ran; its hello reconciles the leases
            device = self.repos.devices.get(self.tenant, device_id)
            if device is None:
                return
            held = self.repos.sessions.holding_capacity(self.tenant, device_id)
            if not device.online and all(row.grace_deadline is not None for row in held):
                # Already offline with every session recovering (a revoked device, or a socket
                # that never said hello): no write, so a reconnecting flood costs no fsync.
                return
            self._offline(device_id, device.last_seen_at or now, "socket_closed")

        await self._turns.run(body)

    def _tick(self, out: Outbox, now: float) -> None:
        for device in self.repos.devices.of_tenant(self.tenant):
            seen = device.last_seen_at
            if device.online and seen is not None and now >= seen + OFFLINE_AFTER_S:
                self._offline(device.device_id, seen, "heartbeat_gap")
        for row in self.repos.sessions.unsettled(self.tenant):
            state = SessionState(row.status)
            if state.live and now >= row.expires_at:
                self._expire(out, row, now, "hard_expiry")
            elif state.live and now >= row.idle_expires_at:
                self._expire(out, row, now, "idle_expiry")
            elif (
                state == SessionState.PROVISIONING
                and row.provision_deadline is not None
                and now >= row.provision_deadline
            ):
                self._lose(out, row, now, "provisioning_failed", release=False)
            elif row.grace_deadline is not None and now >= row.grace_deadline:
                if state == SessionState.RECOVERING:
                    self._lose(out, row, now, "device_lost", release=True)
                elif state == SessionState.CLOSING:
                    self._finish(row, now, SessionState(row.end_intent or "closed"))
                elif state.terminal and row.capacity_held:
                    self.repos.sessions.release_capacity(row.session_id)

    # -- transitions ---------------------------------------------------------------------------

    def _move(self, row: SessionRow, target: SessionState) -> str:
        state = transition(row.status, target)
        self._telemetry(
            "lifecycle.transition",
            session=row.session_id,
            from_state=row.status,
            to_state=state.value,
        )
        return state.value

    def _expire(self, out: Outbox, row: SessionRow, now: float, reason: str) -> None:
        if row.capacity_held and row.device_id:
            self._begin_close(out, row, now, intent=SessionState.EXPIRED, reason=reason)
        else:
            self.repos.sessions.expire(
                row.session_id,
                status=self._move(row, SessionState.EXPIRED),
                ended_at=now,
                reason=reason,
            )
            out.wake.append(row.session_id)

    def _begin_close(
        self,
        out: Outbox,
        row: SessionRow,
        now: float,
        *,
        intent: SessionState,
        reason: str,
        notify: bool = True,
    ) -> None:
        """Persist `closing` first; the close frame leaves after the commit."""
        closing = self.repos.sessions.begin_close(
            row.session_id,
            status=self._move(row, SessionState.CLOSING),
            end_intent=intent.value,
            end_reason=reason,
            grace_deadline=now + GRACE_S,
        )
        assert closing is not None  # noqa: S101 - read in this turn
        out.demote.append(row.session_id)
        if not (row.capacity_held and row.device_id):
            self._finish(closing, now, intent)
            return
        if notify:
            out.send(row.device_id, self._close_frame(row, _close_reason(reason)))

    def _finish(self, row: SessionRow, now: float, final: SessionState) -> None:
        self.repos.sessions.finish(row.session_id, status=self._move(row, final), ended_at=now)

    def _lose(
        self, out: Outbox, row: SessionRow, now: float, reason: str, *, release: bool
    ) -> None:
        """The session is lost. Unless `release`, its tab may still exist: keep the capacity until
        the device acknowledges a close or the device-loss deadline passes."""
        self.repos.sessions.lose(
            row.session_id,
            status=self._move(row, SessionState.LOST),
            ended_at=now,
            reason=reason,
            keep_capacity_until=None if release else now + GRACE_S,
        )
        out.demote.append(row.session_id)
        out.wake.append(row.session_id)
        if not release and row.device_id:
            out.send(row.device_id, self._close_frame(row, "lost"))

    # -- helpers -------------------------------------------------------------------------------

    def _own(self, session_id: str) -> SessionRow:
        row = self.repos.sessions.get(session_id)
        if row is None or row.tenant != self.tenant:
            raise ProblemError(404, "session_not_found", "no session with this id in your tenant")
        return row

    def _take_quota(self, scope: str, subject: str, limit: int, now: float) -> None:
        wait = self.repos.quotas.take(scope, f"{self.tenant}/{subject}", limit, now)
        record = self._refusal if wait else self._telemetry
        record(
            "quota.decision", scope=scope, outcome="refused" if wait else "allowed", actor=subject
        )
        if wait is not None:
            raise ProblemError(
                429,
                "rate_limited",
                f"the {scope.replace('_', ' ')} quota is "
                f"{limit} per minute; retry after the Retry-After delay",
                retry_after=wait,
            )

    def _allocate(self, device_id: str | None, origins: list[str], profile_hash: str) -> Device:
        return allocate(
            self.repos.devices.of_tenant(self.tenant),
            lambda device: self.repos.sessions.holding_capacity(self.tenant, device),
            device_id=device_id,
            origins=origins,
            profile_hash=profile_hash,
            refused=lambda reason: self._refusal(
                "allocation.refused", outcome="refused", reason=reason
            ),
        )

    def _provision_frame(
        self, session_id: str, lease_id: str, epoch: int, origins: list[str], deadline: float
    ) -> m.DeviceServerProvision:
        return m.DeviceServerProvision(
            type="provision",
            lease_id=uuid.UUID(lease_id),
            session_id=uuid.UUID(session_id),
            lease_epoch=epoch,
            allowed_origins=origins,
            deadline_at=utc(deadline),
        )

    def _close_frame(self, row: SessionRow, reason: str) -> m.DeviceServerClose:
        return m.DeviceServerClose(
            type="close",
            lease_id=uuid.UUID(row.lease_id),
            session_id=uuid.UUID(row.session_id),
            lease_epoch=max(1, row.lease_epoch),
            reason=reason,  # type: ignore[arg-type]
        )

    def _ticket_frame(self, row: SessionRow, now: float) -> m.DeviceServerSessionTicket:
        claims = _security.new_ticket_claims(
            aud="session",
            tenant=self.tenant,
            device=row.device_id or "",
            session=row.session_id,
            lease=row.lease_id,
            browser_epoch=row.browser_epoch or "",
            lease_epoch=row.lease_epoch,
            actor=f"session:{row.session_id}",
            now=now,
        )
        ticket = _security.sign_ticket(self.keys, claims)
        self._telemetry("ticket.minted", kind="session", session=row.session_id)
        base = self.settings.socket_base_url
        return m.DeviceServerSessionTicket(
            type="session_ticket",
            session_id=uuid.UUID(row.session_id),
            lease_id=uuid.UUID(row.lease_id),
            lease_epoch=row.lease_epoch,
            ticket=ticket,
            socket_url=f"{base}/v1/sessions/{row.session_id}/socket",
            expires_at=utc(claims.exp),
        )

    def _telemetry(self, event: str, **fields: str | int | bool) -> None:
        self._turns.report(event, tenant=self.tenant, **fields)

    def _refusal(self, event: str, **fields: str | int | bool) -> None:
        """A record of the refusal this turn answers with: reported although it rolls back."""
        self._turns.report_refusal(event, tenant=self.tenant, **fields)


def _close_reason(reason: str) -> str:
    return {"hard_expiry": "expired", "idle_expiry": "idle_expired"}.get(reason, "deleted")
