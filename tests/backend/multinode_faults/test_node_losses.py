"""Lose the node under one part of a write in flight: the device socket's, the session socket's,
or the one the caller is waiting on.

Every run places the three parts on three different nodes (device socket on node 0, session
socket on node 1, the caller's HTTP connection on node 2), so the write itself crosses nodes: the
session is created and the command admitted on node 2, the frames leave from node 1. The device
executes the write and holds its result back (journaled `completed_unacked`, as when a socket
drops before the result leaves); then one node is killed with SIGKILL, and the result is let go.
Every run: exactly one execution, the caller (after a network error: through the balancer)
gets `200 succeeded` and every live node answers the same durable outcome, the lost socket came
back on another node within the recovery grace with a fresh ticket, and the session stays
`connected` and takes the next write.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import pytest

from tests.backend.faults._caller import Answer, check_final, drive
from tests.backend.faults._harness import open_session, read, write
from tests.backend.multinode_faults._deployment import SETTLE_S, three_nodes
from tests.backend.multinode_faults.conftest import FIGURES
from understudy.generated import models as m
from understudy.generated.protocol import RECOVERY_GRACE_MS

if TYPE_CHECKING:
    from pathlib import Path

    from tests.backend.multinode_faults._deployment import Template
    from tests.support.pgcluster import PgCluster
    from tests.support.simdevice import Lease

pytestmark = pytest.mark.slow

DEVICE_NODE, SESSION_NODE, CALLER_NODE = 0, 1, 2
# The node killed -> the socket that must come back ("device", "session" or none).
LOSSES = {
    "device-socket-node": (DEVICE_NODE, "device"),
    "session-socket-node": (SESSION_NODE, "session"),
    "admitting-node": (CALLER_NODE, None),
}


@pytest.mark.parametrize("loss", sorted(LOSSES))
async def test_losing_one_node_of_a_write_in_flight_runs_it_once_and_tells_the_caller(
    multinode_template: Template, pg_cluster: PgCluster, tmp_path: Path, loss: str
) -> None:
    killed, comes_back = LOSSES[loss]
    caller: asyncio.Task[Answer] | None = None
    async with (
        three_nodes(multinode_template, pg_cluster, tmp_path) as nodes,
        nodes.roaming("sim-2", device_node=DEVICE_NODE, session_node=SESSION_NODE) as device,
    ):
        try:
            async with nodes.client(CALLER_NODE) as direct, nodes.client() as balanced:
                await device.connect()
                session_id, lease = await open_session(direct, device, within=SETTLE_S)
                assert device.where("device") == nodes.address(DEVICE_NODE)
                assert device.where(session_id) == nodes.address(SESSION_NODE)
                device.behaviour.execute = "hold_result"
                body = write("type")
                command_id = body["commandId"]
                caller = asyncio.create_task(
                    drive(direct, session_id, body, budget_s=60, fallbacks=[balanced])
                )
                await device.wait_for(
                    lambda: lease.journal.get(command_id) == "completed_unacked", within=15
                )
                assert not caller.done(), caller  # the caller is still waiting on node 2

                await nodes.kill(killed)
                killed_at = time.monotonic()
                device.behaviour.execute = "complete"
                if comes_back == "session":
                    # The result goes out in the new socket's hello journal (replayed).
                    await device.wait_for(lambda: device.recovery_s(session_id), within=60)
                else:
                    if comes_back == "device":
                        await device.wait_for(lambda: device.recovery_s("device"), within=60)
                    await _release(lease, command_id)  # on the session socket, still up
                final = await caller
                settled_s = time.monotonic() - killed_at
                await device.wait_for(lambda: command_id not in lease.journal, within=15)
                live = [i for i in range(len(nodes.nodes)) if i != killed]
                durable = [
                    await nodes.session_answer(i, session_id, f"commands/{command_id}")
                    for i in live
                ]
                state = await nodes.session_answer(None, session_id)
                following = await drive(balanced, session_id, write("click"), budget_s=30)
        finally:
            if caller is not None:
                caller.cancel()  # only still running when the test failed half-way

    FIGURES.run("node-loss", loss, [final, following], device.executions)
    FIGURES.took("caller settled after the kill", settled_s)
    check_final(final, device.executions)
    check_final(following, device.executions)
    assert final.label == "200 succeeded", final.trail
    assert device.executions == {command_id: 1, following.command_id: 1}
    for status, answer in durable:
        assert (status, answer) == (200, final.body)
    assert state[0] == 200 and state[1]["status"] == "connected", state
    if loss == "admitting-node":
        # Its first POST was cut by the kill; the rest went through the balancer.
        assert not final.trail[0].split()[1].isdigit(), final.trail
    if comes_back is not None:
        what = "device" if comes_back == "device" else session_id
        took = device.recovery_s(what)
        assert took is not None and took < RECOVERY_GRACE_MS / 1000, (what, took)
        FIGURES.took(f"{comes_back} socket back", took)
        dead = nodes.address(killed)
        assert device.where(what) != dead, device.placements
    if comes_back == "session":
        replayed = [f for f in lease.session_frames if isinstance(f, m.SessionServerResultAck)]
        assert str(command_id) in {str(f.command_id) for f in replayed}


async def _release(lease: Lease, command_id: str) -> None:
    """Send the result the device held back, on the session socket it has now."""
    await lease.session_socket.send(lease.journal_results[command_id].to_wire_json())


async def test_a_granted_write_whose_node_died_turns_unknown_at_its_deadline_on_another_node(
    multinode_template: Template, pg_cluster: PgCluster, tmp_path: Path
) -> None:
    """The grant's deadline is a timer of the session's row. The node that granted (the session
    socket's, node 1) dies with the write started and no result; the tab does not come back in
    time. Another node takes the due timer over and decides `command_outcome_unknown` at the
    deadline (25 s), the caller on node 0 hears it, and once the tab reconnects its journal entry
    is answered as unknown (never run again) and the session answers reads; its writes stay
    blocked (`unknown_outcome`), as on one node."""
    caller: asyncio.Task[Answer] | None = None
    async with (
        three_nodes(multinode_template, pg_cluster, tmp_path) as nodes,
        nodes.roaming("sim-3", device_node=2, session_node=1) as device,
    ):
        try:
            async with nodes.client(0) as http:
                await device.connect()
                session_id, lease = await open_session(http, device, within=SETTLE_S)
                device.behaviour.execute = "crash_after_start"  # ran; its result never leaves
                body = write("type")
                command_id = body["commandId"]
                caller = asyncio.create_task(drive(http, session_id, body, budget_s=60))
                await device.wait_for(
                    lambda: lease.journal.get(command_id) == "started", within=SETTLE_S
                )
                granted_at = time.monotonic()
                device.roam = False  # the tab stays away past the deadline
                device.behaviour.open_session_sockets = False
                await nodes.kill(1)
                final = await caller
                settled_s = time.monotonic() - granted_at

                device.behaviour = type(device.behaviour)()  # the tab is back, healthy
                device.roam = True
                acks = sum(isinstance(f, m.SessionServerHelloAck) for f in lease.session_frames)
                await device.request_ticket(lease)
                await device.wait_for(
                    lambda: (
                        sum(isinstance(f, m.SessionServerHelloAck) for f in lease.session_frames)
                        > acks
                    ),
                    within=30,
                )
                following = await drive(http, session_id, read("snapshot"), budget_s=30)
                durable = await nodes.session_answer(2, session_id, f"commands/{command_id}")
                state = await nodes.session_answer(2, session_id)
        finally:
            if caller is not None:
                caller.cancel()

    FIGURES.run(
        "node-loss", "granting-node/deadline-taken-over", [final, following], device.executions
    )
    FIGURES.took("unknown decided after the grant (deadline 25 s)", settled_s)
    check_final(final, device.executions)
    check_final(following, device.executions, write=False)
    assert final.label == "409 command_outcome_unknown", final.trail
    assert settled_s >= 20, settled_s  # decided by the deadline, not by the socket's loss
    assert device.executions == {command_id: 1}
    assert command_id not in lease.journal  # the new socket's hello was told it is unknown
    assert durable == (409, final.body)
    assert following.label == "200 succeeded", following.trail
    assert (state[1]["status"], state[1]["writesBlocked"]) == ("connected", True), state
