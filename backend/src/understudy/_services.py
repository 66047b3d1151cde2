"""The process-wide registry of actors and the services they share.

Actors are created on first use, one per key: a `TenantCoordinator` per tenant, a `DeviceAgent`
per (tenant, device) and a `SessionAgent` per session. Each serialises its own turns. The HTTP
layer finds actors here; an actor never does: it gets the narrow ports of `_ports.py`, which
this registry implements.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from understudy._claim import ClaimWatch
from understudy._lock import unlock_data_dir
from understudy._metrics import Metrics
from understudy._ports import ActorBase
from understudy._ratelimit import ApproximateLimiter
from understudy._revocation import RevocationWatch
from understudy._store.cluster import actor_key

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from collections.abc import Callable

    from understudy._clock import Clock
    from understudy._config import Settings
    from understudy._node import SharedNode
    from understudy._security import Keys
    from understudy._store import Database
    from understudy._store._ports import Repositories, Storage
    from understudy._store.cluster import ActorRef
    from understudy._telemetry import Telemetry
    from understudy.coordinator import TenantCoordinator
    from understudy.device_agent import DeviceAgent
    from understudy.generated import models as m
    from understudy.session_agent import SessionAgent


@dataclass
class Services:
    settings: Settings
    db: Database
    clock: Clock
    keys: Keys
    telemetry: Telemetry
    coordinators: dict[str, TenantCoordinator] = field(default_factory=dict)
    device_agents: dict[tuple[str, str], DeviceAgent] = field(default_factory=dict)
    session_agents: dict[str, SessionAgent] = field(default_factory=dict)
    ready: bool = False
    data_dir_lock: int | None = None  # the descriptor holding the one-writer lock
    # Ends the server when this process must stop serving (`understudy serve` sets it).
    stop_serving: Callable[[], None] = field(default=lambda: None)

    def __post_init__(self) -> None:
        self.limiter = ApproximateLimiter(
            self.settings.quota.requests_per_credential_per_min, 60.0, self.clock.now
        )
        self.revocations = RevocationWatch(self)
        self.claim = ClaimWatch(self.db.storage, self._claim_lost)
        # On PostgreSQL this process is one node of several (`_node.py`); on SQLite, the only one.
        self.node: SharedNode | None = None
        if self.db.storage.dialect.name == "postgresql":
            from understudy._node import SharedNode
            from understudy._store._postgres import PostgresStorage

            storage = self.db.storage
            assert isinstance(storage, PostgresStorage)  # noqa: S101 - the dialect says so
            self.node = SharedNode(storage, self.clock)
        self.metrics = Metrics(self.db, self.node)
        self.telemetry.observe(self.metrics.observe_event)
        self._base = ActorBase(
            self.db, self.clock, self.telemetry, self.metrics.timer_failed, node=self.node
        )
        self._sessions = _SessionAgents(self)

    def _claim_lost(self, reason: str) -> None:
        """Another service took the database: answer nothing more and stop (`stop_serving`)."""
        self.ready = False
        self.stop_serving()

    @property
    def storage(self) -> Storage:
        """The storage seam: transactions that yield the typed repositories."""
        return self.db.storage

    @property
    def repos(self) -> Repositories:
        """The repositories, for reads outside a transaction (and writes inside one)."""
        return self.db.storage.repos

    def coordinator(self, tenant: str) -> TenantCoordinator:
        from understudy.coordinator import TenantCoordinator

        actor = self.coordinators.get(tenant)
        if actor is None:
            actor = self.coordinators[tenant] = TenantCoordinator(
                self._base,
                tenant,
                keys=self.keys,
                settings=self.settings,
                devices=_TenantDevices(self, tenant),
                sessions=self._sessions,
            )
        return actor

    def device_agent(self, tenant: str, device_id: str) -> DeviceAgent:
        from understudy.device_agent import DeviceAgent

        actor = self.device_agents.get((tenant, device_id))
        if actor is None:
            actor = self.device_agents[(tenant, device_id)] = DeviceAgent(
                self._base, tenant, device_id, coordinator=self.coordinator(tenant)
            )
        return actor

    def session_agent(self, session_id: str) -> SessionAgent:
        from understudy.session_agent import SessionAgent

        actor = self.session_agents.get(session_id)
        if actor is None:
            actor = self.session_agents[session_id] = SessionAgent(
                self._base, session_id, keys=self.keys, quota=self.settings.quota
            )
        return actor

    async def start(self) -> None:
        """Migrate, load `DEVICE_TOKENS`, and re-arm every coordinator that has deadlines."""
        now = self.clock.now()
        storage = self.storage
        storage.migrate(now)
        if self.node is not None:
            # Registered before the first socket is accepted: other nodes take the sockets of
            # a node missing from `nodes` for gone.
            self.db.storage.keep_claim()
        with storage.transaction() as repos:
            for digest, entry in self.settings.device_tokens.items():
                repos.devices.ensure(
                    tenant=entry.tenant, device_id=entry.device, digest=digest, now=now
                )
        await storage.durable()
        with storage.read() as repos:
            tenants = set(repos.sessions.tenants_with_unsettled())
            tenants |= {d.tenant for d in repos.devices.all() if d.online}
            reopen = repos.commands.sessions_with_open_commands()
        for tenant in sorted(tenants):
            self.coordinator(tenant).arm()
        for session_id in reopen:
            self.session_agent(session_id).arm()
        # Close requests written while no service ran (`understudy sessions close`).
        await self.revocations.apply_close_requests()
        self.revocations.start()
        self.claim.start()
        if self.node is not None:
            self.node.start(self)
            await self.node.take_back()
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        if self.node is not None:
            await self.node.stop()
        await self.claim.stop()
        await self.revocations.stop()
        # Every timer stopped and its turn under way ended before the database closes: a turn
        # running into a closed database would fail half done.
        stopping = [coordinator.shutdown() for coordinator in self.coordinators.values()]
        await asyncio.gather(*stopping, return_exceptions=True)
        closers = [agent.shutdown() for agent in self.device_agents.values()]
        closers += [agent.shutdown() for agent in self.session_agents.values()]
        await asyncio.gather(*closers, return_exceptions=True)
        self.db.close()
        self.telemetry.close()
        if self.data_dir_lock is not None:
            lock, self.data_dir_lock = self.data_dir_lock, None
            unlock_data_dir(lock)

    # -- `NodeHost`: what the node asks of this process's actors ------------------------------

    async def deliver_outbox(self, key: str) -> None:
        kind, _, rest = key.partition(":")
        if kind == "session":
            await self.session_agent(rest).deliver_outbox()
        elif kind == "device":
            tenant, device_id = json.loads(rest)
            await self.device_agent(tenant, device_id).deliver_outbox()
        else:  # no socket: nothing to send to
            assert self.node is not None  # noqa: S101 - only nodes have outboxes
            with self.storage.transaction() as repos:
                self.node.take_outbox(repos, key)

    def wake_session(self, session_id: str) -> None:
        agent = self.session_agents.get(session_id)
        if agent is not None:
            agent.woken()
        for coordinator in self.coordinators.values():
            coordinator.woken(session_id)

    async def fire_timer(self, ref: ActorRef) -> None:
        if ref.kind == "tenant":
            await self.coordinator(ref.tenant).fire_timer()
        elif ref.kind == "session":
            await self.session_agent(ref.ident).fire_timer()
        else:
            with self.storage.transaction() as repos:
                repos.actors.set_due(ref.key, None)

    async def socket_lost(
        self, ref: ActorRef, serial: int, *, dead_after_s: float | None = None
    ) -> None:
        if ref.kind == "session":
            agent = self.session_agent(ref.ident)
            await agent.socket_lost_elsewhere(serial, dead_after_s=dead_after_s)
        elif ref.kind == "device":
            device = self.device_agent(ref.tenant, ref.ident)
            await device.socket_lost_elsewhere(serial, dead_after_s=dead_after_s)

    def open_sockets(self) -> dict[str, int]:
        opened: dict[str, int] = {}
        for session in self.session_agents.values():
            if (serial := session.open_serial()) is not None:
                opened[session.key] = serial
        for device in self.device_agents.values():
            if (serial := device.open_serial()) is not None:
                opened[device.key] = serial
        return opened

    async def taken_over(self, key: str, serial: int) -> bool:
        kind, _, rest = key.partition(":")
        if kind == "session":
            agent = self.session_agents.get(rest)
            return agent is not None and await agent.taken_over(serial)
        if kind == "device":
            tenant, device_id = json.loads(rest)
            device = self.device_agents.get((tenant, device_id))
            return device is not None and await device.taken_over(serial)
        return False


class _TenantDevices:
    """`DeviceLink` for one tenant's coordinator."""

    def __init__(self, services: Services, tenant: str) -> None:
        self._services = services
        self._tenant = tenant

    async def send(self, device_id: str, frame: m.DeviceServerFrame) -> None:
        await self._services.device_agent(self._tenant, device_id).send(frame)

    def connected(self, device_id: str) -> bool:
        if self._services.node is not None:  # the socket may be on any node: ask its row
            row = self._services.repos.actors.get(actor_key("device", self._tenant, device_id))
            return row is not None and row.sock_node is not None
        agent = self._services.device_agents.get((self._tenant, device_id))
        return agent is not None and agent.connected

    def stage(self, device_id: str, frames: list[m.DeviceServerFrame]) -> list[m.DeviceServerFrame]:
        node = self._services.node
        if node is None:
            return frames
        repos = self._services.repos
        key = actor_key("device", self._tenant, device_id)
        row = repos.actors.get(key)
        if row is None or row.sock_node is None:
            return []  # no socket anywhere: the coordinator resends on the device's hello
        if row.sock_node == node.node_id:
            agent = self._services.device_agents.get((self._tenant, device_id))
            if agent is None or not agent.holds(row.sock_serial):
                return []  # this node's socket is gone; its disconnect turn is on its way
            return [*agent.pending(row), *frames]
        node.write_outbox(
            repos,
            key=key,
            node=row.sock_node,
            serial=row.sock_serial,
            frames=[frame.to_wire_json() for frame in frames],
        )
        return []


class _SessionAgents:
    """`SessionLink` for the coordinators."""

    def __init__(self, services: Services) -> None:
        self._services = services

    async def epoch_lost(self, session_id: str) -> None:
        await self._services.session_agent(session_id).epoch_lost()

    async def demote(self, session_id: str) -> None:
        await self._services.session_agent(session_id).demote()
