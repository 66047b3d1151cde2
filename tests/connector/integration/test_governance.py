"""The consumer's hooks against the running backend: approval with the dry-run preview; audit."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

import pytest

from understudy.generated import models as wire
from understudy_connector import WriteRefused, WriteRequest

from .conftest import ORIGINS, lease_of, socket_up

if TYPE_CHECKING:
    from .conftest import Live


def grants(frames: list[wire.SessionServerFrame]) -> list[bool | None]:
    """The `dryRun` flag of every write grant the device received, in order."""
    return [f.dry_run for f in frames if isinstance(f, wire.SessionServerWriteGrant)]


async def test_the_approval_hook_sees_the_preview_and_a_refusal_sends_no_write(
    live: Live,
) -> None:
    device = await live.device()
    asked: list[WriteRequest] = []

    def refuse_clicks(request: WriteRequest) -> bool:
        asked.append(request)
        return request.name != "click"

    async with live.client().session(
        allowed_origins=ORIGINS, profile_state_key="p", approve=refuse_clicks, preview_writes=True
    ) as s:
        await socket_up(device, s.id)
        lease = lease_of(device, s.id)
        with pytest.raises(WriteRefused) as refused:
            await s.click("g1e1")
        assert device.executions == {}, "the dry run acted on nothing and the write never left"
        assert grants(lease.session_frames) == [True]
        assert refused.value.command_id == asked[0].command_id

        await s.fill("g1e2", "jane")  # approved: the real write runs once, under the asked id
        assert device.executions == {str(asked[1].command_id): 1}
        assert grants(lease.session_frames) == [True, True, False]

    click, fill = asked
    assert click.preview is not None
    assert click.preview.preview is not None
    assert click.preview.preview.to_wire() == {
        "targetRole": "button",
        "targetName": "Sign in",
        "allowed": True,
    }
    assert fill.preview is not None
    assert fill.preview.preview is not None
    assert (fill.preview.preview.target_role, fill.preview.preview.target_name) == (
        "textbox",
        "Username",
    )
    dry_runs = [e.body for e in live.http.commands() if e.body["dryRun"]]
    real = [e.body for e in live.http.commands() if not e.body["dryRun"]]
    assert [b["command"]["name"] for b in dry_runs] == ["click", "fill"]
    assert [b["commandId"] for b in real] == [str(fill.command_id)], "no real click was sent"


async def test_the_audit_hook_receives_content_free_events(live: Live) -> None:
    device = await live.device()
    live.put_secret("login-password", "correct horse battery staple")
    secrets = ["https://example.com/account?token=", "jane@example.com", "vault:login-password"]
    async with live.client().session(
        allowed_origins=ORIGINS, profile_state_key="p", approve=lambda request: True
    ) as s:
        await socket_up(device, s.id)
        await s.navigate(secrets[0] + "abc")
        await s.fill("g1e2", secrets[1])
        await s.fill_secret("g1e3", secrets[2])
        await s.snapshot()
    assert device.secrets_seen == ["correct horse battery staple"]

    events = live.audit.events
    stages = {event.stage for event in events}
    assert stages == {"request", "response", "approval", "outcome"}
    assert all(event.content is None for event in events)
    outcomes = [(e.command, e.kind, e.status) for e in events if e.stage == "outcome" and e.command]
    assert outcomes == [
        ("navigate", "write", "succeeded"),
        ("fill", "write", "succeeded"),
        ("fill_secret", "write", "succeeded"),
        ("snapshot", "read", "succeeded"),
    ]
    text = json.dumps([dataclasses.asdict(event) for event in events], default=str)
    for value in [*secrets, "correct horse", live.api_key, "Sign in", "Username"]:
        assert value not in text
