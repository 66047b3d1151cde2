"""Closing a session: non-blocking by default, or waiting until it is terminal, capacity free."""

from __future__ import annotations

from typing import Any

import pytest

from understudy_connector import CloseTimeout, RetryConfig, SessionState
from understudy_connector.generated import models

from .scripted import (
    SESSION_ID,
    FakeClock,
    MakeAsyncClient,
    MakeClient,
    problem,
    session,
    tombstone,
)

CREATE = ("POST", "/v1/sessions")
DELETE = ("DELETE", f"/v1/sessions/{SESSION_ID}")
READ = ("GET", f"/v1/sessions/{SESSION_ID}")
UNATTENDED: dict[str, Any] = {
    "allowed_origins": ["https://example.com"],
    "profile_state_key": "crm-bot-profile",
}


def test_close_does_not_wait_by_default(make_client: MakeClient, clock: FakeClock) -> None:
    client, backend = make_client(session(201), session(202, status="closing"))
    live = client.session(**UNATTENDED).open()
    closed = live.close()
    assert isinstance(closed, models.Session)
    assert closed.status == "closing"
    assert backend.calls == [CREATE, DELETE]
    assert clock.sleeps == []


def test_close_with_wait_polls_until_the_session_is_terminal(
    make_client: MakeClient, clock: FakeClock
) -> None:
    client, backend = make_client(
        session(201),
        session(202, status="closing"),
        session(200, status="closing"),
        tombstone(410),
    )
    live = client.session(**UNATTENDED).open()
    closed = live.close(wait=True)
    assert isinstance(closed, models.SessionTombstone)
    assert closed.status == "closed"
    assert live.state is SessionState.CLOSED
    assert backend.calls == [CREATE, DELETE, READ, READ]
    # The extension acknowledges in ~100 ms: the first polls come soon, then back off.
    assert clock.sleeps == [0.025, 0.025]


def test_close_with_wait_returns_at_once_when_the_delete_found_it_terminal(
    make_client: MakeClient,
) -> None:
    client, backend = make_client(session(201), tombstone(200))
    live = client.session(**UNATTENDED).open()
    assert isinstance(live.close(wait=True), models.SessionTombstone)
    assert backend.calls == [CREATE, DELETE]


def test_a_session_still_closing_at_the_timeout_raises_close_timeout(
    make_client: MakeClient,
) -> None:
    closing = session(200, status="closing")
    client, backend = make_client(session(201), session(202, status="closing"), *[closing] * 20)
    live = client.session(**UNATTENDED).open()
    with pytest.raises(CloseTimeout, match="still closing after 1 s") as caught:
        live.close(wait=True, wait_timeout=1)
    assert caught.value.session_id == SESSION_ID
    assert backend.calls[:2] == [CREATE, DELETE]
    assert set(backend.calls[2:]) == {READ}


def test_the_default_wait_bound_comes_from_the_retry_config(
    make_client: MakeClient, clock: FakeClock
) -> None:
    closing = session(200, status="closing")
    client, _ = make_client(
        session(201),
        session(202, status="closing"),
        *[closing] * 20,
        retry=RetryConfig(close_timeout=2),
    )
    live = client.session(**UNATTENDED).open()
    started = clock.now
    with pytest.raises(CloseTimeout):
        live.close(wait=True)
    assert clock.now - started <= 2


def test_a_rate_limited_poll_waits_and_polls_again(
    make_client: MakeClient, clock: FakeClock
) -> None:
    client, backend = make_client(
        session(201),
        session(202, status="closing"),
        problem(429, "rate_limited", with_command_id=False, retry_after=1),
        tombstone(410),
    )
    live = client.session(**UNATTENDED).open()
    assert isinstance(live.close(wait=True), models.SessionTombstone)
    assert backend.calls == [CREATE, DELETE, READ, READ]
    assert clock.sleeps == [0.025, 1]


def test_waiting_after_a_non_blocking_close_polls_without_deleting_again(
    make_client: MakeClient,
) -> None:
    client, backend = make_client(session(201), session(202, status="closing"), tombstone(410))
    live = client.session(**UNATTENDED).open()
    live.close()
    assert isinstance(live.close(wait=True), models.SessionTombstone)
    assert backend.calls == [CREATE, DELETE, READ]


async def test_the_async_session_waits_too(make_async_client: MakeAsyncClient) -> None:
    client, backend = make_async_client(
        session(201), session(202, status="closing"), tombstone(410)
    )
    live = await client.session(**UNATTENDED).open()
    closed = await live.close(wait=True)
    assert isinstance(closed, models.SessionTombstone)
    assert backend.calls == [CREATE, DELETE, READ]
