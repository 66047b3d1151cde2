"""Session creation: one idempotency key per logical call, reused on every documented retry.

The table of creation sequences lives in scenarios.json, shared with the TypeScript connector.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from understudy_connector import (
    BackendUnreachable,
    CapacityExhausted,
    ProvisioningTimeout,
    UsageError,
)
from understudy_connector.generated import models

from .scenarios import CREATE_BODY, CREATE_SCENARIOS, Scenario
from .scripted import (
    SESSION_ID,
    FakeClock,
    MakeAsyncClient,
    MakeClient,
    ScriptedBackend,
    network_error,
    problem,
    session,
    tombstone,
)

CREATE = ("POST", "/v1/sessions")
POLL = ("GET", f"/v1/sessions/{SESSION_ID}")
SCENARIOS = CREATE_SCENARIOS
CALLS = {"create": CREATE, "poll": POLL}
ARGS: dict[str, Any] = {
    "allowed_origins": ["https://example.com"],
    "profile_state_key": "crm-bot-profile",
}


def _check(scenario: Scenario, backend: ScriptedBackend, clock: FakeClock, got: object) -> None:
    assert not backend.steps, "the script was not played to the end"
    assert backend.calls == [CALLS[call] for call in scenario.calls]
    assert clock.sleeps == scenario.sleeps
    posts = [recorded for recorded in backend.requests if recorded.method == "POST"]
    keys = {recorded.headers["idempotency-key"] for recorded in posts}
    assert len(keys) == 1, "every attempt of one creation carries the same key"
    UUID(keys.pop())
    assert all(recorded.body == CREATE_BODY for recorded in posts)
    polls = [recorded for recorded in backend.requests if recorded.method == "GET"]
    assert all("idempotency-key" not in recorded.headers for recorded in polls)
    if isinstance(scenario.outcome, str):
        assert isinstance(got, models.Session)
        assert got.status == scenario.outcome
    else:
        assert type(got) is scenario.outcome


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_sync_creation_follows_the_spec(
    scenario: Scenario, make_client: MakeClient, clock: FakeClock
) -> None:
    client, backend = make_client(*scenario.steps, retry=scenario.retry)
    got: Any
    try:
        got = client.create_session(**ARGS)
    except Exception as exc:
        got = exc
    _check(scenario, backend, clock, got)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
async def test_async_creation_follows_the_spec(
    scenario: Scenario, make_async_client: MakeAsyncClient, clock: FakeClock
) -> None:
    client, backend = make_async_client(*scenario.steps, retry=scenario.retry)
    got: Any
    try:
        got = await client.create_session(**ARGS)
    except Exception as exc:
        got = exc
    _check(scenario, backend, clock, got)


def test_each_creation_draws_a_new_idempotency_key(make_client: MakeClient) -> None:
    client, backend = make_client(session(201), session(201))
    client.create_session(**ARGS)
    client.create_session(**ARGS)
    first, second = (recorded.headers["idempotency-key"] for recorded in backend.requests)
    assert first != second


def test_a_caller_given_idempotency_key_is_sent(make_client: MakeClient) -> None:
    key = UUID("5f1d2c3b-4a59-4e8f-a7b6-c5d4e3f2a1b0")
    client, backend = make_client(network_error, session(201))
    client.create_session(**ARGS, idempotency_key=key)
    assert [recorded.headers["idempotency-key"] for recorded in backend.requests] == [str(key)] * 2


def test_capacity_exhausted_exposes_retry_after(make_client: MakeClient) -> None:
    client, _ = make_client(problem(429, "capacity_exhausted", retry_after=30))
    with pytest.raises(CapacityExhausted) as caught:
        client.create_session(**ARGS)
    assert caught.value.retry_after == 30.0


def test_provisioning_timeout_names_the_session(make_client: MakeClient) -> None:
    client, _ = make_client(session(202, status="provisioning", retry_after=9, location=True))
    with pytest.raises(ProvisioningTimeout) as caught:
        client.create_session(**ARGS, create_timeout=5)
    assert caught.value.session_id == SESSION_ID


def test_attended_creation_sends_no_body_and_no_key(make_client: MakeClient) -> None:
    client, backend = make_client(session(200, status="awaiting_attach", mode="attended"))
    created = client.create_session("attended")
    assert created.status == "awaiting_attach"
    (request,) = backend.requests
    assert request.body is None
    assert "idempotency-key" not in request.headers


def test_attended_creation_is_not_repeated_after_a_network_error(make_client: MakeClient) -> None:
    client, backend = make_client(network_error)
    with pytest.raises(BackendUnreachable, match="no idempotency key"):
        client.create_session("attended")
    assert len(backend.requests) == 1


@pytest.mark.parametrize(
    "arguments",
    [
        {"allowed_origins": ["https://example.com"]},
        {"profile_state_key": "crm"},
        {"allowed_origins": [], "profile_state_key": "crm"},
        {"allowed_origins": ["https://example.com"], "profile_state_key": ""},
    ],
)
def test_unattended_creation_needs_origins_and_a_profile_key(
    make_client: MakeClient, arguments: dict[str, Any]
) -> None:
    client, backend = make_client()
    with pytest.raises(UsageError):
        client.create_session(**arguments)
    assert backend.requests == []


def test_attended_creation_refuses_unattended_arguments(make_client: MakeClient) -> None:
    client, backend = make_client()
    with pytest.raises(UsageError, match="attended"):
        client.create_session("attended", allowed_origins=["https://example.com"])
    assert backend.requests == []


def test_get_and_delete_read_live_sessions_and_tombstones(make_client: MakeClient) -> None:
    client, backend = make_client(
        session(200), tombstone(410), session(202, status="closing"), tombstone(200)
    )
    assert isinstance(client.get_session(SESSION_ID), models.Session)
    assert isinstance(client.get_session(SESSION_ID), models.SessionTombstone)
    assert isinstance(client.delete_session(SESSION_ID), models.Session)
    assert isinstance(client.delete_session(SESSION_ID), models.SessionTombstone)
    assert backend.calls == [POLL, POLL, ("DELETE", POLL[1]), ("DELETE", POLL[1])]


def test_delete_repeats_after_a_network_error(make_client: MakeClient, clock: FakeClock) -> None:
    client, backend = make_client(network_error, tombstone(200))
    assert isinstance(client.delete_session(SESSION_ID), models.SessionTombstone)
    assert backend.calls == [("DELETE", POLL[1])] * 2
    assert clock.sleeps == [0.5]


def test_list_devices_parses_the_device_list(make_client: MakeClient) -> None:
    import httpx

    devices = {
        "devices": [
            {
                "deviceId": "laptop-1",
                "online": True,
                "capacity": 2,
                "usedCapacity": 1,
                "protocolVersions": [1, 2],
                "capabilities": ["safe_write_v2"],
                "enrolledAt": "2026-11-01T08:00:00Z",
            }
        ]
    }
    client, backend = make_client(lambda request: httpx.Response(200, json=devices))
    listed = client.list_devices()
    assert [device.device_id for device in listed.devices] == ["laptop-1"]
    assert backend.calls == [("GET", "/v1/devices")]
