"""The Synthetic Users service the fuzzer talks to: the real app on uvicorn, in its own thread.

Schemathesis sends requests synchronously, so the server cannot share the test's thread. The
thread runs `create_app(store, artifacts, services=IdleServices())` on 127.0.0.1 (runs stay
`queued`: no browsers), over a SQLite store and a `DirectoryStore` in a temp dir, seeded with
what the fuzzer substitutes into path parameters so downloads and reads answer 200, not 404:

- a customer API key (and another customer's, whose resources must stay invisible),
- two saved personas,
- a completed run whose session has turns, a reaction with a screenshot, and every artifact
  (transcript, session reports, the aggregate) written by the real `Publisher`,
- a webhook endpoint with deliveries (the outbox wrote them when the run ended) and a usage
  event (the meter wrote it when the session ended).
"""

from __future__ import annotations

import asyncio
import secrets as secrets_module
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import uvicorn

from synthetic_users._api import IdleServices, RunDefaults, create_app
from synthetic_users._artifacts import DirectoryStore, session_prefix
from synthetic_users._publish import Publisher
from synthetic_users._safety._credentials import Credentials, Keyring
from synthetic_users._safety._ssrf import TargetPolicy
from synthetic_users._store import (
    KEY_PREFIX,
    NewRun,
    RunState,
    SessionState,
    Store,
    key_digest,
)
from synthetic_users._store._store import new_id
from synthetic_users._usage import UsageStore
from synthetic_users._webhooks import WebhookStore
from tests.synthetic_users.api.conftest import free_port

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from synthetic_users._api._ratelimit import RateLimits

T = TypeVar("T")

CUSTOMER = "acme"
OTHER_CUSTOMER = "globex"
PERSONA = {
    "name": "Margaret",
    "background": "Retired teacher, shops online a few times a year.",
    "goals": ["Buy a kettle"],
    "digital_literacy": "low",
    "patience": "medium",
    "device": "desktop",
    "locale": "en-GB",
}
SECOND_PERSONA = {**PERSONA, "name": "Dev", "digital_literacy": "high", "patience": "low"}
SCREENSHOT = "step-0002.png"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
WEBHOOK_URL = "https://hooks.example.com/synthetic-users"
T0 = "2026-12-01T09:00:"
# Drawn before the server starts, so the schema's auth configuration can name it at import.
API_KEY = KEY_PREFIX + secrets_module.token_urlsafe(32)


def add_key(store: Store, customer: str, key: str) -> None:
    """Register `key` for `customer` as `Store.create_key` does, with a key chosen here."""
    now = store.clock()
    with store.db.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO customers (customer_id, created_at) VALUES (?, ?)",
            (customer, now),
        )
        conn.execute(
            "INSERT INTO api_keys (digest, key_id, customer_id, created_at) VALUES (?,?,?,?)",
            (key_digest(key), new_id("key"), customer, now),
        )


def _turn(n: int, *, reaction: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "turn": n,
        "generation": 1,
        "started_at": f"{T0}{10 * n:02d}Z",
        "ended_at": f"{T0}{10 * n + 2:02d}Z",
        "observation": {"url": "https://shop.example.com/", "title": "Shop"},
        "action": {"name": "scroll", "arguments": {"direction": "down", "ease": 6}},
        "outcome": {"ok": True, "summary": "scrolled", "elapsed_ms": 5.0},
        "reactions": [],
        "usage": {"input_tokens": 1000 + n, "output_tokens": 50 + n},
    }
    if reaction:
        body["reactions"] = [
            {
                "step": n,
                "generation": 1,
                "sentiment": "confused",
                "note": "Where is the basket?",
                "url": "https://shop.example.com/",
                "screenshot": SCREENSHOT,
                "created_at": f"{T0}{10 * n + 1:02d}Z",
                "kind": "dead_end",
            }
        ]
    return body


CREDENTIAL_PASSWORD = "kettle-correct-horse-7"  # noqa: S105 - the seeded credential's, checked never to leak
PUBLIC_ADDRESS = "93.184.216.34"  # a public IPv4 address (example.com's)


@dataclass(repr=False)
class LiveService:
    """A running service plus what the fuzzer needs to know about it."""

    url: str
    loop: asyncio.AbstractEventLoop
    store: Store
    api_key: str
    other_key: str
    personas: list[str]
    run_id: str  # completed, every artifact written
    session_id: str  # its persona session
    queued_run: str  # queued, for reads of a run without artifacts
    webhook_id: str
    webhook_secret: str
    credential_id: str  # a stored credential of the customer (its password is a secret)
    secrets: list[str] = field(default_factory=list)
    _http: httpx.Client | None = None
    _cursors: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # failure reports print fixtures; keep keys out
        return f"LiveService({self.url})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis' pretty printer
        printer.text(repr(self))

    @property
    def http(self) -> httpx.Client:
        """A synchronous client with the customer's key, for the test thread's own requests."""
        if self._http is None:
            self._http = httpx.Client(
                base_url=self.url, headers={"Authorization": f"Bearer {self.api_key}"}, timeout=30
            )
        return self._http

    def cursor(self, path: str) -> str:
        """A `next_cursor` the service wrote for the list at `path` (its first page of one)."""
        if path not in self._cursors:
            answer = self.http.get(path, params={"limit": 1})
            cursor = answer.json().get("next_cursor")
            if not isinstance(cursor, str):
                raise RuntimeError(f"{path} has no second page to point at: {answer.text}")
            self._cursors[path] = cursor
        return self._cursors[path]

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    def call(self, func: Callable[[], T], timeout: float = 30) -> T:
        """Run a plain function on the service's loop (its store lives there)."""

        async def wrapper() -> T:
            return func()

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(timeout)


UNRESOLVABLE = "does-not-resolve.example"  # the one name the live service cannot resolve


async def _public_resolver(host: str, port: int) -> list[str]:
    if host == UNRESOLVABLE:
        raise OSError("Name or service not known")  # what getaddrinfo raises
    return [PUBLIC_ADDRESS]


def seed(store: Store, artifacts: DirectoryStore) -> dict[str, Any]:
    """Write the resources of the module docstring; their ids and secrets."""
    webhooks, usage = WebhookStore(store), UsageStore(store)
    webhooks.install()
    usage.install()
    add_key(store, CUSTOMER, API_KEY)
    api_key, other_key = API_KEY, store.create_key(OTHER_CUSTOMER)
    personas = [store.create_persona(CUSTOMER, p).persona_id for p in (PERSONA, SECOND_PERSONA)]
    store.create_persona(OTHER_CUSTOMER, PERSONA)
    webhook, secret = webhooks.create(CUSTOMER, WEBHOOK_URL, ["run.completed", "session.completed"])
    _, second_secret = webhooks.create(CUSTOMER, f"{WEBHOOK_URL}/2", ["run.completed"])
    # Two personas, so every list (usage events, deliveries) has a second page to point at.
    run = _run(store, CUSTOMER, [PERSONA, SECOND_PERSONA])
    publisher = Publisher(store, artifacts)
    for session in store.sessions(run):
        store.start_session(session.session_id)
        store.record_turn(session.session_id, _turn(1))
        store.record_turn(session.session_id, _turn(2, reaction=True))
        store.set_session_state(session.session_id, SessionState.COMPLETED)
        prefix = session_prefix(CUSTOMER, run, session.session_id)
        artifacts.put(f"{prefix}/screenshots/{SCREENSHOT}", PNG)
        publisher.session_ended(run, session.session_id, "heuristic")
    session = store.sessions(run)[0]
    store.set_run_state(run, RunState.COMPLETED)
    publisher.run_ended(run)
    # One delivery with an attempt on record, so the deliveries list carries attempts.
    due = webhooks.due(store.clock() + 1)
    if due:
        webhooks.record_attempt(
            due[0],
            attempted_at=store.clock(),
            duration_ms=12.5,
            status_code=503,
            error=None,
            outcome="retry",
            next_retry_at=store.clock() + 60,
        )
    other_run = _run(store, OTHER_CUSTOMER)
    return {
        "api_key": api_key,
        "other_key": other_key,
        "personas": personas,
        "run_id": run,
        "session_id": session.session_id,
        "queued_run": _run(store, CUSTOMER),
        "other_run": other_run,
        "webhook_id": webhook.webhook_id,
        "webhook_secret": secret,
        "secrets": [secret, second_secret],
    }


def _run(store: Store, customer: str, personas: list[dict[str, Any]] | None = None) -> str:
    run, _ = store.create_run(
        customer,
        NewRun(
            target_url="https://shop.example.com/",
            task="Buy a kettle.",
            turn_budget=5,
            model="heuristic",
            personas=personas or [PERSONA],
            request_hash="contract-seed",
        ),
    )
    return run.run_id


class LiveServer:
    """Starts `LiveService` in a daemon thread and stops it cleanly."""

    def __init__(self, tmp_path: Path, limits: RateLimits | None = None) -> None:
        self._tmp_path = tmp_path
        self._limits = limits
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._live: LiveService | None = None
        self._thread = threading.Thread(target=self._main, name="contract-su", daemon=True)

    def start(self) -> LiveService:
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the contract service did not start within 60 s")
        if self._error is not None:
            raise self._error
        assert self._live is not None
        return self._live

    @property
    def root(self) -> Path:
        """Where the service keeps its database and artifacts (`artifacts/`)."""
        return self._tmp_path

    def stop(self) -> None:
        if self._live is not None:
            self._live.close()
            if self._stop is not None:
                self._live.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        store = Store.open(self._tmp_path / "su.db")
        artifacts = DirectoryStore(self._tmp_path / "artifacts")
        try:
            seeded = seed(store, artifacts)
            credentials = Credentials(store.db, Keyring.ephemeral())
            credential = credentials.create(
                CUSTOMER,
                name="shop login",
                username="margaret@example.test",
                password=CREDENTIAL_PASSWORD,
                origin="https://shop.example.com",
            )
            # A second one, so the credentials list has a second page to point a cursor at.
            credentials.create(
                CUSTOMER,
                name="admin login",
                username="admin@example.test",
                password=CREDENTIAL_PASSWORD,
                origin="https://shop.example.com",
            )
            app = create_app(
                store,
                artifacts,
                services=IdleServices(),
                defaults=RunDefaults(30, "heuristic"),
                # No DNS here: every target name resolves to one public address.
                targets=TargetPolicy(resolver=_public_resolver),
                limits=self._limits,
                credentials=credentials,
            )
            port = free_port()
            server = uvicorn.Server(
                uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            )
            task = asyncio.create_task(server.serve())
            while not server.started:
                await asyncio.sleep(0.01)
                if task.done():
                    task.result()
            secrets = [
                seeded["api_key"],
                seeded["other_key"],
                key_digest(seeded["api_key"]),
                key_digest(seeded["other_key"]),
                *seeded["secrets"],
                CREDENTIAL_PASSWORD,
            ]
            self._live = LiveService(
                url=f"http://127.0.0.1:{port}",
                loop=asyncio.get_running_loop(),
                store=store,
                api_key=seeded["api_key"],
                other_key=seeded["other_key"],
                personas=seeded["personas"],
                run_id=seeded["run_id"],
                session_id=seeded["session_id"],
                queued_run=seeded["queued_run"],
                webhook_id=seeded["webhook_id"],
                webhook_secret=seeded["webhook_secret"],
                credential_id=credential.credential_id,
                secrets=secrets,
            )
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                server.should_exit = True
                await task
        finally:
            store.close()
