"""Kill one of three nodes with SIGKILL right after each persisted step of the write sequence; the
other two carry the write to its end.

The one-node crash-point scenario (`tests/backend/faults/test_backend_crash_points.py`) on a
three-node deployment: node 0 runs with `UNDERSTUDY_CRASH_AFTER=<step>` and holds everything of
the write (the device socket, the session socket, the caller's HTTP connection), so the step is
committed there and the node dies right after it. Nothing restarts it: the device reconnects
through the balancer to node 1 or 2 with the same browser epoch (its write journal kept) or after
a browser restart (a new epoch), and the caller, after its network error, keeps to the
connector's rules through the balancer. Every run: the write ran at most once, the caller's last
answer is durable or an explicit unknown and the same on every node, the device and its session
came back within the recovery grace, and the plaintext is nowhere in the nodes' output.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import TYPE_CHECKING

import pytest

from tests.backend.faults._caller import Answer, check_final, drive
from tests.backend.faults._harness import PLAINTEXT, leaks, open_session, write
from tests.backend.faults.test_backend_crash_points import EXPECTED, JOURNAL_AT_CRASH
from tests.backend.multinode_faults._deployment import SETTLE_S, three_nodes
from tests.backend.multinode_faults.conftest import FIGURES
from understudy.generated import models as m
from understudy.generated.protocol import RECOVERY_GRACE_MS

if TYPE_CHECKING:
    from pathlib import Path

    from tests.backend.multinode_faults._deployment import Template
    from tests.support.pgcluster import PgCluster

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("epoch", ["same", "new"])
@pytest.mark.parametrize("step", ["preparing", "granted", "result"])
async def test_a_node_killed_after_a_write_step_leaves_the_write_run_at_most_once(
    multinode_template: Template, pg_cluster: PgCluster, tmp_path: Path, step: str, epoch: str
) -> None:
    caller: asyncio.Task[Answer] | None = None
    async with (
        three_nodes(multinode_template, pg_cluster, tmp_path, crash_after={0: step}) as nodes,
        nodes.roaming("sim-1", device_node=0, session_node=0) as device,
    ):
        doomed = nodes.address(0)
        device.roam = epoch == "same"  # a new epoch comes back by restarting the browser
        try:
            async with nodes.client(0) as direct, nodes.client() as balanced:
                await device.connect()
                session_id, lease = await open_session(direct, device, within=SETTLE_S)
                assert device.where(session_id) == doomed
                body = write("fill_secret")
                command_id = body["commandId"]
                caller = asyncio.create_task(
                    drive(direct, session_id, body, budget_s=60, fallbacks=[balanced])
                )

                assert await nodes[0].exited() == -signal.SIGKILL, nodes.logs()
                killed_at = time.monotonic()
                if epoch == "new":
                    await device.restart_browser()  # through the balancer, to a live node
                final = await caller
                settled_s = time.monotonic() - killed_at
                durable = [
                    await nodes.session_answer(i, session_id, f"commands/{command_id}")
                    for i in (1, 2)
                ]
                if epoch == "same":
                    # Whatever the device still held is settled: replayed and acked, or cancelled.
                    await device.wait_for(lambda: command_id not in lease.journal, within=30)
                    await device.wait_for(lambda: device.recovery_s(session_id), within=30)
        finally:
            if caller is not None:
                caller.cancel()  # only still running when the test failed half-way
        logs = [node.log_path for node in nodes]
        telemetry = [node.telemetry_path for node in nodes]

    FIGURES.run("node-sigkill", f"{step}/{epoch}-epoch", [final], device.executions)
    check_final(final, device.executions, allow_blocked=epoch == "new")
    assert (final.label, device.executions.get(command_id, 0)) == EXPECTED[step, epoch], final.trail
    assert device.journal_at_loss[session_id].get(command_id) == JOURNAL_AT_CRASH[step]
    assert doomed not in {node for _, node in device.placements[2:]}, device.placements
    assert device.secrets_seen == [PLAINTEXT] * device.executions.get(command_id, 0)
    if final.status in (200, 409) and final.code != "writes_blocked":
        for status, answer in durable:
            assert (status, answer) == (final.status, final.body)
    if epoch == "same":
        for what in ("device", session_id):
            took = device.recovery_s(what)
            assert took is not None and took < RECOVERY_GRACE_MS / 1000, (what, took)
            FIGURES.took(f"{what if what == 'device' else 'session'} socket back", took)
        if step == "result":
            replayed = [f for f in lease.session_frames if isinstance(f, m.SessionServerResultAck)]
            assert [str(f.command_id) for f in replayed] == [command_id]
    FIGURES.took("caller settled after the kill", settled_s)
    assert leaks(PLAINTEXT, [*logs, *telemetry]) == []


@pytest.mark.parametrize("step", ["preparing", "granted", "result"])
async def test_the_node_that_commits_a_write_step_across_nodes_is_killed_and_the_write_runs_once(
    multinode_template: Template, pg_cluster: PgCluster, tmp_path: Path, step: str
) -> None:
    """The write crosses nodes: admitted on node 0, its frames through the sockets on node 1,
    both started with the crash point. Whichever commits the step dies (the other has nothing
    more of this write to commit); the caller and the device go on with node 2."""
    caller: asyncio.Task[Answer] | None = None
    async with (
        three_nodes(
            multinode_template, pg_cluster, tmp_path, crash_after={0: step, 1: step}
        ) as nodes,
        nodes.roaming("sim-4", device_node=1, session_node=1, fallback_node=2) as device,
    ):
        try:
            async with nodes.client(0) as direct, nodes.client(2) as clean:
                await device.connect()
                session_id, lease = await open_session(direct, device, within=SETTLE_S)
                body = write("fill_secret")
                command_id = body["commandId"]
                caller = asyncio.create_task(
                    drive(direct, session_id, body, budget_s=60, fallbacks=[clean])
                )
                exits = {asyncio.create_task(nodes[i].exited(within=30)): i for i in (0, 1)}
                done, pending = await asyncio.wait(exits, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
                [first] = done
                died = exits[first]
                assert first.result() == -signal.SIGKILL, nodes.logs()
                killed_at = time.monotonic()
                final = await caller
                settled_s = time.monotonic() - killed_at
                await device.wait_for(lambda: command_id not in lease.journal, within=30)
                durable = await nodes.session_answer(2, session_id, f"commands/{command_id}")
        finally:
            if caller is not None:
                caller.cancel()

    FIGURES.run(
        "node-sigkill-across-nodes",
        f"{step}/{'admitting' if died == 0 else 'socket'}-node",
        [final],
        device.executions,
    )
    FIGURES.took("caller settled after the kill", settled_s)
    check_final(final, device.executions)
    assert (final.label, device.executions.get(command_id, 0)) == EXPECTED[step, "same"]
    assert durable == (final.status, final.body)
    assert device.secrets_seen == [PLAINTEXT] * device.executions.get(command_id, 0)
    if died == 1:  # the sockets' node: they came back on node 2 within the grace
        for what in ("device", session_id):
            took = device.recovery_s(what)
            assert took is not None and took < RECOVERY_GRACE_MS / 1000, (what, took)
            assert device.where(what) == nodes.address(2), device.placements
