"""A running backend for tests: uvicorn on 127.0.0.1, SQLite in a temp dir, a manual clock.

Tests talk to it over real HTTP and real WebSockets, like the extension and consumers do. With
`UNDERSTUDY_TEST_ENGINE=postgresql` the `backend` fixture keeps its data in a fresh database on
the session's throwaway PostgreSQL cluster instead, so any API test module can be run on that
engine (`UNDERSTUDY_TEST_ENGINE=postgresql pytest tests/backend/api/test_sessions.py`); tests that
use `pg_backend` always run on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import pytest
import uvicorn

from tests.support import pgcluster
from tests.support.simdevice import Behaviour, SimulatedDevice
from understudy import _security
from understudy._bootstrap import build_services
from understudy._clock import ManualClock
from understudy._config import Settings, load_settings
from understudy._server import server_config
from understudy.generated import models as m
from understudy.http import create_app

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Iterator
    from pathlib import Path

    from understudy._services import Services
    from understudy._store.commands import CommandRow

T = TypeVar("T")

ORIGINS = ["https://example.com"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Backend:
    settings: Settings
    services: Services
    clock: ManualClock
    server: uvicorn.Server
    task: asyncio.Task[None]
    devices: list[SimulatedDevice] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.settings.public_url

    def api_key(self, tenant: str = "acme", actor: str = "bot") -> str:
        token = _security.generate_token("consumer")
        with self.services.storage.transaction() as tx:
            tx.api_keys.add(
                digest=_security.token_digest(token),
                key_id=f"key_{uuid.uuid4().hex[:8]}",
                tenant=tenant,
                actor=actor,
                now=self.clock.now(),
            )
        return token

    def operator_token(self, name: str = "ops") -> str:
        """A new operator token (`uop_…`), as `understudy operator-tokens create` makes one."""
        token = _security.generate_token("operator")
        with self.services.storage.transaction() as tx:
            tx.operators.add_token(
                digest=_security.token_digest(token),
                token_id=f"op_{uuid.uuid4().hex[:12]}",
                name=name,
                now=self.clock.now(),
            )
        return token

    def enroll(self, tenant: str = "acme", device: str = "laptop-1") -> str:
        token = _security.generate_token("device")
        with self.services.storage.transaction() as tx:
            tx.devices.add(
                tenant=tenant,
                device_id=device,
                digest=_security.token_digest(token),
                now=self.clock.now(),
            )
        return token

    def client(self, key: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=10
        )

    async def device(
        self,
        tenant: str = "acme",
        device: str = "laptop-1",
        behaviour: Behaviour | None = None,
        connect: bool = True,
    ) -> SimulatedDevice:
        sim = SimulatedDevice(self.url, self.enroll(tenant, device), behaviour)
        self.devices.append(sim)
        if connect:
            await sim.connect()
        return sim

    async def settle(self, rounds: int = 50) -> None:
        """Let in-flight frames and actor turns finish (real sockets need real loop turns).

        Only for letting work run before the manual clock moves; a test that checks something
        happened, or did not, waits for an observable event instead (`until`).
        """
        for _ in range(rounds):
            await asyncio.sleep(0.002)

    async def until(self, predicate: Callable[[], T], what: str, within: float = 5.0) -> T:
        """Wait, in real time, until `predicate()` is truthy and return it; fail naming `what`.

        Polls on the event loop, so actor turns and socket reads run in between. To show that
        something did not happen, wait for a later event that would have followed it.
        """
        deadline = time.monotonic() + within
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {within} s: {what}")
            await asyncio.sleep(0.002)

    def command(self, session_id: str, command_id: str) -> CommandRow | None:
        """The backend's journal row of a command, once admitted."""
        return self.services.repos.commands.get(session_id, command_id)

    def command_state(self, session_id: str, command_id: str) -> str | None:
        row = self.command(session_id, command_id)
        return None if row is None else row.state

    def session_status(self, session_id: str) -> str | None:
        row = self.services.repos.sessions.get(session_id)
        return None if row is None else row.status


async def start_backend(
    tmp_path: Path, clock: ManualClock | None = None, **overrides: Any
) -> Backend:
    port = free_port()
    env = {
        "UNDERSTUDY_DATA_DIR": str(tmp_path / "data"),
        "UNDERSTUDY_PORT": str(port),
        "UNATTENDED_ENABLED_TENANTS": '["acme", "globex"]',
    }
    settings = replace(load_settings(env), **overrides)
    clock = clock or ManualClock()
    services = build_services(settings, clock)
    config = server_config(
        create_app(services),
        services,
        host="127.0.0.1",
        # A request still waiting on the manual clock must not hold shutdown (and a test) forever.
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    return Backend(settings, services, clock, server, task)


async def stop_backend(backend: Backend) -> None:
    for device in backend.devices:
        await device.stop()
    backend.server.should_exit = True
    await backend.task


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[pgcluster.PgCluster]:
    """A throwaway PostgreSQL cluster for the run (skipped without the binaries, outside CI)."""
    yield from pgcluster.session_cluster()


@pytest.fixture
def postgresql_url(pg_cluster: pgcluster.PgCluster) -> Iterator[str]:
    """A fresh, empty PostgreSQL database (a schema of its own) for one test."""
    name = f"backend_{uuid.uuid4().hex[:12]}"
    yield pg_cluster.create_schema(name)
    pg_cluster.drop_schema(name)


def engine_overrides(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The settings that put a one-node backend on the engine `UNDERSTUDY_TEST_ENGINE` names."""
    overrides: dict[str, Any] = {}
    if os.environ.get("UNDERSTUDY_TEST_ENGINE") == "postgresql":
        overrides["database_url"] = request.getfixturevalue("postgresql_url")
    return overrides


@pytest.fixture
async def backend(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    running = await start_backend(tmp_path, **engine_overrides(request))
    try:
        yield running
    finally:
        await stop_backend(running)


@pytest.fixture
async def pg_backend(tmp_path: Path, postgresql_url: str) -> AsyncIterator[Backend]:
    """A backend on PostgreSQL, whatever `UNDERSTUDY_TEST_ENGINE` says."""
    running = await start_backend(tmp_path, database_url=postgresql_url)
    try:
        yield running
    finally:
        await stop_backend(running)


def unattended(
    origins: Iterable[str] = ORIGINS, profile: str = "profile-a", **extra: Any
) -> dict[str, Any]:
    return {
        "mode": "unattended",
        "allowedOrigins": list(origins),
        "profileStateKey": profile,
        **extra,
    }


async def post_create(backend: Backend, http: httpx.AsyncClient, body: dict[str, Any]) -> Any:
    """POST an unattended create; if its device never opens the session socket, let the 5 s
    creation budget pass on the manual clock so the answer still comes back."""
    devices = list(backend.devices)

    def waiting_for(device: SimulatedDevice) -> type[Any]:
        # What the device gets last before the create waits on the clock: the session ticket
        # (sent once the provision is acknowledged), or the provision it leaves unanswered.
        if device.behaviour.provision == "ack":
            return m.DeviceServerSessionTicket
        return m.DeviceServerProvision

    def got() -> list[int]:
        return [len(d.frames_of(waiting_for(d))) for d in devices]

    before = got()
    task = asyncio.ensure_future(http.post("/v1/sessions", json=body, headers=idem()))
    if all(d.behaviour.provision == "ack" and d.behaviour.open_session_sockets for d in devices):
        return await task  # the device connects the session: no time needs to pass
    await backend.until(
        lambda: task.done() or got() != before, "the create is answered or waits on the clock"
    )
    if not task.done():
        await backend.clock.advance(5)
    return await task


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}
