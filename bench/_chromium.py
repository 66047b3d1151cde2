"""A real Chromium device for the benchmarks: the built extension, enrolled, on a bench server.

:func:`chromium_rig` builds the extension if a source changed (``demo.__main__``), starts a local
page on 127.0.0.1, an `understudy serve` subprocess (``bench._server``) with one device enrolled
through ``DEVICE_TOKENS``, and a headless Debian Chromium with the unpacked extension
(``demo.chromium``: the same flags and the same enrollment record as the main job), then waits
until the device is online. Everything it started is stopped on the way out, on error too:
Chromium is SIGKILLed as a process group, the server gets SIGTERM (SIGKILL after 30 s).

:func:`plain_chromium` launches a second browser with the same flags minus the extension, for a
client that drives Chromium directly (Playwright over CDP): a DevTools client attached to the
device's browser would change how it behaves (docs: ARCHITECTURE, Extension).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, Protocol

from bench._server import Server, new_devices
from demo.__main__ import EXTENSION_ID
from demo.build import DIST, build_extension
from demo.cdp import DevTools
from demo.chromium import (
    CHROMIUM,
    LAUNCH_TIMEOUT_S,
    Chromium,
    _devtools_port,
    enroll,
    flags,
    launch,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from bench._http import HttpConnection, Reply

EXTENSION_ORIGIN: Final = f"chrome-extension://{EXTENSION_ID}"
PAGE_PATH: Final = "/page"
PAGE_TITLE: Final = "Bench page"
BUTTON_NAME: Final = "Press"
TEXTBOX_NAME: Final = "Text"
COUNTER_PREFIX: Final = "Presses: "
_EXTENSION_FLAGS: Final = ("--load-extension=", "--disable-extensions-except=")
ONLINE_TIMEOUT_S: Final = 30.0
SESSION_TIMEOUT_S: Final = 30.0
POLL_S: Final = 0.02

# One button that counts its presses into a heading, one text field: click and type act on them
# and the snapshot shows what they did. The title never changes, so navigation is the same work.
PAGE: Final = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{PAGE_TITLE}</title></head>
<body><main>
<h1 id="count">{COUNTER_PREFIX}0</h1>
<button id="press" type="button">{BUTTON_NAME}</button>
<label>{TEXTBOX_NAME} <input id="text" autocomplete="off"></label>
</main>
<script>
let presses = 0;
document.getElementById("press").addEventListener("click", () => {{
  presses += 1;
  document.getElementById("count").textContent = "{COUNTER_PREFIX}" + presses;
}});
</script></body></html>
"""


class Served(Protocol):
    """Pages on one local origin that the rig's device and sessions may use."""

    @property
    def origin(self) -> str: ...

    @property
    def url(self) -> str: ...

    def close(self) -> None: ...


class LocalPage:
    """The bench page served on 127.0.0.1 (a port of its own) from a thread of this process."""

    def __init__(self) -> None:
        body = PAGE.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = self.path == PAGE_PATH
                data = body if found else b"not found"
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args  # quiet

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.origin}{PAGE_PATH}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


@dataclass
class Rig:
    """A bench server with one real Chromium device online, and the page its sessions may use."""

    server: Server
    browser: Chromium
    page: Served
    device_id: str
    profile_root: Path

    async def device(self, connection: HttpConnection) -> dict[str, Any]:
        """This rig's row of ``GET /v1/devices`` (online, capacity, usedCapacity, ...)."""
        reply = await connection.request("GET", "/v1/devices")
        _expect(reply, 200, "GET /v1/devices")
        for row in reply.json()["devices"]:
            if row["deviceId"] == self.device_id:
                found: dict[str, Any] = row
                return found
        raise RuntimeError(f"device {self.device_id} is not listed by GET /v1/devices")

    async def create_session(
        self, connection: HttpConnection, profile_key: str | None = None
    ) -> tuple[str, Reply]:
        """``POST /v1/sessions`` (unattended, one Idempotency-Key) until the session is connected.

        Returns the session id and the first reply; a ``202`` is polled (``Location``) until
        the session is ``connected``.
        """
        body = {
            "mode": "unattended",
            "deviceId": self.device_id,
            "allowedOrigins": [self.page.origin],
            "profileStateKey": profile_key or f"bench-{uuid.uuid4().hex[:12]}",
        }
        reply = await connection.post_json(
            "/v1/sessions", body, {"Idempotency-Key": str(uuid.uuid4())}
        )
        if reply.status not in (201, 202):
            _expect(reply, 201, "POST /v1/sessions")
        session_id: str = reply.json()["sessionId"]
        if reply.status == 202:
            await self._until(connection, f"/v1/sessions/{session_id}", _connected, "connected")
        return session_id, reply

    async def end_session(self, connection: HttpConnection, session_id: str) -> None:
        """``DELETE`` the session, then wait until the device's capacity is free again."""
        reply = await connection.request("DELETE", f"/v1/sessions/{session_id}")
        if reply.status not in (200, 202):
            _expect(reply, 202, f"DELETE /v1/sessions/{session_id}")
        deadline = time.monotonic() + SESSION_TIMEOUT_S
        while (await self.device(connection))["usedCapacity"] != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the device kept session {session_id}'s capacity")
            await asyncio.sleep(POLL_S)

    async def _until(
        self,
        connection: HttpConnection,
        path: str,
        done: Callable[[Reply], bool],
        what: str,
    ) -> Reply:
        deadline = time.monotonic() + SESSION_TIMEOUT_S
        while True:
            reply = await connection.request("GET", path)
            if done(reply):
                return reply
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path} not {what} after {SESSION_TIMEOUT_S:.0f} s")
            await asyncio.sleep(POLL_S)


def _connected(reply: Reply) -> bool:
    return reply.status == 200 and reply.json().get("status") == "connected"


def _expect(reply: Reply, status: int, what: str) -> None:
    if reply.status != status:
        raise RuntimeError(f"{what} answered {reply.status}: {reply.body[:300]!r}")


def require_chromium() -> None:
    if not CHROMIUM.exists():
        raise RuntimeError(
            f"{CHROMIUM} is missing: run scripts/bootstrap (as root it installs Debian's chromium)"
        )


@contextlib.asynccontextmanager
async def chromium_rig(
    data_dir: Path,
    log: Callable[[str], None],
    pages: Callable[[], Served] = LocalPage,
    *,
    wiretap: bool = False,
) -> AsyncIterator[Rig]:
    """A server, local pages (the bench page by default) and one enrolled headless Chromium.

    Everything is stopped afterwards; the device's local policy and the sessions allow the
    origin of `pages` only. `wiretap` starts the server under ``bench._wiretap_serve``.
    """
    require_chromium()
    log(f"chromium: extension {await asyncio.to_thread(build_extension)}")
    devices = new_devices(1, prefix="chromium")
    device_id, credential = next(iter(devices.items()))
    async with contextlib.AsyncExitStack() as stack:
        page = pages()
        stack.callback(page.close)
        server = Server(data_dir / "server", devices=devices, wiretap=wiretap)
        stack.push_async_callback(server.stop)
        await server.start()
        profile_root = data_dir / "chromium"
        browser = await launch(profile_root / "device", DIST)
        stack.callback(browser.kill)
        await enroll(
            browser,
            EXTENSION_ORIGIN,
            {
                "serviceOrigin": server.base_url,
                "deviceId": device_id,
                "credential": credential,
                "enabled": True,
                "localOriginPolicy": {"mode": "allowlist", "origins": [page.origin]},
            },
        )
        rig = Rig(server, browser, page, device_id, profile_root)
        connection = server.connection()
        try:
            deadline = time.monotonic() + ONLINE_TIMEOUT_S
            while not (await rig.device(connection))["online"]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the extension did not connect in {ONLINE_TIMEOUT_S:.0f} s")
                await asyncio.sleep(0.1)
        finally:
            await connection.close()
        log(f"chromium: device online ({CHROMIUM}, headless, server {server.base_url})")
        yield rig


@contextlib.asynccontextmanager
async def plain_chromium(profile: Path) -> AsyncIterator[Chromium]:
    """A second headless Chromium with the device's flags minus the extension; killed afterwards.

    Without the extension: Playwright's ``connect_over_cdp`` attaches to every target, and with
    an extension service worker starting up it sometimes never returned (30 s timeout here; see
    microsoft/playwright#35928). A direct Playwright user has no extension either.
    """
    require_chromium()
    process, log = _spawn_plain(profile)
    try:
        deadline = time.monotonic() + LAUNCH_TIMEOUT_S
        while (port := _devtools_port(profile)) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Chromium did not open DevTools; see {log}")
            await asyncio.sleep(0.05)
        yield Chromium(profile, process, DevTools(port), log)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _spawn_plain(profile: Path) -> tuple[subprocess.Popen[bytes], Path]:
    profile.mkdir(parents=True, exist_ok=True)
    argv = [f for f in flags(profile, DIST) if not f.startswith(_EXTENSION_FLAGS)]
    log = profile.parent / f"{profile.name}-chromium.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(  # noqa: S603 - our Chromium, fixed flags
            [str(CHROMIUM), *argv, "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so one killpg reaches every helper
        )
    return process, log
