"""A simulated extension that is placed on chosen nodes and reconnects, as the extension does,
when the node under one of its sockets dies.

Placement: ticket replies carry socket URLs of the balancer; `device_node` / `session_node`
(a node's `host:port`) send the next device socket / session sockets to that node instead, so a
test knows which node holds what. A placement holds until its socket is lost; then sockets go
to `fallback_node`, or where the ticket sends them (the balancer).

Reconnecting (`roam`, on by default): when the device socket closes without this side closing
it, the device takes a new ticket through the balancer and reconnects there (its hello lists
its leases; the write journal is kept, as `chrome.storage.session` keeps it); when a session
socket closes that way, it asks for a fresh session ticket over its device socket (again once
the device socket is back, if that is gone too). Each loss and each return is stamped, so a
test can tell how long recovery took.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import websockets

from tests.support.simdevice import Lease, SimulatedDevice
from understudy.generated import models as m

RECONNECT_PAUSE_S = 0.1
RECONNECT_BUDGET_S = 60.0


def _on_node(url: str, node: str | None) -> str:
    if node is None:
        return url
    return urlunsplit(urlsplit(url)._replace(netloc=node))


class RoamingDevice(SimulatedDevice):
    def __init__(
        self,
        base_url: str,
        credential: str,
        *,
        device_node: str | None = None,
        session_node: str | None = None,
        fallback_node: str | None = None,
    ) -> None:
        super().__init__(base_url, credential)
        self.device_node = device_node
        self.session_node = session_node
        self.fallback_node = fallback_node  # where sockets go once lost (None: the balancer)
        self.roam = True
        self.placements: list[tuple[str, str]] = []  # ("device" | session id, host:port)
        self.lost_at: dict[str, float] = {}  # "device" | session id -> when its socket closed
        self.back_at: dict[str, float] = {}  # -> when its welcome / hello_ack came after that
        self.journal_at_loss: dict[str, dict[str, str]] = {}  # session id -> journal then
        self._leaving = False
        self._closing: list[Any] = []  # session sockets this side closed
        self._tasks: set[asyncio.Task[None]] = set()

    # -- placement -------------------------------------------------------------------------------

    async def connect(self, ticket: m.ConnectTicket | None = None) -> m.DeviceServerWelcome:
        ticket = ticket or await self.ticket()
        url = _on_node(ticket.socket_url, self.device_node)
        self.placements.append(("device", urlsplit(url).netloc))
        return await super().connect(ticket.model_copy(update={"socket_url": url}))

    async def _open_session(self, lease: Lease, ticket: m.DeviceServerSessionTicket) -> None:
        url = _on_node(ticket.socket_url, self.session_node)
        self.placements.append((lease.session_id, urlsplit(url).netloc))
        await super()._open_session(lease, ticket.model_copy(update={"socket_url": url}))

    def where(self, what: str) -> str | None:
        """The node (host:port) the latest `device` or session socket went to."""
        return next((node for kind, node in reversed(self.placements) if kind == what), None)

    # -- losses and returns ----------------------------------------------------------------------

    async def _read(self) -> None:
        await super()._read()
        if self._leaving:
            return
        self._lost("device")
        self.device_node = self.fallback_node  # that node may be gone
        if self.roam:
            self._spawn(self._reconnect())

    async def _read_session(self, lease: Lease, socket: Any) -> None:
        await super()._read_session(lease, socket)
        mine = any(closed is socket for closed in self._closing)
        lost = (
            not mine and lease.session_socket is socket and self.leases.get(lease.lease_id) is lease
        )
        if self._leaving or not lost:
            return
        lease.session_socket = None
        self._lost(lease.session_id, lease)
        self.session_node = self.fallback_node
        if self.roam:
            self._spawn(self._reopen(lease))

    async def _on_frame(self, frame: m.DeviceServerFrame) -> None:
        if isinstance(frame, m.DeviceServerWelcome) and "device" in self.lost_at:
            self.back_at.setdefault("device", time.monotonic())
        await super()._on_frame(frame)

    async def _on_session_frame(
        self, lease: Lease, socket: Any, frame: m.SessionServerFrame
    ) -> None:
        if isinstance(frame, m.SessionServerHelloAck) and lease.session_id in self.lost_at:
            self.back_at.setdefault(lease.session_id, time.monotonic())
        await super()._on_session_frame(lease, socket, frame)

    def _lost(self, what: str, lease: Lease | None = None) -> None:
        self.lost_at.setdefault(what, time.monotonic())
        for held in [lease] if lease is not None else list(self.leases.values()):
            self.journal_at_loss.setdefault(held.session_id, dict(held.journal))

    def recovery_s(self, what: str) -> float | None:
        """Seconds from a socket's loss to its return, or None if it is not back."""
        if what not in self.lost_at or what not in self.back_at:
            return None
        return self.back_at[what] - self.lost_at[what]

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reconnect(self) -> None:
        deadline = time.monotonic() + RECONNECT_BUDGET_S
        while time.monotonic() < deadline and self.roam and not self._leaving:
            try:
                await self.connect()
                return
            except Exception:  # a dead node, a balancer's 502: try again, as the extension does
                await asyncio.sleep(RECONNECT_PAUSE_S)

    async def _reopen(self, lease: Lease) -> None:
        deadline = time.monotonic() + RECONNECT_BUDGET_S
        while time.monotonic() < deadline and self.roam and not self._leaving:
            if lease.session_socket is not None or self.leases.get(lease.lease_id) is not lease:
                return  # a session ticket came meanwhile (the device socket's hello asked)
            try:
                await self.request_ticket(lease)
            except (websockets.ConnectionClosed, AttributeError):
                pass  # the device socket is down too: its reconnect brings the ticket
            await asyncio.sleep(1.0)  # a ticket round trip, then ask again if none came

    async def _close_session_socket(self, lease: Lease) -> None:
        if lease.session_socket is not None:
            self._closing.append(lease.session_socket)
        await super()._close_session_socket(lease)

    # -- leaving ---------------------------------------------------------------------------------

    async def disconnect(self) -> None:
        self._leaving = True
        try:
            await super().disconnect()
        finally:
            self._leaving = False

    async def stop(self) -> None:
        self.roam = False
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await super().stop()
