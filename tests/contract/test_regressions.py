"""Defects the contract fuzzing found in the app, each pinned by the request that exposed it."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from tests.contract._checks import headers_required_with_body
from tests.contract._scenario import command, unattended

if TYPE_CHECKING:
    import httpx

    from tests.contract._scenario import Scenario


async def _session(scenario: Scenario, http: httpx.AsyncClient) -> str:
    await scenario.device()
    body = unattended()
    created = await http.post(
        "/v1/sessions", json=body, headers={"Idempotency-Key": str(uuid.uuid4())}
    )
    scenario.conforms("createSession", created, 201, body=body)
    device = scenario.backend.devices[-1]
    lease = next(iter(device.leases.values()))
    await device.wait_for(lambda: lease.session_frames)
    session_id: str = created.json()["sessionId"]
    return session_id


async def test_options_on_a_session_lists_get_and_delete(scenario: Scenario) -> None:
    # Litestar 2 listed only the first handler's method (GET) for a path served by two.
    async with scenario.client() as http:
        response = await http.options(f"/v1/sessions/{uuid.uuid4()}")
    assert response.status_code == 204
    allowed = {method.strip() for method in response.headers["allow"].split(",")}
    assert {"GET", "DELETE"} <= allowed


async def test_options_on_a_tenants_devices_lists_get_and_post(scenario: Scenario) -> None:
    # The same Litestar 2 defect on the operator API's one path with two handlers.
    async with scenario.client() as http:
        response = await http.options("/v1/operator/tenants/acme/devices")
    assert response.status_code == 204
    allowed = {method.strip() for method in response.headers["allow"].split(",")}
    assert {"GET", "POST"} <= allowed


@pytest.mark.parametrize(
    "wrong",
    [
        {"name": "switch_tab", "tabId": False},  # a boolean is no integer
        {"name": "switch_tab", "tabId": "3"},  # nor is a numeric string
        {"name": "click", "ref": 7},  # and a number is no string
        {"name": "press_key", "key": "a", "modifiers": ["Alt", "Alt"]},  # uniqueItems
    ],
)
async def test_values_json_schema_refuses_are_400(
    scenario: Scenario, wrong: dict[str, Any]
) -> None:
    async with scenario.client() as http:
        session_id = await _session(scenario, http)
        body = command(wrong)
        response = await http.post(f"/v1/sessions/{session_id}/commands", json=body)
    scenario.conforms(
        "submitCommand", response, 400, "invalid_request", path={"sessionId": session_id}
    )


async def test_an_attended_create_with_a_malformed_idempotency_key_is_400(
    scenario: Scenario,
) -> None:
    # Found by the 10,000-case run: the key was checked only when a body came with it.
    async with scenario.client() as http:
        malformed = await http.post("/v1/sessions", headers={"Idempotency-Key": "not-a-uuid"})
        scenario.conforms("createSession", malformed, 400, "invalid_request")
        fine = await http.post("/v1/sessions", headers={"Idempotency-Key": str(uuid.uuid4())})
        scenario.conforms("createSession", fine, 200)


async def test_an_integral_float_is_an_integer(scenario: Scenario) -> None:
    # JSON Schema counts 295.0 as an integer; strict parsing must not refuse it.
    async with scenario.client() as http:
        session_id = await _session(scenario, http)
        body = command({"name": "wait_for", "condition": {"kind": "text_appears", "text": "Hi"}})
        body["command"]["timeoutMs"] = 295.0
        response = await http.post(f"/v1/sessions/{session_id}/commands", json=body)
    scenario.conforms("submitCommand", response, 200, path={"sessionId": session_id}, body=body)


async def test_a_body_that_is_not_utf8_json_is_400(scenario: Scenario) -> None:
    async with scenario.client() as http:
        session_id = await _session(scenario, http)
        response = await http.post(
            f"/v1/sessions/{session_id}/commands",
            content='{"commandId": "x"}'.encode("utf-16"),
            headers={"Content-Type": "application/json"},
        )
    scenario.conforms(
        "submitCommand", response, 400, "invalid_request", path={"sessionId": session_id}
    )


# Found by the suite: the per-credential backstop answers 429 on every authenticated operation,
# but only createSession, submitCommand and createConnectTicket documented one. Fixed in the spec
# (components/responses/RateLimited); each operation's 429 is observed here.
@pytest.mark.parametrize("scenario", [{"requests_per_credential_per_min": 1}], indirect=True)
async def test_the_credential_backstop_429_is_documented_everywhere(scenario: Scenario) -> None:
    session_id, command_id = str(uuid.uuid4()), str(uuid.uuid4())
    session = {"sessionId": session_id}
    async with scenario.client() as http:
        scenario.conforms("listDevices", await http.get("/v1/devices"), 200)  # the one allowed
        calls = [
            ("listDevices", http.get("/v1/devices"), {}),
            ("getSession", http.get(f"/v1/sessions/{session_id}"), session),
            ("deleteSession", http.delete(f"/v1/sessions/{session_id}"), session),
            (
                "pollCommand",
                http.get(f"/v1/sessions/{session_id}/commands/{command_id}"),
                {**session, "commandId": command_id},
            ),
        ]
        for operation_id, call, path in calls:
            limited = await call
            scenario.conforms(operation_id, limited, 429, "rate_limited", path=path)
            assert int(limited.headers["retry-after"]) >= 1


async def test_a_header_the_spec_requires_with_a_body_is_required_exactly_then(
    scenario: Scenario,
) -> None:
    # Positive fuzzing sends these headers with every body because the spec says so
    # (x-required-with-body); the server must agree both ways.
    assert headers_required_with_body() == {"createSession": frozenset({"Idempotency-Key"})}
    await scenario.device()
    async with scenario.client() as http:
        body = unattended()
        missing = await http.post("/v1/sessions", json=body)
        scenario.conforms("createSession", missing, 400, "invalid_request", body=body)
        assert missing.json()["errors"][0]["path"] == "Idempotency-Key"
        attended = await http.post("/v1/sessions")
        scenario.conforms("createSession", attended, 200)
