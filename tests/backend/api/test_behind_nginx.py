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
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.backend.conftest import free_port
from tests.support.simdevice import SimulatedDevice
from understudy._store._migrations import LATEST
from understudy.generated import models as m

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from tests.support.pgcluster import PgCluster

pytestmark = pytest.mark.slow

RUNBOOK = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
START_S = 60.0
_CREDENTIAL = re.compile(r"(udc_\S+)")


def runbook_nginx_block() -> str:
    """The one fenced `nginx` block of the runbook."""
    blocks: list[str] = re.findall(r"```nginx\n(.*?)```", RUNBOOK.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1, "the runbook has exactly one nginx block"
    return blocks[0]


def _pointed_at(block: str, upstream: str, port: int) -> str:
    block, servers = re.subn(r"(?m)^(\s*)server \S+;.*$", rf"\1server {upstream};", block)
    block, listens = re.subn(r"(?m)^(\s*)listen 80;$", rf"\1listen 127.0.0.1:{port};", block)
    assert (servers, listens) == (1, 1), "the runbook's block lost its upstream or listen line"
    return block


@pytest.fixture
def nginx_binary() -> str:
    if not Path(NGINX).is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("nginx is not installed; CI=true, so this test must run")
        pytest.skip("nginx is not installed (`apt-get install nginx-light`)")
    return NGINX


def _env(data_dir: Path, port: int, url: str, public_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNDERSTUDY_")}
    return env | {
        "UNDERSTUDY_DATA_DIR": str(data_dir),
        "UNDERSTUDY_PORT": str(port),
        "UNDERSTUDY_DATABASE_URL": url,
        "UNDERSTUDY_PUBLIC_URL": public_url,
    }


@pytest.fixture
def nginx(nginx_binary: str, tmp_path: Path) -> Iterator[tuple[int, int]]:
    """nginx on a free port in front of a node on another free port: (nginx port, node port)."""
    port, node_port = free_port(), free_port()
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    prefix.chmod(0o777)  # the worker processes (nobody/www-data under root) write temp files here
    conf = prefix / "nginx.conf"
    conf.write_text(
        f"daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
        f"error_log {prefix}/error.log warn;\nevents {{ worker_connections 64; }}\n"
        "http {\n"
        f"  access_log {prefix}/access.log;\n"
        f"  client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n"
        + _pointed_at(runbook_nginx_block(), f"127.0.0.1:{node_port}", port)
        + "}\n"
    )
    process = subprocess.Popen(
        [nginx_binary, "-p", str(prefix), "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = (
                        (prefix / "error.log").read_text()
                        if (prefix / "error.log").exists()
                        else ""
                    )
                    raise AssertionError(f"nginx did not start: {log}") from None
                time.sleep(0.05)
        yield port, node_port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
