"""`/readyz` includes the database: 503 with a stable code while it cannot answer, 200 once back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.backend.conftest import free_port
from tests.support.pgcluster import PgCluster, find_bin_dir
from understudy._store._migrations import LATEST

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from tests.backend.conftest import Backend

START_S = 60.0  # importing the app costs seconds of CPU on a shared machine


@pytest.fixture
def own_cluster() -> Iterator[PgCluster]:
    """A cluster of this test's own: it is stopped and started again, which the shared one
    (every other PostgreSQL test's) must not see."""
    if find_bin_dir() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("PostgreSQL is not installed; CI=true, so its tests must run")
        pytest.skip("PostgreSQL is not installed; `apt-get install postgresql`")
    cluster = PgCluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def served_on_postgresql(own_cluster: PgCluster, tmp_path: Path) -> AsyncIterator[str]:
    """`understudy serve` in its own process on a fresh database of `own_cluster`; its URL."""
    url = own_cluster.create_database("ready")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNDERSTUDY_")}
    env |= {
        "UNDERSTUDY_DATA_DIR": str(tmp_path / "data"),
        "UNDERSTUDY_PORT": str(port),
        "UNDERSTUDY_DATABASE_URL": url,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "understudy.cli", "serve"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await _until_status(base, 200, process)
        yield base
    finally:
        if process.returncode is None:
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


async def _until_status(
    base: str, status: int, process: asyncio.subprocess.Process | None = None
) -> httpx.Response:
    deadline = time.monotonic() + START_S
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        while True:
            if process is not None:
                assert process.returncode is None, "the server exited"
            try:
                reply = await http.get("/readyz")
                if reply.status_code == status:
                    return reply
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"/readyz never answered {status}")
            await asyncio.sleep(0.2)


@pytest.mark.slow
async def test_readyz_is_503_while_postgresql_is_down_and_200_once_it_is_back(
    own_cluster: PgCluster, served_on_postgresql: str
) -> None:
    ready = await _until_status(served_on_postgresql, 200)
    node = ready.json()["node"]  # one node of the database's, named by /readyz
    assert ready.json() == {"status": "ok", "schemaVersion": LATEST, "node": node}

    await asyncio.to_thread(own_cluster.stop_server)
    down = await _until_status(served_on_postgresql, 503)
    assert down.headers["content-type"].startswith("application/problem+json")
    assert down.json()["code"] == "database_unavailable"
    async with httpx.AsyncClient(base_url=served_on_postgresql, timeout=30) as http:
        assert (await http.get("/healthz")).status_code == 200  # alive, only not ready

    await asyncio.to_thread(own_cluster.start_server)
    back = await _until_status(served_on_postgresql, 200)
    assert back.json() == {"status": "ok", "schemaVersion": LATEST, "node": node}


async def test_readyz_is_503_schema_not_current_when_the_database_is_behind_this_build(
    backend: Backend,
) -> None:
    async with httpx.AsyncClient(base_url=backend.url) as http:
        assert (await http.get("/readyz")).status_code == 200
        backend.services.db.execute("DELETE FROM schema_migrations WHERE version = ?", (LATEST,))
        reply = await http.get("/readyz")
    assert reply.status_code == 503
    assert reply.json()["code"] == "schema_not_current"
    assert f"schema version {LATEST - 1}" in reply.json()["detail"]
