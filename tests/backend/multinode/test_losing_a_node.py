"""A node that is gone: its timers are taken by another node, its sockets treated as lost, and
the devices that reconnect elsewhere carry on with nothing run twice."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tests.backend.conftest import idem, unattended
from tests.backend.faults._harness import open_session, write
from tests.support.simdevice import Behaviour

if TYPE_CHECKING:
    from tests.backend.multinode.conftest import Nodes


async def test_a_deadline_armed_on_a_node_that_is_gone_fires_on_another(nodes: Nodes) -> None:
    a = await nodes.start("a")
    c = await nodes.start("c")
    device = await c.device(behaviour=Behaviour(provision="silent"))
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
    nodes: Nodes,
) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    c = await nodes.start("c")
    device = await b.device()
    async with a.client(a.api_key()) as http:
        sid, _ = await open_session(http, device)
        first = write("click")
        assert (await http.post(f"/v1/sessions/{sid}/commands", json=first)).status_code == 200

        await nodes.vanish(b)
        # Another node takes b's sockets over: the device is offline, its session recovering.
        await a.until(lambda: a.session_status(sid) == "recovering", "b's sockets are lost", 15)
        unavailable = await http.post(f"/v1/sessions/{sid}/commands", json=write("click"))
        assert unavailable.status_code == 503, unavailable.text

        # The device comes back through node c with a fresh ticket; its session socket follows.
        device.base_url = c.url
        await device.connect()
        await a.until(lambda: a.session_status(sid) == "connected", "the session recovers", 10)
        agent = a.services.session_agent(sid)  # its socket's hello, on node c, seen from node a
        assert await asyncio.wait_for(agent.wait_available(nodes.clock.now() + 60), 10)
        second = write("click")
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
    nodes: Nodes,
) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    c = await nodes.start("c")
    device = await b.device(behaviour=Behaviour(execute="hold_result"))
    async with a.client(a.api_key()) as http:
        sid, _ = await open_session(http, device)
        url = f"/v1/sessions/{sid}/commands"

        # Completed on the device, its result not yet sent, when node b vanishes: the device
        # reconnects through node c and its hello replays the result to the caller on node a.
        done = write("click")
        task = asyncio.ensure_future(http.post(url, json=done))
        await device.wait_for(lambda: device.executions.get(done["commandId"]))
        await nodes.vanish(b)
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
        crashed = write("click")
        task = asyncio.ensure_future(http.post(url, json=crashed))
        await device.wait_for(lambda: device.executions.get(crashed["commandId"]))
        await nodes.vanish(c)
        device.base_url = a.url
        await device.connect()
        answer = await task
        assert (answer.status_code, answer.json()["code"]) == (409, "command_outcome_unknown")
    assert device.executions == {done["commandId"]: 1, crashed["commandId"]: 1}
