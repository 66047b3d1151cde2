"""Session creation, replay, conflicts, allocation and deletion through HTTP and real sockets."""

from __future__ import annotations

import asyncio
import uuid

from tests.backend.conftest import Backend, idem, unattended
from tests.support.simdevice import Behaviour
from understudy.generated import models as m


async def test_unattended_create_provisions_a_tab_and_returns_201(backend: Backend) -> None:
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        response = await http.post("/v1/sessions", json=unattended(), headers=idem())
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["status"] == "connected"
    assert body["deviceId"] == "laptop-1"
    assert body["allowedOrigins"] == ["https://example.com"]
    assert response.headers["location"] == f"/v1/sessions/{body['sessionId']}"
    assert "profileStateKey" not in response.text and "profile-a" not in response.text
    assert len(device.leases) == 1
    lease = next(iter(device.leases.values()))
    # The session ticket reached the extension over the device socket and opened a session socket.
    await device.wait_for(lambda: lease.session_frames)
    assert isinstance(lease.session_frames[0], m.SessionServerHelloAck)


async def test_origins_are_canonicalised_deduplicated_and_sorted(backend: Backend) -> None:
    await backend.device()
    origins = ["https://B.example.com:443/", "http://127.0.0.1:8080", "https://b.example.com"]
    async with backend.client(backend.api_key()) as http:
        response = await http.post("/v1/sessions", json=unattended(origins), headers=idem())
    assert response.status_code == 201, response.text
    assert response.json()["allowedOrigins"] == ["http://127.0.0.1:8080", "https://b.example.com"]


async def test_no_body_creates_an_attended_session_awaiting_attach(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        response = await http.post("/v1/sessions")
    assert response.status_code == 200
    assert response.json()["status"] == "awaiting_attach"
    assert response.json()["mode"] == "attended"


async def test_same_key_same_body_replays_with_200(backend: Backend) -> None:
    await backend.device()
    headers = idem()
    async with backend.client(backend.api_key()) as http:
        first = await http.post("/v1/sessions", json=unattended(), headers=headers)
        again = await http.post(
            "/v1/sessions", json=unattended(["https://EXAMPLE.com"]), headers=headers
        )
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["sessionId"] == first.json()["sessionId"]


async def test_same_key_other_meaning_is_an_idempotency_conflict(backend: Backend) -> None:
    await backend.device()
    headers = idem()
    async with backend.client(backend.api_key()) as http:
        await http.post("/v1/sessions", json=unattended(), headers=headers)
        other = await http.post(
            "/v1/sessions", json=unattended(profile="profile-b"), headers=headers
        )
    assert other.status_code == 409
    assert other.headers["content-type"] == "application/problem+json"
    assert other.json()["code"] == "idempotency_conflict"


async def test_two_concurrent_creates_with_one_key_make_one_session(backend: Backend) -> None:
    device = await backend.device()
    headers = idem()
    async with backend.client(backend.api_key()) as http:
        a, b = await asyncio.gather(
            http.post("/v1/sessions", json=unattended(), headers=headers),
            http.post("/v1/sessions", json=unattended(), headers=headers),
        )
    assert sorted([a.status_code, b.status_code]) == [200, 201]
    assert a.json()["sessionId"] == b.json()["sessionId"]
    assert len(device.leases) == 1


async def test_invalid_requests_are_refused_with_400(backend: Backend) -> None:
    await backend.device()
    bad_bodies = [
        unattended(["https://*.example.com"]),
        unattended(["https://user:pw@example.com"]),
        unattended(["https://example.com/path"]),
        unattended(["https://example.com?q=1"]),
        unattended(["https://example.com#top"]),
        unattended(["http://example.com"]),
        unattended(ttlSeconds=60),
        {**unattended(), "deviceId": None},
    ]
    async with backend.client(backend.api_key()) as http:
        for body in bad_bodies:
            response = await http.post("/v1/sessions", json=body, headers=idem())
            assert response.status_code == 400, body
            assert response.json()["code"] == "invalid_request"
        missing_key = await http.post("/v1/sessions", json=unattended())
        assert missing_key.status_code == 400
        assert "Idempotency-Key" in missing_key.json()["detail"]


async def test_tenant_not_enabled_for_unattended_gets_403(backend: Backend) -> None:
    async with backend.client(backend.api_key(tenant="initech")) as http:
        response = await http.post("/v1/sessions", json=unattended(), headers=idem())
    assert response.status_code == 403
    assert response.json()["code"] == "unattended_disabled"


async def test_missing_or_unknown_credentials_get_401(backend: Backend) -> None:
    async with backend.client("usk_" + "x" * 43) as http:
        assert (await http.get("/v1/devices")).status_code == 401
    async with backend.client(backend.enroll()) as http:  # a device credential is not an API key
        assert (await http.get("/v1/devices")).json()["code"] == "unauthorized"


async def test_no_device_online_is_503_unknown_device_is_404(backend: Backend) -> None:
    await backend.device(connect=False)
    async with backend.client(backend.api_key()) as http:
        none_online = await http.post("/v1/sessions", json=unattended(), headers=idem())
        unknown = await http.post("/v1/sessions", json=unattended(deviceId="nope"), headers=idem())
    assert none_online.status_code == 503
    assert none_online.json()["code"] == "no_device_available"
    assert "retry-after" in none_online.headers
    assert unknown.status_code == 404
    assert unknown.json()["code"] == "device_not_found"


async def test_capacity_is_two_tabs_then_429(backend: Backend) -> None:
    await backend.device()
    async with backend.client(backend.api_key()) as http:
        for i in range(2):
            ok = await http.post(
                "/v1/sessions",
                headers=idem(),
                json=unattended([f"https://site{i}.example"], f"p{i}"),
            )
            assert ok.status_code == 201
        full = await http.post(
            "/v1/sessions", json=unattended(["https://c.example"], "p3"), headers=idem()
        )
    assert full.status_code == 429
    assert full.json()["code"] == "capacity_exhausted"
    assert int(full.headers["retry-after"]) > 0


async def test_sharing_a_device_needs_disjoint_origins_and_different_profiles(
    backend: Backend,
) -> None:
    await backend.device()
    async with backend.client(backend.api_key()) as http:
        first = await http.post("/v1/sessions", json=unattended(), headers=idem())
        same_origin = await http.post(
            "/v1/sessions", json=unattended(profile="other"), headers=idem()
        )
        same_profile = await http.post(
            "/v1/sessions", json=unattended(["https://b.example"]), headers=idem()
        )
    assert first.status_code == 201
    assert (same_origin.status_code, same_origin.json()["code"]) == (409, "origin_conflict")
    assert (same_profile.status_code, same_profile.json()["code"]) == (409, "profile_conflict")


async def test_device_local_policy_must_admit_the_origins(backend: Backend) -> None:
    policy = {"mode": "allowlist", "origins": ["https://example.com"]}
    await backend.device(behaviour=Behaviour(local_origin_policy=policy))
    async with backend.client(backend.api_key()) as http:
        outside = await http.post(
            "/v1/sessions",
            json=unattended(["https://other.example"], deviceId="laptop-1"),
            headers=idem(),
        )
        inside = await http.post("/v1/sessions", json=unattended(), headers=idem())
    assert (outside.status_code, outside.json()["code"]) == (409, "origin_conflict")
    assert inside.status_code == 201


async def test_automatic_selection_prefers_least_used_then_oldest_assignment(
    backend: Backend,
) -> None:
    await backend.device(device="b-device")
    await backend.device(device="a-device")
    async with backend.client(backend.api_key()) as http:
        picks = []
        for i in range(3):
            r = await http.post(
                "/v1/sessions", json=unattended([f"https://s{i}.example"], f"p{i}"), headers=idem()
            )
            picks.append(r.json()["deviceId"])
            await backend.clock.advance(1)
    # Equal use: lexical id first; then the other (less used); then the least recently assigned.
    assert picks == ["a-device", "b-device", "a-device"]


async def test_explicit_device_never_falls_back(backend: Backend) -> None:
    await backend.device(device="busy")
    await backend.device(device="idle")
    async with backend.client(backend.api_key()) as http:
        for i in range(2):
            r = await http.post(
                "/v1/sessions",
                headers=idem(),
                json=unattended([f"https://s{i}.example"], f"p{i}", deviceId="busy"),
            )
            assert r.json()["deviceId"] == "busy"
        full = await http.post(
            "/v1/sessions",
            headers=idem(),
            json=unattended(["https://z.example"], "pz", deviceId="busy"),
        )
    assert full.status_code == 429


async def test_slow_provisioning_returns_202_then_connects(backend: Backend) -> None:
    device = await backend.device(behaviour=Behaviour(provision="silent"))
    async with backend.client(backend.api_key()) as http:
        pending = asyncio.create_task(http.post("/v1/sessions", json=unattended(), headers=idem()))
        # The provision frame leaves before the create starts its 5 s wait on the clock.
        await device.wait_for(lambda: device.frames_of(m.DeviceServerProvision))
        await backend.clock.advance(5)
        response = await pending
        assert response.status_code == 202
        assert response.headers["retry-after"] == "1"
        location = response.headers["location"]
        assert (await http.get(location)).json()["status"] == "provisioning"
        # The extension answers late but within the 30 s reconciliation deadline.
        device.behaviour.provision = "ack"
        provision = device.frames_of(m.DeviceServerProvision)[0]
        await device._provision(provision)
        session_id = location.rsplit("/", 1)[-1]
        await backend.until(lambda: backend.session_status(session_id) == "connected", "connected")
        assert (await http.get(location)).json()["status"] == "connected"


async def test_delete_persists_closing_then_the_fenced_ack_makes_it_terminal(
    backend: Backend,
) -> None:
    device = await backend.device(behaviour=Behaviour(close="silent"))
    async with backend.client(backend.api_key()) as http:
        created = (await http.post("/v1/sessions", json=unattended(), headers=idem())).json()
        url = f"/v1/sessions/{created['sessionId']}"
        deleting = await http.delete(url)
        assert deleting.status_code == 202
        assert deleting.json()["status"] == "closing"
        await device.wait_for(lambda: device.frames_of(m.DeviceServerClose))
        close = device.frames_of(m.DeviceServerClose)[0]
        # Capacity stays reserved while closing.
        devices = (await http.get("/v1/devices")).json()["devices"]
        assert devices[0]["usedCapacity"] == 1
        # A close_ack with a stale lease epoch is refused; the right one settles.
        await device.send_frame(
            m.DeviceClientCloseAck(
                type="close_ack", lease_id=close.lease_id, lease_epoch=close.lease_epoch + 1
            )
        )
        refused = await device.wait_for(lambda: device.frames_of(m.DeviceServerError))
        assert [e.code for e in refused] == ["stale_lease_epoch"]
        assert (await http.get(url)).status_code == 200
        await device.send_frame(
            m.DeviceClientCloseAck(
                type="close_ack", lease_id=close.lease_id, lease_epoch=close.lease_epoch
            )
        )
        await backend.until(
            lambda: backend.session_status(created["sessionId"]) == "closed", "closed"
        )
        tomb = await http.get(url)
        assert tomb.status_code == 410
        assert tomb.json() == {
            "sessionId": created["sessionId"],
            "status": "closed",
            "endedAt": tomb.json()["endedAt"],
            "reason": "deleted",
        }
        again = await http.delete(url)
        assert again.status_code == 200
        assert again.json()["status"] == "closed"
        assert (await http.get("/v1/devices")).json()["devices"][0]["usedCapacity"] == 0


async def test_another_tenant_sees_404(backend: Backend) -> None:
    await backend.device()
    async with backend.client(backend.api_key()) as http:
        created = (await http.post("/v1/sessions", json=unattended(), headers=idem())).json()
    async with backend.client(backend.api_key(tenant="globex")) as other:
        url = f"/v1/sessions/{created['sessionId']}"
        assert (await other.get(url)).status_code == 404
        assert (await other.delete(url)).json()["code"] == "session_not_found"
        assert (await other.get("/v1/devices")).json() == {"devices": []}
        explicit = await other.post(
            "/v1/sessions", json=unattended(deviceId="laptop-1"), headers=idem()
        )
        assert explicit.status_code == 404
    async with backend.client(backend.api_key()) as http:
        assert (await http.get(f"/v1/sessions/{uuid.uuid4()}")).status_code == 404
