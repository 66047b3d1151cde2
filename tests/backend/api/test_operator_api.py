"""The operator API (/v1/operator/...): enroll, list and revoke devices, create consumer keys and
enable unattended sessions, authenticated by an operator token and by nothing else."""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.backend.conftest import idem, post_create, unattended
from tests.support.simdevice import SimulatedDevice
from tests.support.stored import stored
from understudy import _security

if TYPE_CHECKING:
    from tests.backend.conftest import Backend

DEVICES = "/v1/operator/tenants/acme/devices"


def _problem(response: object, status: int, code: str) -> None:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    assert response.headers["content-type"] == "application/problem+json"  # type: ignore[attr-defined]
    assert response.json()["code"] == code  # type: ignore[attr-defined]


async def test_with_no_operator_token_the_operator_api_is_disabled(backend: Backend) -> None:
    async with backend.client(_security.generate_token("operator")) as http:
        response = await http.get(DEVICES)
    _problem(response, 403, "operator_api_disabled")
    assert "understudy operator-tokens create" in response.json()["detail"]


async def test_an_enrolled_device_gets_its_credential_once_and_can_connect(
    backend: Backend,
) -> None:
    async with backend.client(backend.operator_token()) as http:
        enrolled = await http.post(DEVICES, json={"deviceId": "laptop-1"})
        assert enrolled.status_code == 201, enrolled.text
        body = enrolled.json()
        assert (body["tenant"], body["deviceId"]) == ("acme", "laptop-1")
        credential = body["credential"]
        assert _security.token_kind(credential) == "device"

        device = SimulatedDevice(backend.url, credential)
        backend.devices.append(device)
        assert (await device.connect()).device_id == "laptop-1"
        listed = await http.get(DEVICES)
    assert listed.status_code == 200
    assert listed.json()["tenant"] == "acme"
    [only] = listed.json()["devices"]
    assert (only["deviceId"], only["state"], only["online"]) == ("laptop-1", "online", True)
    assert credential not in listed.text
    kept = stored(backend.settings)
    assert _security.token_digest(credential).encode() in kept  # the scan read its row
    assert credential.encode() not in kept


async def test_enrolling_an_existing_device_is_409_unless_rotated(backend: Backend) -> None:
    async with backend.client(backend.operator_token()) as http:
        first = (await http.post(DEVICES, json={"deviceId": "laptop-1"})).json()["credential"]
        again = await http.post(DEVICES, json={"deviceId": "laptop-1"})
        _problem(again, 409, "device_exists")
        assert "rotate" in again.json()["detail"]
        rotated = await http.post(DEVICES, json={"deviceId": "laptop-1", "rotate": True})
        assert rotated.status_code == 200, rotated.text
        second = rotated.json()["credential"]
    assert second != first
    async with backend.client(first) as old:
        refused = await old.post("/v1/device/connect-ticket", json={"browserEpoch": "x"})
    assert refused.status_code == 401
    device = SimulatedDevice(backend.url, second)
    backend.devices.append(device)
    assert (await device.connect()).device_id == "laptop-1"


async def test_revoking_a_device_closes_its_socket_and_its_id_is_never_reused(
    backend: Backend,
) -> None:
    async with backend.client(backend.operator_token()) as http:
        credential = (await http.post(DEVICES, json={"deviceId": "laptop-1"})).json()["credential"]
        device = SimulatedDevice(backend.url, credential)
        backend.devices.append(device)
        await device.connect()
        revoked = await http.delete(f"{DEVICES}/laptop-1")
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["state"] == "revoked"
        assert "revokedAt" in revoked.json()
        # Closed by the revoke itself, not by the once-a-second watch of other processes.
        assert device._socket is not None
        await asyncio.wait_for(device._socket.wait_closed(), 0.5)
        assert device._socket.close_code == 4410
        assert (await http.delete(f"{DEVICES}/laptop-1")).status_code == 200  # idempotent
        _problem(await http.delete(f"{DEVICES}/laptop-9"), 404, "device_not_found")
        reused = await http.post(DEVICES, json={"deviceId": "laptop-1", "rotate": True})
        _problem(reused, 409, "device_exists")
        listed = await http.get(DEVICES)
    assert [d["state"] for d in listed.json()["devices"]] == ["revoked"]


async def test_an_api_key_created_by_the_operator_works_for_its_tenant(backend: Backend) -> None:
    async with backend.client(backend.operator_token()) as http:
        await http.post(DEVICES, json={"deviceId": "laptop-1"})
        created = await http.post("/v1/operator/tenants/acme/api-keys", json={"actor": "bot"})
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["tenant"], body["actor"]) == ("acme", "bot")
    assert body["keyId"].startswith("key_")
    key = body["apiKey"]
    digest = hashlib.sha256(key.encode()).hexdigest()
    kept = stored(backend.settings)
    assert digest.encode() in kept
    assert key.encode() not in kept
    async with backend.client(key) as consumer:
        listed = await consumer.get("/v1/devices")
    assert [d["deviceId"] for d in listed.json()["devices"]] == ["laptop-1"]


async def test_the_tenant_flag_enables_unattended_sessions_alongside_the_setting(
    backend: Backend,
) -> None:
    await backend.device(tenant="initech")  # initech is not in UNATTENDED_ENABLED_TENANTS
    settings = "/v1/operator/tenants/initech/settings"
    async with backend.client(backend.api_key("initech")) as consumer:
        before = await consumer.post("/v1/sessions", json=unattended(), headers=idem())
        _problem(before, 403, "unattended_disabled")
        async with backend.client(backend.operator_token()) as http:
            on = await http.put(settings, json={"unattendedEnabled": True})
            assert on.json() == {
                "tenant": "initech",
                "unattendedEnabled": True,
                "unattendedFlag": True,
                "unattendedBySetting": False,
            }
            created = await post_create(backend, consumer, unattended())
            assert created.status_code == 201, created.text
            off = await http.put(settings, json={"unattendedEnabled": False})
            assert off.json()["unattendedEnabled"] is False
            # The setting cannot be turned off from the API, and the answer says so.
            acme = await http.put(
                "/v1/operator/tenants/acme/settings", json={"unattendedEnabled": False}
            )
        after = await consumer.post(
            "/v1/sessions", json=unattended(profile="profile-b"), headers=idem()
        )
    _problem(after, 403, "unattended_disabled")
    assert acme.json()["unattendedEnabled"] is True
    assert acme.json()["unattendedBySetting"] is True


@pytest.mark.parametrize(
    "credential",
    ["consumer", "device", "unknown_operator", "malformed", "none"],
)
async def test_only_an_operator_token_is_accepted(backend: Backend, credential: str) -> None:
    backend.operator_token()  # the API is on
    token = {
        "consumer": backend.api_key(),
        "device": backend.enroll(),
        "unknown_operator": _security.generate_token("operator"),
        "malformed": "uop_short",
        "none": "",
    }[credential]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=backend.url, headers=headers) as http:
        for response in (
            await http.get(DEVICES),
            await http.post(DEVICES, json={"deviceId": "laptop-2"}),
            await http.delete(f"{DEVICES}/laptop-1"),
            await http.post("/v1/operator/tenants/acme/api-keys", json={"actor": "bot"}),
            await http.put("/v1/operator/tenants/acme/settings", json={"unattendedEnabled": True}),
        ):
            _problem(response, 401, "unauthorized")
    async with backend.client(backend.operator_token()) as http:
        listed = await http.get(DEVICES)
    assert [d["deviceId"] for d in listed.json()["devices"]] == ["laptop-1"]


async def test_an_operator_token_is_no_consumer_key(backend: Backend) -> None:
    async with backend.client(backend.operator_token()) as http:
        _problem(await http.get("/v1/devices"), 401, "unauthorized")


async def test_a_revoked_operator_token_is_refused(backend: Backend) -> None:
    backend.operator_token("other")  # keeps the API on
    token = backend.operator_token()
    with backend.services.db.transaction():
        backend.services.db.execute("UPDATE operator_tokens SET revoked_at = 1 WHERE name = 'ops'")
    async with backend.client(token) as http:
        _problem(await http.get(DEVICES), 401, "unauthorized")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", DEVICES, {"deviceId": "Laptop 1"}),
        ("POST", DEVICES, {"deviceId": "laptop-1", "rotate": "yes"}),
        ("POST", DEVICES, {"deviceId": "laptop-1", "extra": 1}),
        ("POST", DEVICES, None),
        ("POST", "/v1/operator/tenants/Acme/devices", {"deviceId": "laptop-1"}),
        ("GET", "/v1/operator/tenants/-acme/devices", None),
        ("DELETE", f"{DEVICES}/Laptop_1", None),
        ("POST", "/v1/operator/tenants/acme/api-keys", {"actor": ""}),
        ("POST", "/v1/operator/tenants/acme/api-keys", {}),
        ("PUT", "/v1/operator/tenants/acme/settings", {"unattendedEnabled": 1}),
    ],
)
async def test_bad_input_is_400_invalid_request(
    backend: Backend, method: str, path: str, body: object
) -> None:
    async with backend.client(backend.operator_token()) as http:
        response = await http.request(method, path, json=body)
    _problem(response, 400, "invalid_request")
