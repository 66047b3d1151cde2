"""A node whose own heartbeat is late (a pause, a loaded machine) is still alive: it never takes
its own sockets for a gone node's."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import psycopg

from tests.backend.conftest import idem, unattended
from tests.support.simdevice import SimulatedDevice

if TYPE_CHECKING:
    from tests.backend.multinode.conftest import Nodes


async def test_a_node_late_with_its_own_heartbeat_does_not_reap_its_own_sockets(
    nodes: Nodes, postgresql_url: str
) -> None:
    a = await nodes.start("a")
    device = SimulatedDevice(a.url, a.enroll())
    a.devices.append(device)
    await device.connect()
    async with a.client(a.api_key()) as http:
        created = await http.post("/v1/sessions", json=unattended(), headers=idem())
        assert created.status_code == 201, created.text
        sid = created.json()["sessionId"]
        lease = next(iter(device.leases.values()))
        await device.wait_for(lambda: lease.session_frames)

        # Its heartbeat stops and its row looks 60 s old, as after a long pause of the process.
        await a.services.claim.stop()
        with psycopg.connect(postgresql_url, autocommit=True) as admin:
            admin.execute("UPDATE nodes SET heartbeat_at = heartbeat_at - 60 WHERE node_id = 'a'")
        node = a.services.node
        assert node is not None
        await node.reap()

        assert a.session_status(sid) == "connected"
        assert node.sockets_taken_over == 0
        with a.services.storage.read() as repos:
            row = repos.actors.get(a.services.session_agent(sid).key)
        assert row is not None and row.sock_node == "a" and row.said_hello
        command = {"commandId": str(uuid.uuid4()), "command": {"name": "click", "ref": "g1e1"}}
        response = await http.post(f"/v1/sessions/{sid}/commands", json=command)
        assert response.status_code == 200, response.text
    assert device.executions == {command["commandId"]: 1}
