"""Revocations by the operator CLI, in another process on the same data directory, take effect
in the running service within seconds: sockets close, waiting requests end."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from typing import Any

import httpx

from tests.backend.conftest import Backend, idem, post_create, unattended
from tests.support.simdevice import Behaviour
from understudy import _security
from understudy.generated import models as m

WITHIN_S = 5.0  # the runbook promises about a second; the margin is for a loaded machine


async def _cli(backend: Backend, *args: str) -> str:
    """Run `understudy …` in its own process against the backend's data directory (and its
    PostgreSQL database, when it has one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNDERSTUDY_")}
    env["UNDERSTUDY_DATA_DIR"] = str(backend.settings.data_dir)
    if backend.settings.database_url is not None:
        env["UNDERSTUDY_DATABASE_URL"] = backend.settings.database_url
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "understudy.cli",
        *args,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


def _key(backend: Backend) -> tuple[str, str]:
    token = _security.generate_token("consumer")
    key_id = f"key_{uuid.uuid4().hex[:12]}"
    with backend.services.storage.transaction() as tx:
        tx.api_keys.add(
            digest=_security.token_digest(token),
            key_id=key_id,
            tenant="acme",
            actor="bot",
            now=backend.clock.now(),
        )
    return key_id, token


def _revoked_closes(backend: Backend) -> list[Any]:
    return [
        event["kind"]
        for event in backend.services.telemetry.events
        if event["event"] == "connection.closed" and event["reason"] == "revoked"
    ]


async def test_revoking_a_device_closes_its_device_and_session_sockets(backend: Backend) -> None:
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        created = await post_create(backend, http, unattended())
        assert created.status_code == 201, created.text
        session_id = created.json()["sessionId"]
        lease = next(iter(device.leases.values()))
        await device.wait_for(lambda: lease.session_frames)  # the session socket is up

        await _cli(backend, "devices", "revoke", "--tenant", "acme", "--device", "laptop-1")
        await asyncio.wait_for(device._socket.wait_closed(), WITHIN_S)
        await asyncio.wait_for(lease.session_socket.wait_closed(), WITHIN_S)
        assert device._socket.close_code == 4410
        assert lease.session_socket.close_code == 4410
        assert sorted(_revoked_closes(backend)) == ["device", "session"]

        # No write reaches the revoked device any more, and it cannot come back.
        write = {"commandId": str(uuid.uuid4()), "command": {"name": "click", "ref": "g1e1"}}
        response = await http.post(f"/v1/sessions/{session_id}/commands", json=write)
        assert response.status_code == 503, response.text
        assert device.executions == {}
        async with httpx.AsyncClient(base_url=backend.url) as extension:
            refused = await extension.post(
                "/v1/device/connect-ticket",
                json={"browserEpoch": device.browser_epoch},
                headers={"Authorization": f"Bearer {device.credential}"},
            )
        assert refused.status_code == 401
        listed = (await http.get("/v1/devices")).json()["devices"]
        assert listed == []


async def test_revoking_a_key_ends_its_waiting_requests_with_401(backend: Backend) -> None:
    device = await backend.device(behaviour=Behaviour(read="silent"))
    key_id, key = _key(backend)
    async with backend.client(key) as http:
        created = await post_create(backend, http, unattended())
        assert created.status_code == 201, created.text
        session_id = created.json()["sessionId"]
        second = await backend.device("acme", "laptop-2", behaviour=Behaviour(provision="silent"))

        read = {"commandId": str(uuid.uuid4()), "command": {"name": "snapshot"}}
        waiting_read = asyncio.ensure_future(
            http.post(f"/v1/sessions/{session_id}/commands", json=read)
        )
        waiting_create = asyncio.ensure_future(
            http.post("/v1/sessions", json=unattended(profile="profile-b"), headers=idem())
        )
        # Both wait on the manual clock: the read reached the device, the create its provision.
        lease = next(iter(device.leases.values()))
        await device.wait_for(
            lambda: [f for f in lease.session_frames if isinstance(f, m.SessionServerRead)]
        )
        await second.wait_for(lambda: second.frames_of(m.DeviceServerProvision))
        assert not waiting_read.done() and not waiting_create.done()  # the manual clock stands

        await _cli(backend, "keys", "revoke", key_id)
        for waiting in (waiting_read, waiting_create):
            response = await asyncio.wait_for(waiting, WITHIN_S)
            assert response.status_code == 401, response.text
            assert response.json()["code"] == "unauthorized"
            assert "revoked while this request waited" in response.json()["detail"]
        assert (await http.get("/v1/devices")).status_code == 401

    # The command it started keeps its durable state: another key of the tenant reads it.
    async with backend.client(backend.api_key()) as other:
        polled = await other.get(f"/v1/sessions/{session_id}/commands/{read['commandId']}")
        assert polled.status_code == 202, polled.text
