"""The connector against the running backend: uvicorn in-process, a manual clock, simulated devices.

The backend of tests/backend/conftest.py serves real HTTP and WebSockets on 127.0.0.1 in the test's
event loop, so the connector under test is an `AsyncClient` in that same loop (a blocking `Client`
runs in a worker thread, the guide's examples through their `main()`). The backend's deadlines
move only when a test advances the manual clock; the connector's own waits go through `Pace`,
which records every delay the connector asked for (so a test checks it honoured `Retry-After`) and
yields briefly.
Every HTTP exchange goes through the real httpx transport, recorded on the way.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.backend.conftest import Backend, start_backend, stop_backend
from understudy._store import vault
from understudy.generated import models as m
from understudy_connector import AsyncClient

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path
    from uuid import UUID

    from tests.support.simdevice import Behaviour, Lease, SimulatedDevice
    from understudy_connector import AuditEvent

ORIGINS = ["https://example.com"]
WITHIN = 5.0
"""Real seconds any single wait of a test may take before it fails."""


@dataclass(frozen=True)
class Exchange:
    """One HTTP request the connector sent and the status it got back."""

    method: str
    path: str
    headers: httpx.Headers
    body: Any
    status: int


class Recorder(httpx.AsyncHTTPTransport):
    """The real httpx transport, noting every exchange."""

    def __init__(self) -> None:
        super().__init__()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        body = json.loads(request.content) if request.content else None
        self.exchanges.append(
            Exchange(request.method, request.url.path, request.headers, body, response.status_code)
        )
        return response

    def commands(self, command_id: UUID | str | None = None) -> list[Exchange]:
        """The command submissions (of one command id, if given)."""
        return [
            e
            for e in self.exchanges
            if e.method == "POST"
            and e.path.endswith("/commands")
            and (command_id is None or e.body["commandId"] == str(command_id))
        ]

    def polls(self, command_id: UUID | str) -> list[Exchange]:
        """The polls of one command."""
        return [
            e for e in self.exchanges if e.method == "GET" and e.path.endswith(f"/{command_id}")
        ]

    def creations(self) -> list[Exchange]:
        return [e for e in self.exchanges if (e.method, e.path) == ("POST", "/v1/sessions")]


@dataclass
class _Watch:
    predicate: Callable[[AuditEvent], bool]
    seen: asyncio.Event
    then: Callable[[], None] | None


@dataclass
class AuditLog:
    """The consumer's audit hook: keeps every event, and signals the ones a test waits for."""

    events: list[AuditEvent] = field(default_factory=list)
    _watches: list[_Watch] = field(default_factory=list)

    def __call__(self, event: AuditEvent) -> None:
        self.events.append(event)
        for watch in self._watches:
            if not watch.seen.is_set() and watch.predicate(event):
                if watch.then is not None:
                    watch.then()  # inline, before the connector's next action
                watch.seen.set()

    def when(
        self, predicate: Callable[[AuditEvent], bool], then: Callable[[], None] | None = None
    ) -> asyncio.Event:
        """An event set on the first audit event matching `predicate`, after running `then`."""
        seen = asyncio.Event()
        self._watches.append(_Watch(predicate, seen, then))
        return seen


def answered(status: int, code: str | None = None) -> Callable[[AuditEvent], bool]:
    """Matches the audit event of an HTTP answer with this status (and problem code)."""

    def match(event: AuditEvent) -> bool:
        return (
            event.stage == "response"
            and event.http_status == status
            and (code is None or event.code == code)
        )

    return match


class Pace:
    """The connector's `sleep`: notes the delay asked for, then yields a little real time."""

    def __init__(self, real: float = 0.02) -> None:
        self.delays: list[float] = []
        self._real = real

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(self._real)


class LeaseArchive(dict[str, "Lease"]):
    """A device's lease table that also remembers every lease it ever held.

    The simulated device forgets a lease (and the frames of its session) when its tab closes; a
    test that inspects a session after it was deleted reads the archive instead.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ever: list[Lease] = []

    def __setitem__(self, key: str, value: Lease) -> None:
        if all(lease is not value for lease in self.ever):
            self.ever.append(value)
        super().__setitem__(key, value)


def session_frames(device: SimulatedDevice) -> list[m.SessionServerFrame]:
    """Every frame the device's session sockets received, closed sessions included."""
    archive = device.leases
    leases = archive.ever if isinstance(archive, LeaseArchive) else list(archive.values())
    return [frame for lease in list(leases) for frame in lease.session_frames]


@dataclass
class Live:
    """A running backend and what a test needs to drive the connector against it."""

    backend: Backend
    api_key: str
    pace: Pace = field(default_factory=Pace)
    audit: AuditLog = field(default_factory=AuditLog)
    http: Recorder = field(default_factory=Recorder)
    _clients: list[AsyncClient] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.backend.url

    def client(self, **options: Any) -> AsyncClient:
        """An AsyncClient on the recorded transport, with the pace and the audit log."""
        options.setdefault("audit", self.audit)
        client = AsyncClient(
            self.url, self.api_key, transport=self.http, sleep=self.pace, **options
        )
        self._clients.append(client)
        return client

    async def device(
        self, behaviour: Behaviour | None = None, name: str = "laptop-1", connect: bool = True
    ) -> SimulatedDevice:
        device = await self.backend.device(device=name, behaviour=behaviour, connect=False)
        device.leases = LeaseArchive()
        if connect:
            await device.connect()
        return device

    async def advance(self, seconds: float) -> None:
        """Move the backend's clock and let the turns it wakes run."""
        await self.backend.clock.advance(seconds)
        await self.backend.settle()

    def put_secret(self, name: str, plaintext: str, tenant: str = "acme") -> None:
        services = self.backend.services
        with services.storage.transaction() as tx:
            vault.put(tx.vault, services.keys, tenant, name, plaintext, services.clock.now())


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    backend = await start_backend(tmp_path)
    running = Live(backend, backend.api_key())
    try:
        yield running
    finally:
        for client in running._clients:
            await client.aclose()
        await stop_backend(backend)


def lease_of(device: SimulatedDevice, session_id: UUID) -> Lease:
    """The device's lease of a session."""
    return next(lease for lease in device.leases.values() if lease.session_id == str(session_id))


async def socket_up(device: SimulatedDevice, session_id: UUID) -> None:
    """Wait until the session's socket is up (its hello was acknowledged).

    The backend answers `201` once the socket is up; an attended session's socket opens after the
    attach, so a test waits here before counting requests exactly.
    """

    def acknowledged() -> bool:
        return any(
            isinstance(frame, m.SessionServerHelloAck)
            for lease in device.leases.values()
            if lease.session_id == str(session_id) and lease.session_socket is not None
            for frame in lease.session_frames
        )

    await device.wait_for(acknowledged, within=WITHIN)


async def granted(device: SimulatedDevice, count: int = 1) -> str:
    """Wait until the device has really executed `count` writes; the id of the last one."""
    await device.wait_for(lambda: sum(device.executions.values()) >= count, within=WITHIN)
    return list(device.executions)[-1]


async def release(device: SimulatedDevice, command_id: str) -> None:
    """Send the result the device held back (`execute="hold_result"`): the write completes."""
    lease = next(lease for lease in device.leases.values() if command_id in lease.journal_results)
    await lease.session_socket.send(lease.journal_results[command_id].to_wire_json())


async def seen(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), WITHIN)


async def tombstoned(live: Live, session_id: UUID) -> bool:
    """Whether a plain GET of the session answers 410, once the device acknowledged the close.

    A delete answers `202 closing` at once; the session turns terminal when the extension
    acknowledges the close of its tab, a moment later.
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + WITHIN
    async with live.backend.client(live.api_key) as http:
        while loop.time() < give_up:
            status = (await http.get(f"/v1/sessions/{session_id}")).status_code
            if status != 200:
                return status == 410
            await live.backend.settle(5)
    return False
