"""The backend the fuzzer talks to: the real app on uvicorn, in a thread with its own event loop.

Schemathesis sends requests synchronously, so the server cannot share the test's thread. This
thread runs the same harness as the backend tests (`start_backend`: uvicorn on 127.0.0.1, SQLite
in a temp dir, a manual clock), with simulated devices connected over real sockets and one
connected unattended session whose id the fuzzer substitutes into path parameters, so that
commands reach the session agent and the device instead of stopping at a 404.

The manual clock never moves here: deadlines cannot fire in the middle of a fuzz run. Quotas are
raised out of reach for the same reason; the scenario tests prove the limits on their own backends.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import websockets.asyncio.connection
from uvicorn.protocols.websockets import websockets_sansio_impl

from tests.backend.conftest import Backend, start_backend, stop_backend
from tests.contract._ledger import LEDGER
from tests.support.simdevice import SimulatedDevice
from understudy import _security
from understudy._config import QuotaPolicy
from understudy._store import vault
from understudy.generated import models as m

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from pathlib import Path

T = TypeVar("T")

TENANT = "acme"
# Drawn before the server starts, so the schema's auth configuration can name them at import.
CONSUMER_KEY = _security.generate_token("consumer")
DEVICE_CREDENTIAL = _security.generate_token("device")
OPERATOR_TOKEN = _security.generate_token("operator")
# Operator cases that name the live tenant act on this one instead: rotating or revoking the live
# devices would end every later command case.
OPERATOR_SANDBOX = "contract-operator"
DEVICES = ("laptop-1", "laptop-2")
LIVE_ORIGINS = ["https://live.contract.test"]
LIVE_PROFILE = "contract-live-profile-5b1f"
# The secret name of the spec's fill_secret example, so the example's grant carries a plaintext
# the leak check then looks for in every response.
VAULT_SECRETS = {"login-password": "contract-secret-9c41d7e2 correct horse"}
UNLIMITED = QuotaPolicy(
    session_creates_per_actor_per_min=1_000_000,
    commands_per_session_per_min=1_000_000,
    commands_per_tenant_per_min=1_000_000,
    credential_fills_per_actor_per_min=1_000_000,
    device_tickets_per_device_per_min=1_000_000,
    commands_per_session_lifetime=1_000_000,
    requests_per_credential_per_min=1_000_000,
)


@dataclass(repr=False)
class LiveBackend:
    """A running backend plus what the fuzzer needs to know about it."""

    backend: Backend
    loop: asyncio.AbstractEventLoop
    api_key: str
    device_credential: str
    devices: list[SimulatedDevice]
    live_session: str
    secrets: dict[str, str] = field(default_factory=lambda: dict(VAULT_SECRETS))
    _http: httpx.Client | None = None
    _seen_frames: dict[int, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.backend.url

    def __repr__(self) -> str:  # failure reports print fixtures; keep keys and tokens out
        return f"LiveBackend({self.url})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis' pretty printer
        printer.text(repr(self))

    @property
    def http(self) -> httpx.Client:
        """A synchronous client with the consumer key, for the test thread's own requests."""
        if self._http is None:
            self._http = httpx.Client(
                base_url=self.url, headers={"Authorization": f"Bearer {self.api_key}"}, timeout=30
            )
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run a coroutine on the backend's loop from the test thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, func: Callable[[], T]) -> T:
        """Run a plain function on the backend's loop (its SQLite and actors live there)."""

        async def wrapper() -> T:
            return func()

        return self.run(wrapper())

    def new_tickets(self) -> list[str]:
        """The session tickets the backend sent to the simulated devices since the last call."""

        def collect() -> list[str]:
            found = []
            for index, device in enumerate(self.devices):
                frames = device.frames[self._seen_frames.get(index, 0) :]
                self._seen_frames[index] = len(device.frames)
                found += [f.ticket for f in frames if isinstance(f, m.DeviceServerSessionTicket)]
            return found

        return self.call(collect)

    def secrets_granted(self) -> list[str]:
        """Plaintexts the simulated devices received in write grants."""
        return self.call(lambda: [value for d in self.devices for value in d.secrets_seen])

    def wait_session_socket(self, session_id: str, within: float = 5.0) -> None:
        """Wait until the device holding `session_id` has its session socket up (hello_ack).

        The simulated device stops reading its device socket if a session socket is refused
        after the handshake, which a DELETE racing the session ticket causes; waiting first
        keeps the fuzz run's devices alive (reported as a simdevice defect).
        """

        async def wait() -> None:
            for device in self.devices:
                lease = next(
                    (lease for lease in device.leases.values() if lease.session_id == session_id),
                    None,
                )
                if lease is not None:
                    await device.wait_for(lambda lease=lease: lease.session_frames, within)
                    return

        self.run(wait(), timeout=within + 5)

    def wait_terminal(self, session_id: str, within: float = 5.0) -> None:
        """Wait until `session_id` reads as a tombstone (410), after a DELETE."""
        deadline = time.monotonic() + within
        while (answer := self.http.get(f"/v1/sessions/{session_id}")).status_code != 410:
            if time.monotonic() > deadline:
                raise AssertionError(f"session {session_id} is not terminal: {answer.text}")
            time.sleep(0.005)

    def ensure_live_session(self) -> str:
        """The id of a connected unattended session, creating a new one if the last one ended."""
        return self.run(self._ensure_live_session())

    async def _ensure_live_session(self) -> str:
        row = self.backend.services.repos.sessions.get(self.live_session)
        if row is not None and row.status == "connected":
            return self.live_session
        async with self.backend.client(self.api_key) as http:
            self.live_session = await _create_live_session(http)
        return self.live_session


async def _create_live_session(http: httpx.AsyncClient) -> str:
    profile = f"{LIVE_PROFILE}-{uuid.uuid4().hex[:8]}"
    LEDGER.secret(profile)
    response = await http.post(
        "/v1/sessions",
        json={
            "mode": "unattended",
            "deviceId": DEVICES[0],
            "allowedOrigins": LIVE_ORIGINS,
            "profileStateKey": profile,
        },
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    if response.status_code != 201:
        raise RuntimeError(f"could not create the live session: {response.text}")
    session_id: str = response.json()["sessionId"]
    return session_id


# websockets and uvicorn draw keepalive-ping payloads from the global `random`. Hypothesis owns
# that generator while it generates a case and flags any other use; a ping sent by the server
# thread at that moment would fail the test. The pings get a generator of their own.
_PING_MODULES = (websockets.asyncio.connection, websockets_sansio_impl)


class LiveServer:
    """Starts `LiveBackend` in a daemon thread and stops it cleanly."""

    def __init__(self, tmp_path: Path) -> None:
        self._tmp_path = tmp_path
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._live: LiveBackend | None = None
        self._thread = threading.Thread(target=self._main, name="contract-backend", daemon=True)

    def start(self) -> LiveBackend:
        for module in _PING_MODULES:
            setattr(module, "random", random.Random())  # noqa: B010, S311 - ping payloads only
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the contract backend did not start within 60 s")
        if self._error is not None:
            raise self._error
        assert self._live is not None
        return self._live

    def stop(self) -> None:
        if self._live is not None:
            self._live.close()
        if self._live is not None and self._stop is not None:
            self._live.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)
        for module in _PING_MODULES:
            setattr(module, "random", random)  # noqa: B010

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        backend = await start_backend(self._tmp_path, quota=UNLIMITED)
        try:
            services = backend.services
            now = backend.clock.now()
            with services.storage.transaction() as tx:
                tx.api_keys.add(
                    digest=_security.token_digest(CONSUMER_KEY),
                    key_id="key_contract",
                    tenant=TENANT,
                    actor="contract-bot",
                    now=now,
                )
                tx.devices.add(
                    tenant=TENANT,
                    device_id=DEVICES[0],
                    digest=_security.token_digest(DEVICE_CREDENTIAL),
                    now=now,
                )
                tx.operators.add_token(
                    digest=_security.token_digest(OPERATOR_TOKEN),
                    token_id="op_contract",  # noqa: S106 - an id, not the token
                    name="contract",
                    now=now,
                )
                for name, plaintext in VAULT_SECRETS.items():
                    vault.put(tx.vault, services.keys, TENANT, name, plaintext, now)
            first = SimulatedDevice(backend.url, DEVICE_CREDENTIAL)
            backend.devices.append(first)
            await first.connect()
            devices = [first, await backend.device(TENANT, DEVICES[1])]
            async with backend.client(CONSUMER_KEY) as http:
                live_session = await _create_live_session(http)
            self._live = LiveBackend(
                backend=backend,
                loop=asyncio.get_running_loop(),
                api_key=CONSUMER_KEY,
                device_credential=DEVICE_CREDENTIAL,
                devices=devices,
                live_session=live_session,
            )
            self._ready.set()
            await self._stop.wait()
        finally:
            await stop_backend(backend)
