"""Request bodies and headers a careful HTTP layer refuses: deep nesting, repeated keys, two
credentials, and ids in a spelling the spec does not admit."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.backend.conftest import Backend, idem, post_create, unattended
from understudy.http._parsing import MAX_JSON_DEPTH


def _problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["code"] == code
    return body


async def _session(backend: Backend, http: httpx.AsyncClient) -> str:
    await backend.device()
    response = await post_create(backend, http, unattended())
    assert response.status_code == 201, response.text
    session_id: str = response.json()["sessionId"]
    return session_id


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


async def test_json_nested_past_the_bound_is_400_not_a_server_error(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        for levels in (MAX_JSON_DEPTH + 1, 100_000):
            deep = '{"mode": "unattended", "allowedOrigins": ' + _nested(levels) + "}"
            response = await http.post(
                "/v1/sessions",
                content=deep,
                headers={**idem(), "Content-Type": "application/json"},
            )
            body = _problem(response, 400, "invalid_request")
            assert "deeper than" in body["detail"]
        # Brackets inside strings are text, not nesting.
        shallow = unattended(profile="[" * 1000)
        response = await post_create(backend, http, shallow)
        assert response.status_code != 500, response.text
        assert "deeper" not in response.text


async def test_nesting_within_the_bound_is_judged_by_the_schema(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        within = '{"mode": "unattended", "allowedOrigins": ' + _nested(MAX_JSON_DEPTH - 1) + "}"
        response = await http.post(
            "/v1/sessions",
            content=within,
            headers={**idem(), "Content-Type": "application/json"},
        )
        body = _problem(response, 400, "invalid_request")
        assert "deeper than" not in body["detail"]


async def test_a_repeated_key_is_400_and_runs_nothing(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        session_id = await _session(backend, http)
        device = backend.devices[0]
        command_id = str(uuid.uuid4())
        raw = (
            '{"commandId": "' + command_id + '", "dryRun": true, "dryRun": false, '
            '"command": {"name": "click", "ref": "g1e1"}}'
        )
        response = await http.post(
            f"/v1/sessions/{session_id}/commands",
            content=raw,
            headers={"Content-Type": "application/json"},
        )
        body = _problem(response, 400, "invalid_request")
        assert '"dryRun"' in body["detail"]
        assert device.executions == {}
        polled = await http.get(f"/v1/sessions/{session_id}/commands/{command_id}")
        _problem(polled, 404, "command_not_found")
        # A repeated key deeper down is refused the same way.
        nested = (
            '{"commandId": "' + command_id + '", '
            '"command": {"name": "click", "ref": "g1e1", "ref": "g1e2"}}'
        )
        response = await http.post(
            f"/v1/sessions/{session_id}/commands",
            content=nested,
            headers={"Content-Type": "application/json"},
        )
        _problem(response, 400, "invalid_request")
        assert device.executions == {}


async def test_two_authorization_headers_are_refused(backend: Backend) -> None:
    key = backend.api_key()
    other = backend.api_key(actor="other")
    async with httpx.AsyncClient(base_url=backend.url, timeout=10) as http:
        for pair in ((key, key), (key, other), (key, "not-a-key")):
            response = await http.get(
                "/v1/devices",
                headers=[("Authorization", f"Bearer {token}") for token in pair],
            )
            body = _problem(response, 401, "unauthorized")
            assert "exactly one Authorization header" in body["detail"]
        device_credential = backend.enroll(device="kiosk-9")
        response = await http.post(
            "/v1/device/connect-ticket",
            json={"browserEpoch": str(uuid.uuid4())},
            headers=[("Authorization", f"Bearer {device_credential}")] * 2,
        )
        _problem(response, 401, "unauthorized")
        one = await http.get("/v1/devices", headers={"Authorization": f"Bearer {key}"})
        assert one.status_code == 200, one.text


async def test_a_command_id_in_another_spelling_is_400(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        session_id = await _session(backend, http)
        plain = uuid.uuid4()
        for spelling in (f"{{{plain}}}", f"urn:uuid:{plain}", plain.hex):
            response = await http.post(
                f"/v1/sessions/{session_id}/commands",
                json={"commandId": spelling, "command": {"name": "snapshot"}},
            )
            body = _problem(response, 400, "invalid_request")
            assert body["errors"][0]["path"] == "/commandId"


async def test_an_upper_case_command_id_is_the_same_command_in_lower_case(
    backend: Backend,
) -> None:
    async with backend.client(backend.api_key()) as http:
        session_id = await _session(backend, http)
        command_id = uuid.uuid4()
        body = {"commandId": str(command_id).upper(), "command": {"name": "click", "ref": "g1e1"}}
        first = await http.post(f"/v1/sessions/{session_id}/commands", json=body)
        assert first.status_code == 200, first.text
        assert first.json()["commandId"] == str(command_id)
        again = await http.post(
            f"/v1/sessions/{session_id}/commands", json={**body, "commandId": str(command_id)}
        )
        assert again.json() == first.json()
        assert backend.devices[0].executions == {str(command_id): 1}


async def test_an_idempotency_key_in_another_spelling_is_400(backend: Backend) -> None:
    await backend.device()
    async with backend.client(backend.api_key()) as http:
        plain = uuid.uuid4()
        for spelling in (f"{{{plain}}}", f"urn:uuid:{plain}", plain.hex):
            response = await http.post(
                "/v1/sessions", json=unattended(), headers={"Idempotency-Key": spelling}
            )
            _problem(response, 400, "invalid_request")
        # Upper case is the same key: the retry in lower case is a replay, not a second session.
        key = str(uuid.uuid4())
        first = await http.post(
            "/v1/sessions", json=unattended(), headers={"Idempotency-Key": key.upper()}
        )
        assert first.status_code == 201, first.text
        replay = await http.post(
            "/v1/sessions", json=unattended(), headers={"Idempotency-Key": key}
        )
        assert replay.status_code == 200, replay.text
        assert replay.json()["sessionId"] == first.json()["sessionId"]


async def test_two_idempotency_keys_are_400(backend: Backend) -> None:
    await backend.device()
    async with backend.client(backend.api_key()) as http:
        response = await http.post(
            "/v1/sessions",
            json=unattended(),
            headers=[
                ("Idempotency-Key", str(uuid.uuid4())),
                ("Idempotency-Key", str(uuid.uuid4())),
            ],
        )
        body = _problem(response, 400, "invalid_request")
        assert body["errors"] == [{"path": "Idempotency-Key", "message": "sent more than once"}]
        assert backend.devices[0].leases == {}
