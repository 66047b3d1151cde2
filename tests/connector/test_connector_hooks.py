"""The consumer's hooks: approval before every write, content-free audit of every request."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from understudy_connector import (
    AuditEvent,
    CommandOutcomeUnknown,
    UsageError,
    WriteRefused,
    WriteRequest,
)

from .scripted import (
    SESSION_ID,
    MakeAsyncClient,
    MakeClient,
    outcome,
    problem,
    result_for,
    session,
    tombstone,
)

CREATE = ("POST", "/v1/sessions")
SUBMIT = ("POST", f"/v1/sessions/{SESSION_ID}/commands")
DELETE = ("DELETE", f"/v1/sessions/{SESSION_ID}")
UNATTENDED: dict[str, Any] = {
    "allowed_origins": ["https://example.com"],
    "profile_state_key": "crm-bot-profile",
}
PREVIEW = result_for("click", targetRole="button", targetName="Sign in", allowed=True)


def test_a_refused_write_is_never_sent(make_client: MakeClient) -> None:
    seen: list[WriteRequest] = []

    def refuse(request: WriteRequest) -> bool:
        seen.append(request)
        return False

    client, backend = make_client(session(201), tombstone())
    with (
        client.session(**UNATTENDED, approve=refuse) as live,
        pytest.raises(WriteRefused) as caught,
    ):
        live.click("g2e7")
    assert backend.calls == [CREATE, DELETE]
    (request,) = seen
    assert request.name == "click"
    assert request.command.to_wire()["ref"] == "g2e7"
    assert request.preview is None
    assert request.session_id == SESSION_ID
    assert caught.value.command_id == request.command_id


def test_an_approved_write_carries_the_id_the_hook_saw(make_client: MakeClient) -> None:
    seen: list[WriteRequest] = []

    def approve(request: WriteRequest) -> bool:
        seen.append(request)
        return True

    client, backend = make_client(session(201), outcome("click"), tombstone())
    with client.session(**UNATTENDED, approve=approve) as live:
        live.click("g2e7")
    assert backend.calls == [CREATE, SUBMIT, DELETE]
    assert backend.requests[1].command_id == str(seen[0].command_id)


def test_with_preview_writes_the_hook_sees_the_dry_run_first(make_client: MakeClient) -> None:
    seen: list[WriteRequest] = []

    def approve(request: WriteRequest) -> bool:
        seen.append(request)
        return True

    client, backend = make_client(
        session(201), outcome("click", result=PREVIEW), outcome("click"), tombstone()
    )
    with client.session(**UNATTENDED, approve=approve, preview_writes=True) as live:
        live.click("g2e7")
    assert backend.calls == [CREATE, SUBMIT, SUBMIT, DELETE]
    dry, real = backend.requests[1], backend.requests[2]
    assert dry.body["dryRun"] is True
    assert real.body["dryRun"] is False
    assert dry.body["command"] == real.body["command"]
    assert dry.command_id != real.command_id, "a dry run is a different request, so a different id"
    (request,) = seen
    assert request.preview is not None
    assert request.preview.preview is not None
    assert request.preview.preview.target_name == "Sign in"
    assert str(request.command_id) == real.command_id


def test_a_refusal_after_the_preview_sends_only_the_dry_run(make_client: MakeClient) -> None:
    client, backend = make_client(session(201), outcome("click", result=PREVIEW), tombstone())
    with (
        client.session(**UNATTENDED, approve=lambda request: False, preview_writes=True) as live,
        pytest.raises(WriteRefused),
    ):
        live.click("g2e7")
    assert backend.calls == [CREATE, SUBMIT, DELETE]
    assert backend.requests[1].body["dryRun"] is True


def test_reads_and_dry_runs_never_consult_the_hook(make_client: MakeClient) -> None:
    def never(request: WriteRequest) -> bool:
        raise AssertionError(f"the hook was consulted for {request.name}")

    client, backend = make_client(
        session(201), outcome("snapshot"), outcome("click", result=PREVIEW), tombstone()
    )
    with client.session(**UNATTENDED, approve=never, preview_writes=True) as live:
        live.snapshot()
        live.click("g2e7", dry_run=True)
    assert backend.calls == [CREATE, SUBMIT, SUBMIT, DELETE]


async def test_an_async_session_awaits_an_async_hook(make_async_client: MakeAsyncClient) -> None:
    decisions = iter([True, False])

    async def approve(request: WriteRequest) -> bool:
        return next(decisions)

    client, backend = make_async_client(session(201), outcome("navigate"), tombstone())
    async with client.session(**UNATTENDED, approve=approve) as live:
        await live.navigate("https://example.com/a")
        with pytest.raises(WriteRefused):
            await live.navigate("https://example.com/b")
    assert backend.calls == [CREATE, SUBMIT, DELETE]


def test_a_sync_session_refuses_an_async_hook_and_sends_nothing(make_client: MakeClient) -> None:
    async def approve(request: WriteRequest) -> bool:
        return True

    client, backend = make_client(session(201), tombstone())
    with (
        client.session(**UNATTENDED, approve=approve) as live,
        pytest.raises(UsageError, match="AsyncClient"),
    ):
        live.click("g2e7")
    assert backend.calls == [CREATE, DELETE]


def test_a_hook_that_returns_no_bool_fails_closed(make_client: MakeClient) -> None:
    client, backend = make_client(session(201), tombstone())
    with (
        client.session(**UNATTENDED, approve=lambda request: "yes") as live,  # type: ignore[arg-type, return-value]
        pytest.raises(UsageError, match="bool"),
    ):
        live.click("g2e7")
    assert backend.calls == [CREATE, DELETE]


SECRETS = ("secret-path", "hunter2", "vault:login-password", "crm-bot-profile", "usk_test_key")


def _flatten(event: AuditEvent) -> str:
    return repr(dataclasses.asdict(event))


def test_audit_events_are_content_free_by_default(make_client: MakeClient) -> None:
    events: list[AuditEvent] = []
    client, _ = make_client(
        session(201), outcome("navigate"), outcome("fill"), outcome("fill_secret"), tombstone()
    )
    with client.session(**UNATTENDED, approve=lambda request: True, audit=events.append) as live:
        live.navigate("https://example.com/secret-path")
        live.fill("g2e5", "hunter2")
        live.fill_secret("g2e6", "vault:login-password")
    assert events
    for event in events:
        assert event.content is None
        for secret in SECRETS:
            assert secret not in _flatten(event)
    fill = [event for event in events if event.command == "fill"]
    assert [event.stage for event in fill] == ["approval", "request", "response", "outcome"]
    assert {event.kind for event in fill} == {"write"}
    assert len({event.command_id for event in fill}) == 1
    response = fill[2]
    assert response.http_status == 200
    assert response.latency_ms is not None
    assert fill[3].status == "succeeded"
    operations = [event.operation for event in events if event.stage == "outcome"]
    assert operations == [
        "createSession",
        "submitCommand",
        "submitCommand",
        "submitCommand",
        "deleteSession",
    ]


def test_audit_content_opt_in_adds_arguments_and_urls(make_client: MakeClient) -> None:
    events: list[AuditEvent] = []
    client, _ = make_client(session(201), outcome("fill"), tombstone())
    with client.session(**UNATTENDED, audit=events.append, audit_content=True) as live:
        live.fill("g2e5", "hunter2")
    request = next(e for e in events if e.stage == "request" and e.command == "fill")
    assert request.content is not None
    assert request.content["body"]["command"]["value"] == "hunter2"
    assert request.content["url"].endswith(f"/v1/sessions/{SESSION_ID}/commands")


def test_an_unknown_outcome_is_audited_as_unknown(make_client: MakeClient) -> None:
    events: list[AuditEvent] = []
    client, _ = make_client(
        session(201), problem(409, "command_outcome_unknown"), tombstone(), audit=events.append
    )
    with client.session(**UNATTENDED) as live, pytest.raises(CommandOutcomeUnknown):
        live.click("g2e7")
    (final,) = [e for e in events if e.stage == "outcome" and e.command == "click"]
    assert final.status == "unknown"
    assert final.code == "command_outcome_unknown"


def test_the_client_never_shows_its_key(make_client: MakeClient) -> None:
    client, _ = make_client()
    assert "usk_" not in repr(client)
