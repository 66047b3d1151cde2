"""The runbook's three-node nginx block skips nodes that refuse connections, for HTTP, a command
POST and the sockets alike.

One live node on PostgreSQL and two upstream ports nobody listens on (two nodes already dead):
every request through the balancer reaches the live node, whatever the round robin picked
first, and a session is created, takes a write and keeps its sockets through it. This holds for
any build (one node serves alone); the scenarios of the other modules kill nodes under load.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.backend.faults._caller import check_final, drive
from tests.backend.faults._harness import open_session, write
from tests.backend.faults._process import ServerProcess, copy_data_dir, free_port
from tests.backend.multinode_faults._deployment import NGINX_LABEL
from tests.support import nginx
from tests.support.simdevice import SimulatedDevice

if TYPE_CHECKING:
    from pathlib import Path

    from tests.backend.multinode_faults._deployment import Template
    from tests.support.pgcluster import PgCluster

pytestmark = pytest.mark.slow


async def test_the_three_node_block_passes_everything_to_the_one_live_node(
    multinode_template: Template, pg_cluster: PgCluster, tmp_path: Path
) -> None:
    database = f"balancer_{free_port()}"
    url = await asyncio.to_thread(pg_cluster.create_database, database, multinode_template.database)
    port = free_port()
    node = ServerProcess(
        copy_data_dir(multinode_template.data_dir, tmp_path / "data"),
        tmp_path,
        name="node-0",
        env={"UNDERSTUDY_DATABASE_URL": url, "UNDERSTUDY_PUBLIC_URL": f"http://127.0.0.1:{port}"},
    )
    dead = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    block = nginx.pointed_at(
        nginx.runbook_nginx_block(NGINX_LABEL), [dead[0], f"127.0.0.1:{node.port}", dead[1]], port
    )
    credentials = multinode_template.credentials
    device = SimulatedDevice(f"http://127.0.0.1:{port}", credentials.devices["sim-3"])
    try:
        await node.start(await node.spawn())
        with nginx.Nginx.start(block, tmp_path / "nginx", port) as balancer:
            async with httpx.AsyncClient(
                base_url=balancer.url,
                headers={"Authorization": f"Bearer {credentials.api_key}"},
                timeout=30,
            ) as http:
                probes = [(await http.get("/readyz")).status_code for _ in range(6)]
                await device.connect()  # ticket and device socket through the balancer
                session_id, _ = await open_session(http, device)
                finals = [await drive(http, session_id, write("click")) for _ in range(3)]
            errors = balancer.errors()
    finally:
        await device.stop()
        await node.stop()
        await asyncio.to_thread(pg_cluster.drop_database, database)

    assert probes == [200] * 6
    for final in finals:
        check_final(final, device.executions)
        assert final.label == "200 succeeded", final.trail
        assert final.trail == ["POST 200"], final.trail  # no retry: nginx moved on by itself
    assert "Connection refused" in errors  # the dead upstreams were tried, and skipped
