"""The runbook's nginx configuration passes HTTP and a device socket to a node on PostgreSQL.

The `nginx` block of `docs/operations.md` ("Deployment behind a load balancer") is used as written,
with its `upstream` server and `listen` lines pointed at this test's node and port, so the
documented configuration cannot drift from one that works. Skipped without Debian's nginx
(`apt-get install nginx-light`).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.backend.conftest import free_port
from tests.support import nginx as balancer
from tests.support.simdevice import SimulatedDevice
from understudy._store._migrations import LATEST
from understudy.generated import models as m

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from tests.support.pgcluster import PgCluster

pytestmark = pytest.mark.slow

START_S = 60.0
_CREDENTIAL = re.compile(r"(udc_\S+)")


def _env(data_dir: Path, port: int, url: str, public_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNDERSTUDY_")}
    return env | {
        "UNDERSTUDY_DATA_DIR": str(data_dir),
        "UNDERSTUDY_PORT": str(port),
        "UNDERSTUDY_DATABASE_URL": url,
        "UNDERSTUDY_PUBLIC_URL": public_url,
    }


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """nginx on a free port in front of a node on another free port: (nginx port, node port)."""
    port, node_port = free_port(), free_port()
    block = balancer.pointed_at(balancer.runbook_nginx_block(), [f"127.0.0.1:{node_port}"], port)
    with balancer.Nginx.start(block, tmp_path / "nginx", port):
        yield port, node_port


@pytest.fixture
async def node(
    nginx: tuple[int, int], pg_cluster: PgCluster, tmp_path: Path
) -> AsyncIterator[tuple[str, str]]:
    """`understudy serve` on a fresh PostgreSQL database behind nginx: (URL via nginx, device
    credential)."""
    port, node_port = nginx
    url = pg_cluster.create_schema(f"nginx_{os.getpid()}_{port}")
    public = f"http://127.0.0.1:{port}"
    env = _env(tmp_path / "data", node_port, url, public)
    migrated = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "understudy.cli", "migrate"),
        env=env,
        stdout=subprocess.DEVNULL,
    )
    assert await migrated.wait() == 0
    enroll = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "understudy.cli", "devices", "enroll", "--tenant", "acme", "--device", "d1"),
        env=env,
        stdout=subprocess.PIPE,
    )
    out, _ = await enroll.communicate()
    found = _CREDENTIAL.search(out.decode())
    assert enroll.returncode == 0 and found is not None, out
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "understudy.cli", "serve"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + START_S
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{node_port}", timeout=5) as http:
            while True:
                assert process.returncode is None, "the node exited at start-up"
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the node was not ready in time"
                await asyncio.sleep(0.1)
        yield public, found.group(1)
    finally:
        if process.returncode is None:
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


async def test_http_and_a_device_socket_pass_through_the_runbooks_nginx(
    node: tuple[str, str],
) -> None:
    public, credential = node
    async with httpx.AsyncClient(base_url=public, timeout=10) as http:
        ready = await http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok", "schemaVersion": LATEST, "node": ready.json()["node"]}

    device = SimulatedDevice(public, credential)
    try:
        ticket = await device.ticket()  # POST /v1/device/connect-ticket through nginx
        assert ticket.socket_url.startswith(f"ws://{public.removeprefix('http://')}/")
        welcome = await device.connect(ticket)  # the upgrade, hello and welcome through nginx
        assert welcome.type == "welcome"
        await device.heartbeat()  # frames keep flowing both ways after the upgrade
        await device.wait_for(lambda: device.frames_of(m.DeviceServerHeartbeatAck), within=5)
    finally:
        await device.stop()
