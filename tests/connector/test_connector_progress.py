"""The connector speaks while it retries and waits: one log line and one progress call a wait."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from understudy_connector import LOGGER_NAME, Wait
from understudy_connector.generated.models import SnapshotCommand

from .scripted import SESSION_ID, network_error, outcome, pending, problem, session, tombstone

if TYPE_CHECKING:
    import pytest

    from .scripted import FakeClock, MakeAsyncClient, MakeClient

SNAPSHOT = SnapshotCommand(name="snapshot")
ARGS: dict[str, Any] = {"allowed_origins": ["https://example.com"], "profile_state_key": "crm"}


def test_a_command_reports_each_retry_and_poll_with_its_reason_and_budget(
    make_client: MakeClient, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    waits: list[Wait] = []
    client, _ = make_client(
        network_error,
        problem(504, "command_not_started"),
        pending(retry_after=2),
        outcome(),
        progress=waits.append,
    )
    with caplog.at_level(logging.INFO, logger=LOGGER_NAME):
        client.submit_command(SESSION_ID, SNAPSHOT, command_timeout=30)
    assert [(w.operation, w.reason, w.attempt) for w in waits] == [
        ("submitCommand", "network_error", 2),
        ("submitCommand", "not_started", 3),
        ("submitCommand", "pending", 4),
    ]
    assert [w.seconds for w in waits] == clock.sleeps
    assert all(w.timeout == 30 for w in waits)
    assert [w.elapsed for w in waits] == [0.0, 0.5, 1.0]
    assert len({w.subject for w in waits}) == 1  # the one command id, on every wait
    infos = [r for r in caplog.records if r.name == LOGGER_NAME and r.levelno == logging.INFO]
    assert [r.getMessage() for r in infos] == [w.describe() for w in waits]
    assert "pending, polling it in 2 s (attempt 4; 1.0 s of 30 s used)" in infos[2].getMessage()
    assert "usk_" not in caplog.text  # the API key is never logged


def test_each_request_is_logged_at_debug_with_its_status(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = make_client(network_error, outcome())
    with caplog.at_level(logging.DEBUG, logger=LOGGER_NAME):
        client.submit_command(SESSION_ID, SNAPSHOT)
    debug = [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER_NAME and r.levelno == logging.DEBUG
    ]
    assert debug[0].startswith(f"POST /v1/sessions/{SESSION_ID}/commands -> ConnectError in ")
    assert debug[1].startswith(f"POST /v1/sessions/{SESSION_ID}/commands -> 200 in ")


async def test_an_unattended_create_reports_provisioning_polls_to_an_async_caller(
    make_async_client: MakeAsyncClient,
) -> None:
    waits: list[Wait] = []
    client, _ = make_async_client(
        problem(503, "no_device_available", retry_after=3),
        session(202, status="provisioning", retry_after=2, location=True),
        session(200, status="connected"),
        progress=waits.append,
    )
    await client.create_session(**ARGS)
    assert [(w.operation, w.reason, w.seconds) for w in waits] == [
        ("createSession", "no_device", 3.0),
        ("createSession", "provisioning", 2.0),
    ]
    assert waits[0].subject is None  # no session exists yet
    assert waits[1].subject == str(SESSION_ID)


def test_close_wait_reports_its_polls(make_client: MakeClient) -> None:
    waits: list[Wait] = []
    client, _ = make_client(
        session(201),
        session(202, status="closing"),
        session(200, status="closing"),
        tombstone(410),
        progress=waits.append,
    )
    handle = client.session(**ARGS)
    handle.open()
    handle.close(wait=True)
    assert [w.reason for w in waits] == ["closing", "closing"]
    assert [w.attempt for w in waits] == [1, 2]
    assert all(w.subject == str(SESSION_ID) for w in waits)


def test_a_call_that_never_waits_reports_nothing(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    waits: list[Wait] = []
    client, _ = make_client(outcome(), progress=waits.append)
    with caplog.at_level(logging.INFO, logger=LOGGER_NAME):
        client.submit_command(SESSION_ID, SNAPSHOT)
    assert waits == []
    assert not [r for r in caplog.records if r.name == LOGGER_NAME and r.levelno >= logging.INFO]
