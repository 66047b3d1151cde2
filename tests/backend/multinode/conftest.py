"""Several nodes in one test process, on one throwaway PostgreSQL database.

Each node is a whole backend (`tests/backend/conftest.start_backend`): its own uvicorn server, data
directory and node id, the same database, master key and manual clock. They share one event loop,
so a test can watch every node; the nodes still reach each other only through PostgreSQL (rows,
row locks, LISTEN/NOTIFY), as separate processes would.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from tests.backend.conftest import Backend, start_backend, stop_backend
from understudy._clock import ManualClock

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


class Nodes:
    """Start nodes named a, b, c … on one database; every one is stopped at the end."""

    def __init__(self, tmp_path: Path, url: str, clock: ManualClock | None = None) -> None:
        self._tmp_path = tmp_path
        self._url = url
        self.clock = clock or ManualClock()
        self._key = secrets.token_bytes(32)
        self.running: dict[str, Backend] = {}

    async def start(self, name: str, **overrides: Any) -> Backend:
        """Start node `name`; `overrides` are settings of its own (a telemetry file, say)."""
        node = await start_backend(
            self._tmp_path / name,
            self.clock,
            database_url=self._url,
            master_key=self._key,
            node_id=name,
            **overrides,
        )
        self.running[name] = node
        return node

    async def stop(self, name: str) -> None:
        await stop_backend(self.running.pop(name))

    def age_heartbeat(self, node: Backend) -> None:
        """The node's row as a pause of a minute leaves it."""
        assert node.services.node is not None
        with psycopg.connect(self._url, autocommit=True) as admin:
            admin.execute(
                "UPDATE nodes SET heartbeat_at = heartbeat_at - 60 WHERE node_id = %s",
                (node.services.node.node_id,),
            )

    async def pause(self, node: Backend) -> None:
        """What a paused process (SIGSTOP) shows the others: its heartbeat stops and ages."""
        await node.services.claim.stop()
        self.age_heartbeat(node)

    async def vanish(self, node: Backend) -> None:
        """What a SIGKILL leaves for the others: no heartbeat, no delivery, an old heartbeat row;
        its sockets stay open (the process is not there to close them)."""
        await node.services.claim.stop()
        assert node.services.node is not None
        await node.services.node.stop()
        self.age_heartbeat(node)


@pytest.fixture
async def nodes(tmp_path: Path, postgresql_url: str) -> AsyncIterator[Nodes]:
    started = Nodes(tmp_path, postgresql_url)
    try:
        yield started
    finally:
        for name in list(started.running):
            await started.stop(name)
