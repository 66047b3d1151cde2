"""A node that is gone: its timers are taken by another node, its sockets treated as lost, and
the devices that reconnect elsewhere carry on with nothing run twice."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import psycopg

from tests.backend.conftest import idem, unattended
from tests.support.simdevice import Behaviour, SimulatedDevice

if TYPE_CHECKING:
    from tests.backend.conftest import Backend
    from tests.backend.multinode.conftest import Nodes


async def _device_on(
    node: Backend, enrolled_by: Backend, behaviour: Behaviour | None = None
) -> SimulatedDevice:
    device = SimulatedDevice(node.url, enrolled_by.enroll(), behaviour)
    node.devices.append(device)
    await device.connect()
    return device


async def _vanish(node: Backend, url: str) -> None:
    """What a SIGKILL leaves for the others: no heartbeat, no delivery, an old heartbeat row;
    its sockets stay open (the process is not there to close them)."""
    await node.services.claim.stop()
    assert node.services.node is not None
    await node.services.node.stop()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            "UPDATE nodes SET heartbeat_at = heartbeat_at - 60 WHERE node_id = %s",
            (node.services.node.node_id,),
        )


async def test_a_deadline_armed_on_a_node_that_is_gone_fires_on_another(nodes: Nodes) -> None:
    a = await nodes.start("a")
    c = await nodes.start("c")
    device = await _device_on(c, a, Behaviour(provision="silent"))
    async with a.client(a.api_key()) as http:
        create = asyncio.ensure_future(http.post("/v1/sessions", json=unattended(), headers=idem()))
        await a.until(lambda: device.frames, "the device hears the provision")
        await c.until(lambda: len(device.frames) > 1, "the provision reaches node c")
        await nodes.clock.advance(5)
        created = await create
    assert created.status_code == 202, created.text
    sid = created.json()["sessionId"]
    await nodes.stop("a")  # the node whose turn armed the provisioning deadline
    await nodes.clock.advance(31)
    await c.until(lambda: c.session_status(sid) == "lost", "node c fires the deadline", 10)
    assert c.services.node is not None and c.services.node.timers_taken >= 1


async def test_the_sockets_of_a_vanished_node_are_lost_and_reconnect_to_another(
    nodes: Nodes, postgresql_url: str
) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    c = await nodes.start("c")
    device = await _device_on(b, a)
    async with a.client(a.api_key()) as http:
        created = await http.post("/v1/sessions", json=unattended(), headers=idem())
        assert created.status_code == 201, created.text
        sid = created.json()["sessionId"]
        lease = next(iter(device.leases.values()))
        await device.wait_for(lambda: lease.session_frames)
        first = {"commandId": str(uuid.uuid4()), "command": {"name": "click", "ref": "g1e1"}}
        assert (await http.post(f"/v1/sessions/{sid}/commands", json=first)).status_code == 200

        await _vanish(b, postgresql_url)
        # Another node takes b's sockets over: the device is offline, its session recovering.
        await a.until(lambda: a.session_status(sid) == "recovering", "b's sockets are lost", 15)
        unavailable = await http.post(
            f"/v1/sessions/{sid}/commands",
            json={"commandId": str(uuid.uuid4()), "command": {"name": "click", "ref": "g1e1"}},
        )
        assert unavailable.status_code == 503, unavailable.text

        # The device comes back through node c with a fresh ticket; its session socket follows.
        device.base_url = c.url
        await device.connect()
        await a.until(lambda: a.session_status(sid) == "connected", "the session recovers", 10)
        agent = a.services.session_agent(sid)  # its socket's hello, on node c, seen from node a
        assert await asyncio.wait_for(agent.wait_available(nodes.clock.now() + 60), 10)
        second = {"commandId": str(uuid.uuid4()), "command": {"name": "click", "ref": "g1e1"}}
        response = await http.post(f"/v1/sessions/{sid}/commands", json=second)
        assert response.status_code == 200, response.text
        # The first write's replay is its durable outcome; nothing ran twice across the move.
        again = await http.post(f"/v1/sessions/{sid}/commands", json=first)
        assert again.status_code == 200
    assert device.executions == {first["commandId"]: 1, second["commandId"]: 1}
    with a.services.storage.read() as repos:
        row = repos.actors.get(a.services.session_agent(sid).key)
    assert row is not None and row.sock_node == "c"


async def test_at_most_once_holds_when_the_session_socket_moves_to_another_node(
    nodes: Nodes, postgresql_url: str
) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    c = await nodes.start("c")
    device = await _device_on(b, a, Behaviour(execute="hold_result"))
    async with a.client(a.api_key()) as http:
        created = await http.post("/v1/sessions", json=unattended(), headers=idem())
        assert created.status_code == 201, created.text
        sid = created.json()["sessionId"]
        lease = next(iter(device.leases.values()))
        await device.wait_for(lambda: lease.session_frames)
        url = f"/v1/sessions/{sid}/commands"

        # Completed on the device, its result not yet sent, when node b vanishes: the device
        # reconnects through node c and its hello replays the result to the caller on node a.
        done: dict[str, Any] = {
            "commandId": str(uuid.uuid4()),
            "command": {"name": "click", "ref": "g1e1"},
        }
        task = asyncio.ensure_future(http.post(url, json=done))
        await device.wait_for(lambda: device.executions.get(done["commandId"]))
        await _vanish(b, postgresql_url)
        device.behaviour.execute = "complete"
        device.base_url = c.url
        await device.connect()
        response = await task
        assert response.status_code == 200, response.text
        assert device.executions == {done["commandId"]: 1}

        # Started, its result lost, when node c vanishes: unknown, never run again.
        agent = a.services.session_agent(sid)
        assert await asyncio.wait_for(agent.wait_available(nodes.clock.now() + 60), 10)
        device.behaviour.execute = "crash_after_start"
        crashed: dict[str, Any] = {
            "commandId": str(uuid.uuid4()),
            "command": {"name": "click", "ref": "g1e1"},
        }
        task = asyncio.ensure_future(http.post(url, json=crashed))
        await device.wait_for(lambda: device.executions.get(crashed["commandId"]))
        await _vanish(c, postgresql_url)
        device.base_url = a.url
        await device.connect()
        answer = await task
        assert (answer.status_code, answer.json()["code"]) == (409, "command_outcome_unknown")
    assert device.executions == {done["commandId"]: 1, crashed["commandId"]: 1}
