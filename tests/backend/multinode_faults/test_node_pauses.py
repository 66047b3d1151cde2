"""A node that stops answering for longer than the dead-node timeout, then comes back.

A process paused (a long GC, a stopped VM, a starved event loop) misses its heartbeats: after
`NODE_DEAD_AFTER_S` the other nodes take its sockets over. When it resumes, its sockets are no
longer authoritative and it closes them at once, so the extension reconnects through the balancer
with a fresh ticket and the session takes writes again within seconds, nothing run twice. The
device sends nothing meanwhile: were the resumed node to leave its lost sockets open, only the
extension's next frame on one (its heartbeat, up to 22 s later) would reveal them.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import TYPE_CHECKING

import pytest

from tests.backend.faults._caller import check_final, drive
from tests.backend.faults._harness import open_session, write
from tests.backend.multinode_faults._deployment import SETTLE_S, three_nodes
from tests.backend.multinode_faults.conftest import FIGURES
from understudy._store._postgres import NODE_DEAD_AFTER_S
from understudy.generated.protocol import HEARTBEAT_INTERVAL_MS

# Well below the heartbeat interval: the node closed its lost sockets, the device did not reveal
# them by sending a frame.
SOCKETS_CLOSED_WITHIN_S = HEARTBEAT_INTERVAL_MS / 1000 / 2

if TYPE_CHECKING:
    from pathlib import Path

    from tests.backend.multinode_faults._deployment import Template
    from tests.support.pgcluster import PgCluster

pytestmark = pytest.mark.slow


async def test_a_paused_node_past_the_dead_node_timeout_leaves_its_sessions_usable(
    multinode_template: Template, pg_cluster: PgCluster, tmp_path: Path
) -> None:
    async with (
        three_nodes(multinode_template, pg_cluster, tmp_path) as nodes,
        nodes.roaming("sim-1", device_node=0, session_node=0) as device,
    ):
        paused = nodes.address(0)
        async with nodes.client(0) as direct, nodes.client() as balanced:
            await device.connect()
            session_id, _ = await open_session(direct, device, within=SETTLE_S)
            before = await drive(balanced, session_id, write("click"))
            nodes[0].send_signal(signal.SIGSTOP)
            try:
                await asyncio.sleep(NODE_DEAD_AFTER_S + 2)
            finally:
                nodes[0].send_signal(signal.SIGCONT)
            resumed_at = time.monotonic()
            after = await drive(balanced, session_id, write("click"), budget_s=60)
            usable_s = time.monotonic() - resumed_at

    FIGURES.run("node-pause", f"{NODE_DEAD_AFTER_S + 2:.0f}s", [before, after], device.executions)
    check_final(before, device.executions)
    check_final(after, device.executions)
    assert before.label == "200 succeeded", before.trail
    assert after.label == "200 succeeded", after.trail
    FIGURES.took("session usable after a pause", usable_s)
    assert usable_s < SOCKETS_CLOSED_WITHIN_S, usable_s
    assert device.where("device") != paused, device.placements  # it reconnected, elsewhere
