"""Every row of the submitCommand outcome table drives the client, sync and async alike.

Each scenario plays documented responses and asserts the exact requests the connector sent: the
same commandId and body on every resubmission, polls of that same command, the waits it took
(Retry-After or backoff, through the injected sleep) and what the caller finally gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from understudy_connector import (
    BackendUnreachable,
    CommandIdConflict,
    CommandNotStarted,
    CommandOutcomeUnknown,
    CommandTimedOut,
    OutcomeTimeout,
    ProblemError,
    ProtocolUpgradeRequired,
    RateLimited,
    ResponseValidationError,
    RetryConfig,
    SessionBusy,
    SessionTerminal,
    SessionUnavailable,
)
from understudy_connector.generated import models

from .scripted import (
    API_KEY,
    SESSION_ID,
    FakeClock,
    MakeAsyncClient,
    MakeClient,
    ScriptedBackend,
    Step,
    network_error,
    outcome,
    pending,
    problem,
    raw,
)

SUBMIT = ("POST", f"/v1/sessions/{SESSION_ID}/commands")
POLL = ("GET", "poll")  # a GET of /v1/sessions/{SESSION_ID}/commands/{the same commandId}

SNAPSHOT = models.SnapshotCommand(name="snapshot", interactive_only=True)
CLICK = models.ClickCommand(name="click", ref="g2e14")


@dataclass
class Scenario:
    id: str
    steps: list[Step]
    outcome: str | type[Exception]
    calls: list[tuple[str, str]]
    sleeps: list[float]
    command: models.Command = field(default_factory=lambda: SNAPSHOT)
    retry: RetryConfig = field(default_factory=RetryConfig)


SCENARIOS = [
    Scenario("200 is the durable outcome", [outcome()], "succeeded", [SUBMIT], []),
    Scenario(
        "200 failed is returned, not retried",
        [outcome(status="failed", error=("stale_ref", "take a new snapshot"))],
        "failed",
        [SUBMIT],
        [],
    ),
    Scenario(
        "202 polls the same command after Retry-After until terminal",
        [pending("click", retry_after=2), pending("click", status="granted"), outcome("click")],
        "succeeded",
        [SUBMIT, POLL, POLL],
        [2.0, 1.0],
        command=CLICK,
    ),
    Scenario(
        "202 without Retry-After waits the default before polling",
        [pending(retry_after=None), outcome()],
        "succeeded",
        [SUBMIT, POLL],
        [1.0],
    ),
    Scenario(
        "202 without Location polls the command's own URL",
        [pending(location=None), outcome()],
        "succeeded",
        [SUBMIT, POLL],
        [1.0],
    ),
    Scenario(
        "202 past the caller's timeout raises OutcomeTimeout",
        [pending("click", retry_after=2), pending("click", retry_after=2)],
        OutcomeTimeout,
        [SUBMIT, POLL],
        [2.0],
        command=CLICK,
        retry=RetryConfig(command_timeout=3),
    ),
    Scenario(
        "409 command_outcome_unknown on submit is never retried",
        [problem(409, "command_outcome_unknown")],
        CommandOutcomeUnknown,
        [SUBMIT],
        [],
        command=CLICK,
    ),
    Scenario(
        "409 command_outcome_unknown while polling is never retried",
        [pending("click"), problem(409, "command_outcome_unknown")],
        CommandOutcomeUnknown,
        [SUBMIT, POLL],
        [1.0],
        command=CLICK,
    ),
    Scenario(
        "409 command_id_conflict is raised, not retried",
        [problem(409, "command_id_conflict")],
        CommandIdConflict,
        [SUBMIT],
        [],
    ),
    Scenario(
        "504 command_not_started resubmits the same command with backoff",
        [problem(504, "command_not_started"), outcome("click")],
        "succeeded",
        [SUBMIT, SUBMIT],
        [0.5],
        command=CLICK,
    ),
    Scenario(
        "504 command_timed_out (a read) resubmits the same command with backoff",
        [problem(504, "command_timed_out"), problem(504, "command_timed_out"), outcome()],
        "succeeded",
        [SUBMIT, SUBMIT, SUBMIT],
        [0.5, 1.0],
    ),
    Scenario(
        "504 while polling resubmits the same body",
        [pending("click"), problem(504, "command_not_started"), outcome("click")],
        "succeeded",
        [SUBMIT, POLL, SUBMIT],
        [1.0, 0.5],
        command=CLICK,
    ),
    Scenario(
        "504 gives up after the bounded resubmissions",
        [problem(504, "command_not_started") for _ in range(3)],
        CommandNotStarted,
        [SUBMIT, SUBMIT, SUBMIT],
        [0.5, 1.0],
        command=CLICK,
        retry=RetryConfig(resubmit_attempts=2),
    ),
    Scenario(
        "504 command_timed_out gives up when the backoff would pass the timeout",
        [problem(504, "command_timed_out"), problem(504, "command_timed_out")],
        CommandTimedOut,
        [SUBMIT, SUBMIT],
        [0.5],
        retry=RetryConfig(command_timeout=1.2),
    ),
    Scenario(
        "429 session_busy waits Retry-After, then resubmits the same command",
        [problem(429, "session_busy", retry_after=3), outcome("click")],
        "succeeded",
        [SUBMIT, SUBMIT],
        [3.0],
        command=CLICK,
    ),
    Scenario(
        "429 session_busy past the caller's timeout raises SessionBusy",
        [problem(429, "session_busy", retry_after=3), problem(429, "session_busy", retry_after=3)],
        SessionBusy,
        [SUBMIT, SUBMIT],
        [3.0],
        command=CLICK,
        retry=RetryConfig(command_timeout=5),
    ),
    Scenario(
        "429 rate_limited waits Retry-After within the timeout",
        [problem(429, "rate_limited", retry_after=2), outcome()],
        "succeeded",
        [SUBMIT, SUBMIT],
        [2.0],
    ),
    Scenario(
        "429 rate_limited beyond the timeout is raised at once",
        [problem(429, "rate_limited", retry_after=600)],
        RateLimited,
        [SUBMIT],
        [],
    ),
    Scenario(
        "410 session_terminal is raised, not retried",
        [problem(410, "session_terminal", with_command_id=False)],
        SessionTerminal,
        [SUBMIT],
        [],
    ),
    Scenario(
        "426 protocol_upgrade_required is raised, not retried",
        [problem(426, "protocol_upgrade_required", with_command_id=False)],
        ProtocolUpgradeRequired,
        [SUBMIT],
        [],
        command=CLICK,
    ),
    Scenario(
        "503 session_unavailable retries after Retry-After",
        [problem(503, "session_unavailable", retry_after=2, with_command_id=False), outcome()],
        "succeeded",
        [SUBMIT, SUBMIT],
        [2.0],
    ),
    Scenario(
        "503 session_unavailable past the timeout raises SessionUnavailable",
        [problem(503, "session_unavailable", retry_after=30, with_command_id=False)],
        SessionUnavailable,
        [SUBMIT],
        [],
        retry=RetryConfig(command_timeout=10),
    ),
    Scenario(
        "a network error resubmits the same command",
        [network_error, outcome("click")],
        "succeeded",
        [SUBMIT, SUBMIT],
        [0.5],
        command=CLICK,
    ),
    Scenario(
        "a network error while polling polls again",
        [pending("click"), network_error, outcome("click")],
        "succeeded",
        [SUBMIT, POLL, POLL],
        [1.0, 0.5],
        command=CLICK,
    ),
    Scenario(
        "network errors on every attempt raise BackendUnreachable",
        [network_error, network_error, network_error],
        BackendUnreachable,
        [SUBMIT, SUBMIT, SUBMIT],
        [0.5, 1.0],
        command=CLICK,
        retry=RetryConfig(network_attempts=2),
    ),
    Scenario(
        "an unknown problem code is a plain ProblemError",
        [problem(409, "brand_new_code")],
        ProblemError,
        [SUBMIT],
        [],
    ),
    Scenario(
        "a body outside the spec is refused",
        [raw(200, b'{"commandId": "nope"}')],
        ResponseValidationError,
        [SUBMIT],
        [],
    ),
    Scenario(
        "an error that is not a problem is refused",
        [raw(502, b"<html>bad gateway</html>", "text/html")],
        ResponseValidationError,
        [SUBMIT],
        [],
    ),
]


def _check(scenario: Scenario, backend: ScriptedBackend, clock: FakeClock, got: object) -> None:
    assert not backend.steps, "the script was not played to the end"
    first = backend.requests[0]
    command_id = first.command_id
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
            calls.append((recorded.method, recorded.path))
        else:
            assert recorded.path == f"/v1/sessions/{SESSION_ID}/commands/{command_id}"
            calls.append(POLL)
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
