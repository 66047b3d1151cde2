"""A socket that another node superseded is closed, and a turn acting for it is refused."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import websockets

from tests.backend.faults._harness import open_session
from understudy import _security
from understudy._connection import CLOSE_SUPERSEDED
from understudy.generated import models as m

if TYPE_CHECKING:
    from tests.backend.conftest import Backend
    from tests.backend.multinode.conftest import Nodes


async def _closed_with(socket: Any, within: float = 5.0) -> int | None:
    await asyncio.wait_for(socket.wait_closed(), within)
    code: int | None = socket.close_code
    return code


def _deafen(node: Backend) -> None:
    """The node never hears what other nodes send it: no outbox drain, no notification."""
    shared = node.services.node
    assert shared is not None

    async def no_delivery() -> None:
        return None

    shared.drain = no_delivery  # type: ignore[method-assign]
    shared._notified = lambda payload: None  # type: ignore[method-assign]


async def test_a_device_reconnecting_to_another_node_closes_its_old_socket(nodes: Nodes) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    device = await a.device()
    old = device._socket
    device.base_url = b.url
    await device.connect()  # a fresh ticket through node b, as a load balancer may send it
    assert await _closed_with(old) == CLOSE_SUPERSEDED
    with a.services.storage.read() as repos:
        row = repos.actors.get(b.services.device_agent("acme", "laptop-1").key)
    assert row is not None and row.sock_node == "b"


async def test_a_frame_on_a_superseded_socket_is_refused_by_the_row_and_closes_it(
    nodes: Nodes,
) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    _deafen(a)  # node a never hears of the new socket
    device = await a.device()
    old = device._socket
    acks = len(device.frames_of(m.DeviceServerHeartbeatAck))
    device.base_url = b.url
    await device.connect()
    heartbeat = m.DeviceClientHeartbeat(type="heartbeat", seq=99, free_capacity=2)
    await old.send(heartbeat.to_wire_json())  # the old socket on node a acts once more
    assert await _closed_with(old) == CLOSE_SUPERSEDED
    assert len(device.frames_of(m.DeviceServerHeartbeatAck)) == acks  # its turn was refused


async def test_a_session_frame_on_a_socket_another_node_took_is_refused_and_closes_it(
    nodes: Nodes,
) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    device = await a.device()
    async with a.client(a.api_key()) as http:
        sid, lease = await open_session(http, device)
    _deafen(a)  # node a never hears that node b took the session socket
    row = a.services.repos.sessions.require(sid)
    claims = _security.new_ticket_claims(
        aud="session",
        tenant="acme",
        device=row.device_id or "",
        session=sid,
        lease=row.lease_id,
        browser_epoch=row.browser_epoch or "",
        lease_epoch=row.lease_epoch,
        actor=f"session:{sid}",
        now=nodes.clock.now(),
    )
    ticket = _security.sign_ticket(b.services.keys, claims)
    url = b.url.replace("http://", "ws://") + f"/v1/sessions/{sid}/socket?ticket={ticket}"
    async with websockets.connect(url, open_timeout=5):  # a newer socket, on node b
        await b.until(
            lambda: b.services.session_agent(sid).connected, "node b holds the session socket"
        )
        old = lease.session_socket
        error = {"code": "internal_error", "message": "probe"}
        probe = {"type": "result", "commandId": str(uuid.uuid4()), "outcome": "failed"}
        await device.send_session_frame(sid, {**probe, "error": error})
        assert await _closed_with(old) == CLOSE_SUPERSEDED
        assert not [f for f in lease.session_frames if isinstance(f, m.SessionServerError)]
