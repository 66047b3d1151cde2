"""A node whose own heartbeat is late (a pause, a loaded machine) is still alive: it never takes
its own sockets for a gone node's; and when the other nodes did take it for gone and took its
sockets over, it closes those sockets as soon as it runs again, so the device reconnects."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tests.backend.faults._harness import open_session, write
from understudy._connection import CLOSE_SUPERSEDED

if TYPE_CHECKING:
    from tests.backend.multinode.conftest import Nodes


async def test_a_node_late_with_its_own_heartbeat_does_not_reap_its_own_sockets(
    nodes: Nodes,
) -> None:
    a = await nodes.start("a")
    device = await a.device()
    async with a.client(a.api_key()) as http:
        sid, _ = await open_session(http, device)

        await nodes.pause(a)
        node = a.services.node
        assert node is not None
        await node.reap()

        assert a.session_status(sid) == "connected"
        assert node.sockets_taken_over == 0
        with a.services.storage.read() as repos:
            row = repos.actors.get(a.services.session_agent(sid).key)
        assert row is not None and row.sock_node == "a" and row.said_hello
        command = write("click")
        response = await http.post(f"/v1/sessions/{sid}/commands", json=command)
        assert response.status_code == 200, response.text
    assert device.executions == {command["commandId"]: 1}


async def test_a_node_whose_sockets_were_taken_over_while_paused_closes_them_on_resuming(
    nodes: Nodes,
) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    device = await a.device()
    async with b.client(b.api_key()) as http:
        sid, lease = await open_session(http, device)
        url = f"/v1/sessions/{sid}/commands"
        first = write("click")
        assert (await http.post(url, json=first)).status_code == 200

        # Node a is paused past the dead-node timeout: node b takes its sockets over.
        await nodes.pause(a)
        assert b.services.node is not None
        await b.services.node.reap()
        assert b.services.node.sockets_taken_over == 2  # the device's socket and the session's
        assert b.session_status(sid) == "recovering"
        session_socket, reader = lease.session_socket, device._reader
        assert session_socket is not None and reader is not None and not reader.done()

        # Node a runs again: its next heartbeat finds the previous one late, and it closes the
        # sockets the rows no longer name, rather than keeping them open and dead.
        a.services.claim.start()
        await asyncio.wait_for(reader, 10)
        assert device._socket.close_code == CLOSE_SUPERSEDED
        await asyncio.wait_for(session_socket.wait_closed(), 10)
        assert session_socket.close_code == CLOSE_SUPERSEDED
        assert a.services.node is not None and a.services.node.sockets_closed_taken == 2

        # The device reconnects with a fresh ticket; its session socket follows and recovers.
        await device.connect()
        await b.until(lambda: b.session_status(sid) == "connected", "the session recovers", 10)
        agent = b.services.session_agent(sid)
        assert await asyncio.wait_for(agent.wait_available(nodes.clock.now() + 60), 10)
        second = write("click")
        response = await http.post(url, json=second)
        assert response.status_code == 200, response.text
        again = await http.post(url, json=first)  # a replay of its durable outcome
        assert again.status_code == 200, again.text
    assert device.executions == {first["commandId"]: 1, second["commandId"]: 1}
