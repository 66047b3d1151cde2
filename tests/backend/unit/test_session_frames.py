"""The write path's small frames, written as JSON from the row, say what their models say."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from understudy._clock import utc
from understudy._store.commands import CommandRow
from understudy.generated import models as m
from understudy.session_agent import (
    SERVER_FRAMES,
    grant_frame,
    prepare_frame,
    result_ack_frame,
)

# A whole second, a fraction, and one that rounds in the sixth digit.
TIMES = [1_700_000_000.0, 1_700_000_000.5, 1_764_000_123.123456789]
COMMANDS: list[dict[str, Any]] = [
    {"name": "click", "ref": "g1e1"},
    {"name": "type", "ref": "g1e2", "text": 'naïve → ünïcode "quoted" \\ slash'},
    {"name": "navigate", "url": "https://example.com/a?b=c&d=%20"},
]


def _row(command: dict[str, Any], deadline: float, *, dry_run: bool = False) -> CommandRow:
    return CommandRow(
        session_id="s",
        command_id=str(uuid.uuid4()),
        tenant="t",
        actor="a",
        name=command["name"],
        kind="write",
        dry_run=dry_run,
        fingerprint="f",
        # As the row keeps it: the wire form of the validated request, through its JSON column.
        request=json.loads(json.dumps(_validated(command))),
        state="granted",
        attempt=1,
        lease_epoch=7,
        browser_epoch="b",
        admitted_at=deadline - 25,
        ready_deadline=None,
        deadline=deadline,
        result=None,
        error_code=None,
        error_message=None,
        completed_at=None,
    )


def _validated(command: dict[str, Any]) -> dict[str, Any]:
    request = m.CommandRequest.model_validate({"commandId": str(uuid.uuid4()), "command": command})
    wire: dict[str, Any] = request.command.to_wire()
    return wire


@pytest.mark.parametrize("ready_by", TIMES)
@pytest.mark.parametrize("dry_run", [False, True])
def test_write_prepare_is_the_models_text(ready_by: float, dry_run: bool) -> None:
    command_id = uuid.uuid4()
    model = m.SessionServerWritePrepare(
        type="write_prepare",
        command_id=command_id,
        name="click",
        lease_epoch=3,
        dry_run=dry_run,
        ready_by=utc(ready_by),
    )
    text = prepare_frame(str(command_id), "click", 3, dry_run, ready_by).to_wire_json()
    assert text == model.to_wire_json()
    assert SERVER_FRAMES.validate_json(text) == model


@pytest.mark.parametrize("deadline", TIMES)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c["name"])
def test_write_grant_is_the_models_text(deadline: float, command: dict[str, Any]) -> None:
    row = _row(command, deadline, dry_run=command["name"] == "type")
    model = m.SessionServerWriteGrant(
        type="write_grant",
        command_id=uuid.UUID(row.command_id),
        lease_epoch=row.lease_epoch,
        command=m.CommandRequest.model_validate(
            {"commandId": row.command_id, "command": row.request}
        ).command,
        dry_run=row.dry_run,
        deadline_at=utc(row.deadline),
    )
    text = grant_frame(row).to_wire_json()
    assert text == model.to_wire_json()
    assert SERVER_FRAMES.validate_json(text) == model


def test_result_ack_is_the_models_text() -> None:
    command_id = uuid.uuid4()
    model = m.SessionServerResultAck(type="result_ack", command_id=command_id)
    assert result_ack_frame(command_id).to_wire_json() == model.to_wire_json()
