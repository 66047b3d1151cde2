"""A socket that another node superseded is closed, and a turn acting for it is refused."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tests.support.simdevice import SimulatedDevice
from understudy._connection import CLOSE_SUPERSEDED
from understudy.generated import models as m

if TYPE_CHECKING:
    from tests.backend.conftest import Backend
    from tests.backend.multinode.conftest import Nodes


async def _closed_with(socket: Any, within: float = 5.0) -> int | None:
    await asyncio.wait_for(socket.wait_closed(), within)
    code: int | None = socket.close_code
    return code


async def _device_on(node: Backend, enrolled_by: Backend) -> SimulatedDevice:
    device = SimulatedDevice(node.url, enrolled_by.enroll())
    node.devices.append(device)
    await device.connect()
    return device


async def test_a_device_reconnecting_to_another_node_closes_its_old_socket(nodes: Nodes) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    device = await _device_on(a, a)
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
    node_a = a.services.node
    assert node_a is not None

    async def no_delivery() -> None:  # node a never hears of the new socket
        return None

    node_a.drain = no_delivery  # type: ignore[method-assign]
    node_a._notified = lambda payload: None  # type: ignore[method-assign]
    device = await _device_on(a, a)
    old = device._socket
    acks = len(device.frames_of(m.DeviceServerHeartbeatAck))
    device.base_url = b.url
    await device.connect()
    heartbeat = m.DeviceClientHeartbeat(type="heartbeat", seq=99, free_capacity=2)
    await old.send(heartbeat.to_wire_json())  # the old socket on node a acts once more
    assert await _closed_with(old) == CLOSE_SUPERSEDED
    assert len(device.frames_of(m.DeviceServerHeartbeatAck)) == acks  # its turn was refused
