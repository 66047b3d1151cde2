"""Named scenarios for every documented status fuzzing cannot reach against a healthy device.

Each one drives a real backend with a simulated device's `Behaviour` knobs, quotas and the manual
clock (as tests/backend/api does), and every response is judged by the spec through
`Scenario.conforms`, which also records it for the coverage test.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from schemathesis.core import NOT_SET

from tests.backend.conftest import post_create
from tests.contract._ledger import LEDGER
from tests.contract._scenario import Scenario, command, unattended
from tests.support.simdevice import ALL_CAPABILITIES, Behaviour
from understudy import _security
from understudy._bootstrap import build_services
from understudy._clock import ManualClock
from understudy._config import load_settings
from understudy._store._migrations import LATEST
from understudy.generated import models as m
from understudy.http import create_app

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.simdevice import SimulatedDevice


def _idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def _connected(
    s: Scenario, http: httpx.AsyncClient, behaviour: Behaviour | None = None
) -> tuple[SimulatedDevice, str]:
    device = await s.device(behaviour=behaviour)
    body = unattended()
    created = await post_create(s.backend, http, body)
    s.conforms("createSession", created, 201, body=body)
    session_id: str = created.json()["sessionId"]
    if device.behaviour.open_session_sockets:
        lease = next(iter(device.leases.values()))
        await device.wait_for(lambda: lease.session_frames)
    return device, session_id


# -- createSession ---------------------------------------------------------------------------------


async def test_create_replay_is_200_and_another_body_under_the_key_is_409(
    scenario: Scenario,
) -> None:
    await scenario.device()
    async with scenario.client() as http:
        key, body = _idem(), unattended()
        first = await http.post("/v1/sessions", json=body, headers=key)
        scenario.conforms("createSession", first, 201, body=body)
        again = await http.post("/v1/sessions", json=body, headers=key)
        scenario.conforms("createSession", again, 200, body=body)
        assert again.json()["sessionId"] == first.json()["sessionId"]
        other = unattended(profile="another-profile")
        conflict = await http.post("/v1/sessions", json=other, headers=key)
        scenario.conforms("createSession", conflict, 409, "idempotency_conflict", body=other)


async def test_slow_provisioning_is_202_with_location_and_retry_after(scenario: Scenario) -> None:
    await scenario.device(behaviour=Behaviour(provision="silent"))
    async with scenario.client() as http:
        body = unattended()
        pending = await scenario.later(http.post("/v1/sessions", json=body, headers=_idem()), 5)
        scenario.conforms("createSession", pending, 202, body=body)
        session_id = pending.json()["sessionId"]
        polled = await http.get(pending.headers["location"])
        scenario.conforms("getSession", polled, 200, path={"sessionId": session_id})
        assert polled.json()["status"] == "provisioning"


async def test_a_tenant_not_enabled_for_unattended_gets_403(scenario: Scenario) -> None:
    scenario.tenant = "initech"  # not in UNATTENDED_ENABLED_TENANTS
    await scenario.device()
    async with scenario.client() as http:
        body = unattended()
        refused = await http.post("/v1/sessions", json=body, headers=_idem())
        scenario.conforms("createSession", refused, 403, "unattended_disabled", body=body)


async def test_overlapping_origins_and_profiles_are_409_and_a_full_device_429(
    scenario: Scenario,
) -> None:
    await scenario.device()
    async with scenario.client() as http:
        first = unattended(["https://a.example"], "profile-a")
        scenario.conforms(
            "createSession", await http.post("/v1/sessions", json=first, headers=_idem()), 201
        )
        same_origin = unattended(["https://a.example"], "profile-b")
        response = await http.post("/v1/sessions", json=same_origin, headers=_idem())
        scenario.conforms("createSession", response, 409, "origin_conflict", body=same_origin)
        same_profile = unattended(["https://b.example"], "profile-a")
        response = await http.post("/v1/sessions", json=same_profile, headers=_idem())
        scenario.conforms("createSession", response, 409, "profile_conflict", body=same_profile)
        second = unattended(["https://b.example"], "profile-b")
        scenario.conforms(
            "createSession", await http.post("/v1/sessions", json=second, headers=_idem()), 201
        )
        third = unattended(["https://c.example"], "profile-c")
        full = await http.post("/v1/sessions", json=third, headers=_idem())
        scenario.conforms("createSession", full, 429, "capacity_exhausted", body=third)


@pytest.mark.parametrize("scenario", [{"session_creates_per_actor_per_min": 1}], indirect=True)
async def test_creating_too_fast_is_429_rate_limited(scenario: Scenario) -> None:
    await scenario.device()
    async with scenario.client() as http:
        body = unattended()
        scenario.conforms(
            "createSession", await http.post("/v1/sessions", json=body, headers=_idem()), 201
        )
        other = unattended(["https://b.example"], "profile-b")
        limited = await http.post("/v1/sessions", json=other, headers=_idem())
        scenario.conforms("createSession", limited, 429, "rate_limited", body=other)


async def test_no_device_online_is_503_with_retry_after(scenario: Scenario) -> None:
    await scenario.device(connect=False)
    async with scenario.client() as http:
        body = unattended()
        refused = await http.post("/v1/sessions", json=body, headers=_idem())
        scenario.conforms("createSession", refused, 503, "no_device_available", body=body)


async def test_a_deleted_session_reads_as_its_tombstone(scenario: Scenario) -> None:
    async with scenario.client() as http:
        device, session_id = await _connected(scenario, http, Behaviour(close="silent"))
        path = {"sessionId": session_id}
        closing = await http.delete(f"/v1/sessions/{session_id}")
        scenario.conforms("deleteSession", closing, 202, path=path)
        assert closing.json()["status"] == "closing"
        # The session is closing until the extension acknowledges the fenced close.
        closing_read = await http.get(f"/v1/sessions/{session_id}")
        scenario.conforms("getSession", closing_read, 200, path=path)
        await device.wait_for(lambda: device.frames_of(m.DeviceServerClose))
        close = device.frames_of(m.DeviceServerClose)[0]
        await device.send_frame(
            m.DeviceClientCloseAck(
                type="close_ack", lease_id=close.lease_id, lease_epoch=close.lease_epoch
            )
        )
        await scenario.backend.settle()
        tombstone = await http.get(f"/v1/sessions/{session_id}")
        scenario.conforms("getSession", tombstone, 410, path=path)
        assert tombstone.json()["reason"] == "deleted"
        again = await http.delete(f"/v1/sessions/{session_id}")
        scenario.conforms("deleteSession", again, 200, path=path)


# -- submitCommand and pollCommand -----------------------------------------------------------------


async def test_a_command_id_replays_its_outcome_and_refuses_another_request(
    scenario: Scenario,
) -> None:
    async with scenario.client() as http:
        device, session_id = await _connected(scenario, http)
        url, path = f"/v1/sessions/{session_id}/commands", {"sessionId": session_id}
        body = command({"name": "click", "ref": "g1e1"})
        done = await http.post(url, json=body)
        scenario.conforms("submitCommand", done, 200, path=path, body=body)
        replay = await http.post(url, json=body)
        scenario.conforms("submitCommand", replay, 200, path=path, body=body)
        assert replay.json() == done.json()
        assert device.executions == {body["commandId"]: 1}
        other = {**body, "dryRun": True}
        conflict = await http.post(url, json=other)
        scenario.conforms(
            "submitCommand", conflict, 409, "command_id_conflict", path=path, body=other
        )


async def test_granted_work_past_20s_is_202_then_unknown_and_blocks_writes(
    scenario: Scenario,
) -> None:
    async with scenario.client() as http:
        _, session_id = await _connected(scenario, http, Behaviour(execute="hold_result"))
        url, path = f"/v1/sessions/{session_id}/commands", {"sessionId": session_id}
        body = command({"name": "navigate", "url": "https://example.com/next"})
        pending = await scenario.later(http.post(url, json=body), 20)
        scenario.conforms("submitCommand", pending, 202, path=path, body=body)
        poll_path = {**path, "commandId": body["commandId"]}
        polled = await http.get(pending.headers["location"])
        scenario.conforms("pollCommand", polled, 202, path=poll_path)
        await scenario.backend.clock.advance(5)
        await scenario.backend.settle()
        unknown = await http.get(f"{url}/{body['commandId']}")
        scenario.conforms("pollCommand", unknown, 409, "command_outcome_unknown", path=poll_path)
        resent = await http.post(url, json=body)
        scenario.conforms(
            "submitCommand", resent, 409, "command_outcome_unknown", path=path, body=body
        )
        write = command({"name": "reload"})
        blocked = await http.post(url, json=write)
        scenario.conforms("submitCommand", blocked, 409, "writes_blocked", path=path, body=write)


async def test_a_write_not_ready_in_5s_is_504_not_started(scenario: Scenario) -> None:
    async with scenario.client() as http:
        _, session_id = await _connected(scenario, http, Behaviour(ready="silent"))
        url, path = f"/v1/sessions/{session_id}/commands", {"sessionId": session_id}
        body = command({"name": "type", "ref": "g1e2", "text": "hello"})
        response = await scenario.later(http.post(url, json=body), 5)
        scenario.conforms(
            "submitCommand", response, 504, "command_not_started", path=path, body=body
        )
        polled = await http.get(f"{url}/{body['commandId']}")
        scenario.conforms(
            "pollCommand",
            polled,
            504,
            "command_not_started",
            path={**path, "commandId": body["commandId"]},
        )


async def test_a_read_past_its_deadline_is_504_timed_out(scenario: Scenario) -> None:
    async with scenario.client() as http:
        _, session_id = await _connected(scenario, http, Behaviour(read="silent"))
        url, path = f"/v1/sessions/{session_id}/commands", {"sessionId": session_id}
        body = command({"name": "snapshot"})
        response = await scenario.later(http.post(url, json=body), 20)
        scenario.conforms("submitCommand", response, 504, "command_timed_out", path=path, body=body)
        polled = await http.get(f"{url}/{body['commandId']}")
        scenario.conforms(
            "pollCommand",
            polled,
            504,
            "command_timed_out",
            path={**path, "commandId": body["commandId"]},
        )


async def test_a_second_command_while_one_owns_the_slot_is_429_busy(scenario: Scenario) -> None:
    async with scenario.client() as http:
        _, session_id = await _connected(scenario, http, Behaviour(read="silent"))
        url, path = f"/v1/sessions/{session_id}/commands", {"sessionId": session_id}
        first = command({"name": "hello"})
        owner = asyncio.ensure_future(http.post(url, json=first))
        await scenario.backend.settle()
        second = command({"name": "get_tabs"})
        busy = await http.post(url, json=second)
        scenario.conforms("submitCommand", busy, 429, "session_busy", path=path, body=second)
        await scenario.backend.clock.advance(20)
        scenario.conforms(
            "submitCommand", await owner, 504, "command_timed_out", path=path, body=first
        )


@pytest.mark.parametrize("scenario", [{"commands_per_session_per_min": 1}], indirect=True)
async def test_a_command_over_quota_is_429_rate_limited(scenario: Scenario) -> None:
    async with scenario.client() as http:
        _, session_id = await _connected(scenario, http)
        url, path = f"/v1/sessions/{session_id}/commands", {"sessionId": session_id}
        body = command({"name": "hello"})
        scenario.conforms(
            "submitCommand", await http.post(url, json=body), 200, path=path, body=body
        )
        over = command({"name": "hello"})
        limited = await http.post(url, json=over)
        scenario.conforms("submitCommand", limited, 429, "rate_limited", path=path, body=over)


async def test_an_extension_without_safe_writes_gets_426_for_writes(scenario: Scenario) -> None:
    caps = [c for c in ALL_CAPABILITIES if c != "safe_write_v2"]
    device = await scenario.device(behaviour=Behaviour(capabilities=caps))
    async with scenario.client() as http:
        created = await http.post("/v1/sessions")
        scenario.conforms("createSession", created, 200)
        session_id = created.json()["sessionId"]
        await device.attach(session_id)
        await scenario.backend.settle()
        url, path = f"/v1/sessions/{session_id}/commands", {"sessionId": session_id}
        body = command({"name": "reload"})
        refused = await http.post(url, json=body)
        scenario.conforms(
            "submitCommand", refused, 426, "protocol_upgrade_required", path=path, body=body
        )


async def test_no_session_socket_is_503_and_a_deleted_session_410(scenario: Scenario) -> None:
    async with scenario.client() as http:
        _, session_id = await _connected(scenario, http, Behaviour(open_session_sockets=False))
        url, path = f"/v1/sessions/{session_id}/commands", {"sessionId": session_id}
        body = command({"name": "hello"})
        down = await http.post(url, json=body)
        scenario.conforms("submitCommand", down, 503, "session_unavailable", path=path, body=body)
        await http.delete(f"/v1/sessions/{session_id}")
        late = command({"name": "hello"})
        gone = await http.post(url, json=late)
        scenario.conforms("submitCommand", gone, 410, "session_terminal", path=path, body=late)


# -- device and operations -------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", [{"device_tickets_per_device_per_min": 1}], indirect=True)
async def test_too_many_connect_tickets_is_429_rate_limited(scenario: Scenario) -> None:
    device = await scenario.device()  # connecting took the one ticket of this minute
    body = {"browserEpoch": device.browser_epoch}
    async with httpx.AsyncClient(base_url=scenario.backend.url) as http:
        limited = await http.post(
            "/v1/device/connect-ticket",
            json=body,
            headers={"Authorization": f"Bearer {device.credential}"},
        )
    scenario.conforms("createConnectTicket", limited, 429, "rate_limited", body=body)


async def test_readyz_is_503_until_the_services_have_started(
    scenario: Scenario, tmp_path: Path
) -> None:
    settings = load_settings({"UNDERSTUDY_DATA_DIR": str(tmp_path / "cold")})
    services = build_services(settings, ManualClock())
    try:
        # No lifespan: the app is up but its services have not started, as during start-up.
        transport = httpx.ASGITransport(app=create_app(services))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://cold") as http:
            starting = await http.get("/readyz")
        scenario.conforms("readyz", starting, 503, "not_ready")
    finally:
        services.db.close()


async def test_readyz_is_503_when_the_database_cannot_answer_or_is_behind_this_build(
    scenario: Scenario, tmp_path: Path
) -> None:
    settings = load_settings({"UNDERSTUDY_DATA_DIR": str(tmp_path / "ready")})
    services = build_services(settings, ManualClock())
    await services.start()
    try:
        transport = httpx.ASGITransport(app=create_app(services))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://ready") as http:
            assert (await http.get("/readyz")).status_code == 200
            services.db.execute("DELETE FROM schema_migrations WHERE version = ?", (LATEST,))
            behind = await http.get("/readyz")
            scenario.conforms("readyz", behind, 503, "schema_not_current")
            services.db.close()  # the database no longer answers
            gone = await http.get("/readyz")
            scenario.conforms("readyz", gone, 503, "database_unavailable")
    finally:
        await services.stop()


# -- operator --------------------------------------------------------------------------------------

OPERATOR_TENANT = "synthetic-users"
_DEVICES = f"/v1/operator/tenants/{OPERATOR_TENANT}/devices"
_KEYS = f"/v1/operator/tenants/{OPERATOR_TENANT}/api-keys"
_SETTINGS = f"/v1/operator/tenants/{OPERATOR_TENANT}/settings"
_TENANT_PATH = {"tenant": OPERATOR_TENANT}
_DEVICE_PATH = {**_TENANT_PATH, "deviceId": "su-browser-1"}
_VAULT = f"/v1/operator/tenants/{OPERATOR_TENANT}/secrets/su-ses-1"
_VAULT_PATH = {**_TENANT_PATH, "name": "su-ses-1"}
_VAULT_VALUE = "contract-vault-value-5b1e"


_EVERY_OPERATOR_CALL: list[tuple[str, str, str, dict[str, str], dict[str, Any] | None]] = [
    ("listTenantDevices", "GET", _DEVICES, _TENANT_PATH, None),
    ("enrollDevice", "POST", _DEVICES, _TENANT_PATH, {"deviceId": "su-browser-1"}),
    ("revokeDevice", "DELETE", f"{_DEVICES}/su-browser-1", _DEVICE_PATH, None),
    ("createApiKey", "POST", _KEYS, _TENANT_PATH, {"actor": "fleet"}),
    ("updateTenantSettings", "PUT", _SETTINGS, _TENANT_PATH, {"unattendedEnabled": True}),
    ("putVaultSecret", "PUT", _VAULT, _VAULT_PATH, {"value": _VAULT_VALUE}),
    ("deleteVaultSecret", "DELETE", _VAULT, _VAULT_PATH, None),
]


def _operator(s: Scenario) -> httpx.AsyncClient:
    token = s.backend.operator_token()
    LEDGER.secret(token)
    LEDGER.secret(_security.token_digest(token))
    return s.backend.client(token)


async def test_the_operator_api_without_a_token_is_403_and_with_one_provisions(
    scenario: Scenario,
) -> None:
    async with scenario.backend.client(_security.generate_token("operator")) as none_yet:
        for operation_id, method, url, path, body in _EVERY_OPERATOR_CALL:
            refused = await none_yet.request(method, url, json=body)
            scenario.conforms(
                operation_id,
                refused,
                403,
                "operator_api_disabled",
                path=path,
                body=body if body is not None else NOT_SET,
            )
    async with _operator(scenario) as http:
        body = {"deviceId": "su-browser-1"}
        enrolled = await http.post(_DEVICES, json=body)
        scenario.conforms("enrollDevice", enrolled, 201, path=_TENANT_PATH, body=body)
        LEDGER.secret(enrolled.json()["credential"])
        again = await http.post(_DEVICES, json=body)
        scenario.conforms("enrollDevice", again, 409, "device_exists", path=_TENANT_PATH, body=body)
        rotate = {**body, "rotate": True}
        rotated = await http.post(_DEVICES, json=rotate)
        scenario.conforms("enrollDevice", rotated, 200, path=_TENANT_PATH, body=rotate)
        LEDGER.secret(rotated.json()["credential"])
        listed = await http.get(_DEVICES)
        scenario.conforms("listTenantDevices", listed, 200, path=_TENANT_PATH)
        revoked = await http.delete(f"{_DEVICES}/su-browser-1")
        scenario.conforms("revokeDevice", revoked, 200, path=_DEVICE_PATH)
        missing = await http.delete(f"{_DEVICES}/su-browser-9")
        scenario.conforms(
            "revokeDevice",
            missing,
            404,
            "device_not_found",
            path={**_TENANT_PATH, "deviceId": "su-browser-9"},
        )
        LEDGER.secret(_VAULT_VALUE)  # never in any answer
        value = {"value": _VAULT_VALUE}
        stored = await http.put(_VAULT, json=value)
        scenario.conforms("putVaultSecret", stored, 204, path=_VAULT_PATH, body=value)
        deleted = await http.delete(_VAULT)
        scenario.conforms("deleteVaultSecret", deleted, 204, path=_VAULT_PATH)
        gone = await http.delete(_VAULT)
        scenario.conforms("deleteVaultSecret", gone, 404, "secret_not_found", path=_VAULT_PATH)
        key_body = {"actor": "fleet"}
        key = await http.post(_KEYS, json=key_body)
        scenario.conforms("createApiKey", key, 201, path=_TENANT_PATH, body=key_body)
        LEDGER.secret(key.json()["apiKey"])
        flag = {"unattendedEnabled": True}
        updated = await http.put(_SETTINGS, json=flag)
        scenario.conforms("updateTenantSettings", updated, 200, path=_TENANT_PATH, body=flag)


async def test_operator_refusals_are_400_and_401(scenario: Scenario) -> None:
    async with _operator(scenario) as http:
        bad: list[tuple[str, str, str, dict[str, str], dict[str, Any] | None]] = [
            ("listTenantDevices", "GET", "/v1/operator/tenants/-x/devices", {"tenant": "-x"}, None),
            ("enrollDevice", "POST", _DEVICES, _TENANT_PATH, {"deviceId": "Not Valid"}),
            ("revokeDevice", "DELETE", f"{_DEVICES}/-x", {**_TENANT_PATH, "deviceId": "-x"}, None),
            ("createApiKey", "POST", _KEYS, _TENANT_PATH, {"actor": ""}),
            ("updateTenantSettings", "PUT", _SETTINGS, _TENANT_PATH, {"unattendedEnabled": 1}),
            ("putVaultSecret", "PUT", _VAULT, _VAULT_PATH, {"value": ""}),
            (
                "deleteVaultSecret",
                "DELETE",
                f"/v1/operator/tenants/{OPERATOR_TENANT}/secrets/-x",
                {**_TENANT_PATH, "name": "-x"},
                None,
            ),
        ]
        for operation_id, method, url, path, body in bad:
            refused = await http.request(method, url, json=body)
            scenario.conforms(
                operation_id,
                refused,
                400,
                "invalid_request",
                path=path,
                body=body if body is not None else NOT_SET,
            )
    async with scenario.client() as consumer:  # a consumer key is no operator token
        for operation_id, method, url, path, body in _EVERY_OPERATOR_CALL:
            refused = await consumer.request(method, url, json=body)
            scenario.conforms(
                operation_id,
                refused,
                401,
                "unauthorized",
                path=path,
                body=body if body is not None else NOT_SET,
            )


@pytest.mark.parametrize("scenario", [{"requests_per_credential_per_min": 1}], indirect=True)
async def test_operator_requests_over_the_backstop_are_429(scenario: Scenario) -> None:
    async with _operator(scenario) as http:
        first = await http.get(_DEVICES)
        scenario.conforms("listTenantDevices", first, 200, path=_TENANT_PATH)
        for operation_id, method, url, path, body in _EVERY_OPERATOR_CALL:
            limited = await http.request(method, url, json=body)
            scenario.conforms(
                operation_id,
                limited,
                429,
                "rate_limited",
                path=path,
                body=body if body is not None else NOT_SET,
            )
