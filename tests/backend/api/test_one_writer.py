"""One serving process per data directory, and a device whose socket closes is offline at once."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.backend.conftest import Backend, free_port, post_create, start_backend, unattended
from understudy._lock import DataDirInUseError

if TYPE_CHECKING:
    from pathlib import Path

START_S = 60.0  # importing the app costs seconds of CPU on a shared machine


def _env(data_dir: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNDERSTUDY_")}
    return env | {"UNDERSTUDY_DATA_DIR": str(data_dir), "UNDERSTUDY_PORT": str(port)}


async def _serve(data_dir: Path, port: int) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "understudy.cli",
        "serve",
        env=_env(data_dir, port),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def _ready(process: asyncio.subprocess.Process, port: int) -> None:
    deadline = time.monotonic() + START_S
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=2) as http:
        while time.monotonic() < deadline:
            assert process.returncode is None, "the server exited at start-up"
            try:
                if (await http.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("the server was not ready in time")


async def _end(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.kill()
    await process.communicate()


async def test_a_second_serve_on_one_data_dir_refuses_and_names_the_holder(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    first_port, second_port = free_port(), free_port()
    first = await _serve(data_dir, first_port)
    try:
        await _ready(first, first_port)
        second = await _serve(data_dir, second_port)
        out, err = await asyncio.wait_for(second.communicate(), START_S)
        assert second.returncode == 2
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1, lines
        assert f"pid {first.pid} on host {socket.gethostname()}" in lines[0]
        assert str(data_dir) in lines[0]
        assert "serving on" not in out.decode()
        # The first one still serves, alone.
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{first_port}") as http:
            assert (await http.get("/readyz")).status_code == 200

        # A holder killed with SIGKILL leaves no lock behind: the next one starts.
        first.send_signal(signal.SIGKILL)
        await first.communicate()
        third = await _serve(data_dir, second_port)
        try:
            await _ready(third, second_port)
        finally:
            await _end(third)
    finally:
        await _end(first)


async def test_a_second_service_in_one_process_is_refused_too(backend: Backend) -> None:
    data_dir = backend.settings.data_dir
    with pytest.raises(DataDirInUseError, match=f"pid {os.getpid()} on host"):
        await start_backend(data_dir.parent)


async def test_a_device_whose_socket_closes_is_offline_at_once(backend: Backend) -> None:
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        created = await post_create(backend, http, unattended())
        assert created.status_code == 201, created.text
        session_id = created.json()["sessionId"]

        await device.disconnect()
        # No time passes on the manual clock: the closed socket alone does it.
        await backend.until(lambda: backend.session_status(session_id) == "recovering", "offline")
        listed = (await http.get("/v1/devices")).json()["devices"]
        assert [(d["deviceId"], d["online"]) for d in listed] == [("laptop-1", False)]
        session = (await http.get(f"/v1/sessions/{session_id}")).json()
        assert session["status"] == "recovering"
        # Nothing new is provisioned on a device that cannot hear it.
        refused = await http.post(
            "/v1/sessions",
            json=unattended(profile="profile-b", origins=["https://other.example"]),
            headers={"Idempotency-Key": "6b1d8f0e-3c2a-4e5b-9a7c-1d2e3f405162"},
        )
        assert refused.status_code == 503, refused.text
        assert refused.json()["code"] == "no_device_available"

        await device.connect()  # back within the grace: the session recovers
        await backend.until(lambda: backend.session_status(session_id) == "connected", "back")
        listed = (await http.get("/v1/devices")).json()["devices"]
        assert listed[0]["online"] is True
        session = (await http.get(f"/v1/sessions/{session_id}")).json()
        assert session["status"] == "connected"
    offline = [
        e["reason"] for e in backend.services.telemetry.events if e["event"] == "device.offline"
    ]
    assert offline == ["socket_closed"]
