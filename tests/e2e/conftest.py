"""Fixtures of the end-to-end suite: the real extension in real Chromium against the real backend.

The backend runs in-process under uvicorn on 127.0.0.1 with the wall clock, and records every
request line it receives (path, query and headers), so a test can prove what Chromium sent.
A small local site on 127.0.0.1 serves the pages a person would have open, and records its
requests too. Chromium is a plain process (`demo/chromium.py`). The tests drive the system through
the public HTTP API; they touch the extension only where a person would (the enrollment record the
options page stores, and panel requests sent from the options page), and look at the browser
through DevTools' target list and read-only `chrome.*` queries in the extension's service worker.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
import uvicorn

from demo.cdp import evaluate
from demo.chromium import extension_eval
from understudy import _security
from understudy._bootstrap import build_services
from understudy._clock import SystemClock
from understudy._config import load_settings
from understudy.http import create_app

if TYPE_CHECKING:
    from collections.abc import Awaitable, Iterator

    from demo.chromium import Chromium
    from understudy._config import Settings
    from understudy._services import Services

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "extension"
DIST = EXTENSION / "dist"
TENANT = "acme"
DEVICE_ID = "e2e-laptop"


def _extension_id() -> str:
    """The extension's fixed id, read from its source so the suite and the manifest cannot drift."""
    found = re.search(
        r'EXTENSION_ID = "([a-p]{32})"', (EXTENSION / "src" / "extensionId.ts").read_text()
    )
    assert found is not None, "extension/src/extensionId.ts no longer declares EXTENSION_ID"
    return found.group(1)


EXTENSION_ID = _extension_id()
EXTENSION_ORIGIN = f"chrome-extension://{EXTENSION_ID}"


# -- the extension build ---------------------------------------------------------------------------


def _newest_source_mtime() -> float:
    sources = [
        EXTENSION / "manifest.json",
        EXTENSION / "managed_schema.json",
        EXTENSION / "build.mjs",
    ]
    for folder in (EXTENSION / "src", EXTENSION / "static"):
        sources += [p for p in folder.rglob("*") if p.is_file()]
    return max(p.stat().st_mtime for p in sources)


@pytest.fixture(scope="session")
def extension_dist() -> Path:
    """extension/dist, rebuilt once per test session when it is missing or older than a source."""
    built = DIST / "background.js"
    if not built.exists() or built.stat().st_mtime < _newest_source_mtime():
        pnpm = shutil.which("pnpm")
        command = [pnpm, "-C", str(EXTENSION), "build"] if pnpm else ["make", "extension"]
        subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=300)
    assert (DIST / "manifest.json").exists(), "the extension build wrote no manifest"
    return DIST


# -- the backend -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One request as the backend received it."""

    kind: str  # "http" or "websocket"
    method: str
    path: str
    query: str
    headers: dict[str, str]

    @property
    def target(self) -> str:
        """The request target as it appeared on the wire (path and query)."""
        return f"{self.path}?{self.query}" if self.query else self.path


class RecordingApp:
    """An ASGI wrapper that records every request before the app sees it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[Seen] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            self.seen.append(
                Seen(
                    kind=scope["type"],
                    method=scope.get("method", "GET"),
                    path=scope["path"],
                    query=scope.get("query_string", b"").decode("latin-1"),
                    headers={k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]},
                )
            )
        await self.app(scope, receive, send)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Backend:
    settings: Settings
    services: Services
    recorder: RecordingApp
    server: uvicorn.Server
    task: asyncio.Task[None]

    @property
    def url(self) -> str:
        return self.settings.public_url

    def api_key(self, actor: str = "agent") -> str:
        token = _security.generate_token("consumer")
        with self.services.storage.transaction() as tx:
            tx.api_keys.add(
                digest=_security.token_digest(token),
                key_id=f"key_{uuid.uuid4().hex[:8]}",
                tenant=TENANT,
                actor=actor,
                now=time.time(),
            )
        return token

    def enroll(self, device_id: str = DEVICE_ID) -> str:
        """Enroll a device as the operator CLI does; returns the raw credential (shown once)."""
        token = _security.generate_token("device")
        with self.services.storage.transaction() as tx:
            tx.devices.add(
                tenant=TENANT,
                device_id=device_id,
                digest=_security.token_digest(token),
                now=time.time(),
            )
        return token

    def client(self, key: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=15
        )


async def start_backend(tmp_path: Path, extra_env: dict[str, str] | None = None) -> Backend:
    """The real app on the wall clock, admitting socket upgrades from the extension's origin.

    `extra_env` adds settings (for instance `UNDERSTUDY_TELEMETRY_PATH`, a JSON-lines sink).
    """
    port = _free_port()
    env = {
        "UNDERSTUDY_DATA_DIR": str(tmp_path / "data"),
        "UNDERSTUDY_PORT": str(port),
        "UNATTENDED_ENABLED_TENANTS": f'["{TENANT}"]',
        **(extra_env or {}),
    }
    settings = replace(load_settings(env), allowed_socket_origins=frozenset({EXTENSION_ORIGIN}))
    services = build_services(settings, SystemClock())
    recorder = RecordingApp(create_app(services))
    config = uvicorn.Config(
        recorder,
        host="127.0.0.1",
        port=port,
        lifespan="on",
        log_level="warning",
        ws="websockets-sansio",
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    return Backend(settings, services, recorder, server, task)


async def stop_backend(backend: Backend) -> None:
    backend.server.should_exit = True
    await backend.task


# -- the local site --------------------------------------------------------------------------------


@dataclass
class Hit:
    """One request as a local site received it."""

    method: str
    path: str  # the request target: path and query
    headers: dict[str, str]
    body: bytes
    started: float  # time.monotonic() when the request arrived
    finished: float | None = None  # when the answer was written

    @property
    def route(self) -> str:
        return urlsplit(self.path).path

    @property
    def form(self) -> dict[str, str]:
        """The body of a form POST, decoded."""
        return dict(parse_qsl(self.body.decode()))

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.path).query))


@dataclass(frozen=True)
class Reply:
    """What a route answers."""

    body: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # the server holds the answer this long (a slow page)


Route = Callable[[Hit], Reply]


class Site:
    """Pages served on 127.0.0.1 (its own origin: a port of its own); every request is recorded.

    `routes` maps a path (without query) to a handler; any other GET gets a plain page titled
    after its path, which is what a person's tab shows.
    """

    def __init__(self, routes: dict[str, Route] | None = None) -> None:
        site = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "e2e-site"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                hit = Hit(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                    time.monotonic(),
                )
                with site.lock:
                    site.hits.append(hit)
                    site.paths.append(self.path)
                route = site.routes.get(hit.route)
                if route is not None:
                    reply = route(hit)
                elif self.command == "GET":
                    reply = Reply(
                        f"<!doctype html><title>{self.path}</title>"
                        f"<h1>A person's page {self.path}</h1>"
                    )
                else:
                    reply = Reply("no such form", status=404)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                body = reply.body.encode()
                try:
                    self.send_response(reply.status)
                    headers = {"Content-Type": "text/html; charset=utf-8", **reply.headers}
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the browser went away meanwhile (killed, or the tab closed)
                hit.finished = time.monotonic()

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def log_message(self, format: str, *args: Any) -> None:
                del format, args  # quiet

        self.routes: dict[str, Route] = dict(routes or {})
        self.lock = threading.Lock()
        self.hits: list[Hit] = []
        self.paths: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"{self.origin}{path}"

    def hits_on(self, route: str, method: str | None = None) -> list[Hit]:
        """The requests for one path (query ignored), oldest first."""
        with self.lock:
            return [
                h for h in self.hits if h.route == route and (method is None or h.method == method)
            ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    running = Site()
    try:
        yield running
    finally:
        running.close()


# -- the browser, seen from outside ----------------------------------------------------------------


async def eventually(
    probe: Callable[[], Awaitable[Any]], timeout_s: float = 15, what: str = "condition"
) -> Any:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s} s (last: {last!r})")
        await asyncio.sleep(0.1)


async def worker_eval(browser: Chromium, expression: str, timeout_s: float = 15) -> Any:
    """Evaluate in the extension's service worker (see `demo.chromium.extension_eval`)."""
    return await extension_eval(browser, EXTENSION_ORIGIN, expression, timeout_s)


async def enroll_extension(browser: Chromium, backend: Backend, credential: str) -> None:
    """Store the enrollment the way the options page does (chrome.storage.local, one record)."""
    record = {
        "serviceOrigin": backend.url,
        "deviceId": DEVICE_ID,
        "credential": credential,
        "enabled": True,
        "localOriginPolicy": {"mode": "any"},
    }
    await worker_eval(
        browser, f"chrome.storage.local.set({{enrollment: {json.dumps(record)}}}).then(() => true)"
    )


async def panel_request(browser: Chromium, message: dict[str, Any]) -> dict[str, Any]:
    """Send a panel request from the extension's options page, as its UI does, and answer it.

    The page is opened for the request and closed after it.
    """
    page = await browser.devtools.open_page(f"{EXTENSION_ORIGIN}/options.html")
    try:

        async def loaded() -> bool:
            return bool(
                await evaluate(page.ws_url, "typeof chrome.runtime?.sendMessage === 'function'")
            )

        await eventually(loaded, what="the options page loading")
        answer: dict[str, Any] = await evaluate(
            page.ws_url, f"chrome.runtime.sendMessage({json.dumps(message)})"
        )
    finally:
        await browser.devtools.close_page(page.id)

        async def gone() -> bool:
            return all(t.id != page.id for t in await browser.devtools.targets())

        await eventually(gone, what="the options page closing")
    return answer


async def spare_ready(browser: Chromium) -> None:
    """Wait until the extension's next spare window is open (it opens beside a new session).

    A test that compares the browser's pages before and after something a session does takes
    its "before" after this, so the spare window does not appear in between.
    """

    async def ready() -> bool:
        return bool(
            await worker_eval(
                browser, "chrome.storage.session.get('spareWindow').then(r => !!r.spareWindow)"
            )
        )

    await eventually(ready, what="the extension's spare window opening")


async def debugger_targets(browser: Chromium) -> list[dict[str, Any]]:
    """chrome.debugger.getTargets(): each target's tab id and whether a debugger is attached."""
    targets: list[dict[str, Any]] = await worker_eval(browser, "chrome.debugger.getTargets()")
    return targets


async def window_of_tab(browser: Chromium, tab_id: int) -> dict[str, Any]:
    window: dict[str, Any] = await worker_eval(
        browser,
        f"chrome.tabs.get({tab_id}).then(t => chrome.windows.get(t.windowId, {{populate: true}}))"
        ".then(w => ({focused: w.focused, tabs: w.tabs.map(t => t.id)}))",
    )
    return window


async def device_row(http: httpx.AsyncClient, device_id: str = DEVICE_ID) -> dict[str, Any]:
    response = await http.get("/v1/devices")
    assert response.status_code == 200, response.text
    rows = [d for d in response.json()["devices"] if d["deviceId"] == device_id]
    assert rows, f"device {device_id} is not listed"
    row: dict[str, Any] = rows[0]
    return row


async def wait_online(http: httpx.AsyncClient, timeout_s: float = 20) -> dict[str, Any]:
    async def online() -> dict[str, Any] | None:
        row = await device_row(http)
        return row if row["online"] else None

    row: dict[str, Any] = await eventually(online, timeout_s, "the device coming online")
    return row


def unattended(origins: list[str], profile: str) -> dict[str, Any]:
    return {"mode": "unattended", "allowedOrigins": origins, "profileStateKey": profile}


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def wait_status(
    http: httpx.AsyncClient, session_id: str, code: int, timeout_s: float = 15
) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        response = await http.get(f"/v1/sessions/{session_id}")
        return response.json() if response.status_code == code else None

    body: dict[str, Any] = await eventually(reached, timeout_s, f"GET session -> {code}")
    return body
