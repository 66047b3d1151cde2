"""Refusals that say what happened: a local origin policy that refuses every online device, and
a write to an attended session that has no tab yet."""

from __future__ import annotations

import uuid
from typing import Any

from tests.backend.conftest import Backend, idem, unattended
from tests.support.simdevice import Behaviour

ALLOWLIST_ELSEWHERE = {"mode": "allowlist", "origins": ["https://intranet.example.org"]}


def _cmd(command: dict[str, Any]) -> dict[str, Any]:
    return {"commandId": str(uuid.uuid4()), "command": command}


async def test_a_policy_refusal_says_how_many_devices_are_online_and_which_policy_refused(
    backend: Backend,
) -> None:
    await backend.device(behaviour=Behaviour(local_origin_policy=ALLOWLIST_ELSEWHERE))
    async with backend.client(backend.api_key()) as http:
        one = await http.post("/v1/sessions", json=unattended(), headers=idem())
        await backend.device(
            device="laptop-2", behaviour=Behaviour(local_origin_policy=ALLOWLIST_ELSEWHERE)
        )
        two = await http.post("/v1/sessions", json=unattended(), headers=idem())

    assert (one.status_code, one.json()["code"]) == (503, "no_device_available")
    assert one.headers["content-type"] == "application/problem+json"
    assert "retry-after" in one.headers
    assert one.json()["detail"] == (
        "1 compatible device is online, but its local origin policy refuses the requested "
        "origins (device laptop-1 has an allowlist policy refusing https://example.com); ask "
        "the device operator to admit these origins, or request origins a device admits"
    )
    detail = two.json()["detail"]
    assert two.status_code == 503
    assert detail.startswith("2 compatible devices are online, but the local origin policy of")
    assert "device laptop-1 has an allowlist policy refusing https://example.com" in detail
    assert "device laptop-2 has an allowlist policy refusing https://example.com" in detail


async def test_a_device_that_admits_part_of_the_origins_is_named_with_the_refused_ones(
    backend: Backend,
) -> None:
    policy = {"mode": "allowlist", "origins": ["https://example.com"]}
    await backend.device(behaviour=Behaviour(local_origin_policy=policy))
    origins = ["https://example.com", "https://pay.example.net"]
    async with backend.client(backend.api_key()) as http:
        refused = await http.post("/v1/sessions", json=unattended(origins), headers=idem())
        pinned = await http.post(
            "/v1/sessions", json=unattended(origins, deviceId="laptop-1"), headers=idem()
        )
    assert (refused.status_code, refused.json()["code"]) == (503, "no_device_available")
    assert "refusing https://pay.example.net)" in refused.json()["detail"]
    assert "https://example.com" not in refused.json()["detail"].split("refusing")[1]
    # Asked for that device by id, the conflict names what its policy refused too.
    assert (pinned.status_code, pinned.json()["code"]) == (409, "origin_conflict")
    assert "refusing https://pay.example.net" in pinned.json()["detail"]


async def test_no_device_online_still_says_none_is_online(backend: Backend) -> None:
    await backend.device(connect=False)
    async with backend.client(backend.api_key()) as http:
        response = await http.post("/v1/sessions", json=unattended(), headers=idem())
    assert (response.status_code, response.json()["code"]) == (503, "no_device_available")
    assert response.json()["detail"].startswith("no compatible device is online")


async def test_a_write_to_an_attended_session_waiting_for_its_tab_answers_as_a_read_does(
    backend: Backend,
) -> None:
    async with backend.client(backend.api_key()) as http:
        created = await http.post("/v1/sessions")
        assert created.json()["status"] == "awaiting_attach"
        url = f"/v1/sessions/{created.json()['sessionId']}/commands"
        read = await http.post(url, json=_cmd({"name": "snapshot"}))
        write = await http.post(url, json=_cmd({"name": "click", "ref": "g1e1"}))
        dry_run = await http.post(url, json={**_cmd({"name": "reload"}), "dryRun": True})

    for answer in (read, write, dry_run):
        assert (answer.status_code, answer.json()["code"]) == (503, "session_unavailable")
        assert int(answer.headers["retry-after"]) > 0
        assert answer.json()["detail"] == (
            "no tab is attached to this attended session yet; a person attaches one from the "
            "extension's panel; retry after Retry-After"
        )
