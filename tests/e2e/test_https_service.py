"""A profile enrolled without anyone at the keyboard reaches an `https://` service.

Enterprise policy writes the enrollment where no click can follow it, so nothing may depend on
the options page's Save asking Chrome for host access. Here the enrollment is written straight
into the extension's storage (what policy does through `chrome.storage.managed`, without the
machine-wide policy folder a test must not touch), the service is the real backend over TLS at
`https://understudy.test`, and the device must come online, its status saying the extension has
host access to the service. Before the manifest granted `https://*/*` at install, the connect
ticket's `fetch` was a CORS request the service does not answer, and the device never connected.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import replace
from typing import TYPE_CHECKING

import httpx
import pytest
import uvicorn

from demo.chromium import launch
from understudy._bootstrap import build_services
from understudy._clock import SystemClock
from understudy._config import load_settings
from understudy.app import create_app

from ._skip import require_chromium
from ._tls import resolver_flags, self_signed
from .conftest import (
    DEVICE_ID,
    EXTENSION_ORIGIN,
    TENANT,
    Backend,
    RecordingApp,
    _free_port,
    eventually,
    panel_request,
    stop_backend,
    wait_online,
    worker_eval,
)

if TYPE_CHECKING:
    from pathlib import Path

require_chromium()
pytestmark = [pytest.mark.browser, pytest.mark.slow]
SERVICE = "https://understudy.test"


async def start_tls_backend(tmp_path: Path, cert: Path, key: Path) -> tuple[Backend, int]:
    port = _free_port()
    env = {
        "UNDERSTUDY_DATA_DIR": str(tmp_path / "data"),
        "UNDERSTUDY_PORT": str(port),
        "UNATTENDED_ENABLED_TENANTS": f'["{TENANT}"]',
    }
    settings = replace(
        load_settings(env), public_url=SERVICE, allowed_socket_origins=frozenset({EXTENSION_ORIGIN})
    )
    services = build_services(settings, SystemClock())
    recorder = RecordingApp(create_app(services))
    config = uvicorn.Config(
        recorder,
        host="127.0.0.1",
        port=port,
        lifespan="on",
        log_level="warning",
        ws="websockets-sansio",
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    return Backend(settings, services, recorder, server, task), port


async def test_an_enrollment_written_without_a_click_connects_to_an_https_service(
    tmp_path: Path, extension_dist: Path
) -> None:
    cert, key = self_signed(tmp_path, "understudy.test")
    backend, port = await start_tls_backend(tmp_path, cert, key)
    browser = await launch(
        tmp_path / "profile", extension_dist, extra=resolver_flags(port, "understudy.test")
    )
    try:
        record = {
            "serviceOrigin": SERVICE,
            "deviceId": DEVICE_ID,
            "credential": backend.enroll(),
            "enabled": True,
            "localOriginPolicy": {"mode": "any"},
        }
        # No options page, no chrome.permissions.request: only storage, as a policy would.
        await worker_eval(
            browser,
            f"chrome.storage.local.set({{enrollment: {json.dumps(record)}}}).then(() => true)",
        )
        async with httpx.AsyncClient(
            base_url=f"https://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {backend.api_key()}"},
            verify=ssl.create_default_context(cafile=str(cert)),
            timeout=15,
        ) as http:
            row = await wait_online(http, timeout_s=30)
        assert row["deviceId"] == DEVICE_ID
        # Granted at install; nothing asked for it.
        granted = await worker_eval(
            browser, f"chrome.permissions.contains({{origins: ['{SERVICE}/*']}})"
        )
        assert granted is True
        tickets = [s for s in backend.recorder.seen if s.path == "/v1/device/connect-ticket"]
        assert tickets and all(s.method == "POST" for s in tickets)  # no CORS preflight needed
        sockets = [s for s in backend.recorder.seen if s.kind == "websocket"]
        assert sockets and sockets[0].headers.get("origin") == EXTENSION_ORIGIN

        async def status_online() -> dict[str, object] | None:
            answer = await panel_request(browser, {"type": "get_status"})
            status: dict[str, object] = answer["status"]
            return status if status["connection"] == "online" else None

        status = await eventually(status_online, 15, "the extension's status turning online")
        assert status["hostPermission"] is True
    finally:
        browser.kill()
        await stop_backend(backend)
