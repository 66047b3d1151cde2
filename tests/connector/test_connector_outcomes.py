"""Every row of the submitCommand outcome table drives the client, sync and async alike.

The rows live in scenarios.json, shared with the TypeScript connector's tests. Each scenario plays
documented responses and asserts the exact requests the connector sent: the
same commandId and body on every resubmission, polls of that same command, the waits it took
(Retry-After or backoff, through the injected sleep) and what the caller finally gets.
"""

from __future__ import annotations

from typing import Any

import pytest

from understudy_connector import (
    CommandNotStarted,
    CommandOutcomeUnknown,
    OutcomeTimeout,
    RetryConfig,
)
from understudy_connector.generated import models

from .scenarios import SUBMIT_SCENARIOS, Scenario
from .scripted import (
    API_KEY,
    SESSION_ID,
    FakeClock,
    MakeAsyncClient,
    MakeClient,
    ScriptedBackend,
    outcome,
    pending,
    problem,
)

SCENARIOS = SUBMIT_SCENARIOS

SNAPSHOT = models.SnapshotCommand(name="snapshot", interactive_only=True)
CLICK = models.ClickCommand(name="click", ref="g2e14")


def _check(scenario: Scenario, backend: ScriptedBackend, clock: FakeClock, got: object) -> None:
    assert not backend.steps, "the script was not played to the end"
    first = backend.requests[0]
    command_id = first.command_id
    assert scenario.command is not None
    assert first.body == {
        "commandId": command_id,
        "dryRun": False,
        "command": scenario.command.to_wire(),
    }
    calls = []
    for recorded in backend.requests:
        assert recorded.headers["authorization"] == f"Bearer {API_KEY}"
        assert "idempotency-key" not in recorded.headers
        if recorded.method == "POST":
            assert recorded.body == first.body, "a resubmission changed the request"
            assert recorded.path == f"/v1/sessions/{SESSION_ID}/commands"
            calls.append("submit")
        else:
            assert recorded.path == f"/v1/sessions/{SESSION_ID}/commands/{command_id}"
            calls.append("poll")
    assert calls == scenario.calls
    assert clock.sleeps == scenario.sleeps
    if isinstance(scenario.outcome, str):
        assert isinstance(got, models.CommandOutcome)
        assert got.status == scenario.outcome
        assert str(got.command_id) == command_id
    else:
        assert type(got) is scenario.outcome
        carried = getattr(got, "command_id", None)
        if carried is not None:
            assert str(carried) == command_id


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_sync_client_follows_the_outcome_table(
    scenario: Scenario, make_client: MakeClient, clock: FakeClock
) -> None:
    assert scenario.command is not None
    client, backend = make_client(*scenario.steps, retry=scenario.retry)
    got: Any
    try:
        got = client.submit_command(SESSION_ID, scenario.command)
    except Exception as exc:
        got = exc
    _check(scenario, backend, clock, got)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
async def test_async_client_follows_the_outcome_table(
    scenario: Scenario, make_async_client: MakeAsyncClient, clock: FakeClock
) -> None:
    assert scenario.command is not None
    client, backend = make_async_client(*scenario.steps, retry=scenario.retry)
    got: Any
    try:
        got = await client.submit_command(SESSION_ID, scenario.command)
    except Exception as exc:
        got = exc
    _check(scenario, backend, clock, got)


def test_unknown_outcome_carries_the_command_id(make_client: MakeClient) -> None:
    client, backend = make_client(problem(409, "command_outcome_unknown"))
    with pytest.raises(CommandOutcomeUnknown) as caught:
        client.submit_command(SESSION_ID, CLICK)
    assert str(caught.value.command_id) == backend.requests[0].command_id
    assert caught.value.status == 409
    assert caught.value.code == "command_outcome_unknown"


def test_outcome_timeout_carries_the_command_id_of_the_pending_command(
    make_client: MakeClient,
) -> None:
    client, backend = make_client(pending("click", retry_after=5), retry=RetryConfig())
    with pytest.raises(OutcomeTimeout) as caught:
        client.submit_command(SESSION_ID, CLICK, command_timeout=4)
    assert str(caught.value.command_id) == backend.requests[0].command_id
    assert caught.value.command == "click"


def test_a_caller_given_command_id_is_used_on_every_attempt(make_client: MakeClient) -> None:
    from uuid import UUID

    chosen = UUID("0f1e2d3c-4b5a-4968-8776-655443322110")
    client, backend = make_client(problem(504, "command_not_started"), outcome("click"))
    result = client.submit_command(SESSION_ID, CLICK, command_id=chosen)
    assert result.command_id == chosen
    assert [recorded.command_id for recorded in backend.requests] == [str(chosen)] * 2


def test_each_logical_call_draws_a_new_command_id(make_client: MakeClient) -> None:
    client, backend = make_client(outcome(), outcome())
    client.submit_command(SESSION_ID, SNAPSHOT)
    client.submit_command(SESSION_ID, SNAPSHOT)
    first, second = (recorded.command_id for recorded in backend.requests)
    assert first != second


def test_a_location_on_another_origin_is_not_followed(make_client: MakeClient) -> None:
    client, backend = make_client(pending(location="https://elsewhere.test/steal"), outcome())
    client.submit_command(SESSION_ID, SNAPSHOT)
    poll = backend.requests[1]
    assert poll.url.host == "understudy.test"
    assert poll.path == f"/v1/sessions/{SESSION_ID}/commands/{backend.requests[0].command_id}"


def test_poll_command_polls_until_terminal_and_never_resubmits(make_client: MakeClient) -> None:
    from uuid import UUID

    command_id = UUID("c3a1e0f2-94d1-4b5e-8d5c-0e6f1a2b3c4d")
    client, backend = make_client(pending("click"), outcome("click"))
    result = client.poll_command(SESSION_ID, command_id)
    assert result.status == "succeeded"
    assert backend.calls == [("GET", f"/v1/sessions/{SESSION_ID}/commands/{command_id}")] * 2

    client, backend = make_client(problem(504, "command_not_started"))
    with pytest.raises(CommandNotStarted):
        client.poll_command(SESSION_ID, command_id)
    assert len(backend.requests) == 1
