"""The write protocol's decision table, every combination, without a socket.

`TABLE` below is the protocol, written out: one line per (event, kind, state, journal entry) the
backend can meet, with the next state (`=`: unchanged) and the effects in order. Any combination
not listed must be refused with `IllegalCommandEventError`, so a change to the table that is not
a change to this file fails here.
"""

from __future__ import annotations

import itertools
import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import TypeAdapter
from tests.support.simdevice import fake_snapshot

from understudy._clock import utc
from understudy._commands import CommandState, move
from understudy._problems import ProblemError
from understudy._store.commands import OPEN_STATES, CommandRow
from understudy._write_protocol import (
    JOURNAL_STATES,
    KINDS,
    STATES_OF,
    Effect,
    Event,
    IllegalCommandEventError,
    decide,
    http_answer,
)
from understudy.generated import models as m

if TYPE_CHECKING:
    from understudy._write_protocol import HttpAnswer, JournalState, Kind

TABLE = """
admit              read  -           -                 pending     send_read
admit              read  pending     -                 =           replay
admit              read  succeeded   -                 =           replay
admit              read  failed      -                 =           replay
admit              read  timed_out   -                 pending     send_read
admit              write -           -                 preparing   send_prepare
admit              write preparing   -                 =           replay
admit              write granted     -                 =           replay
admit              write succeeded   -                 =           replay
admit              write failed      -                 =           replay
admit              write not_started -                 preparing   send_prepare
admit              write unknown     -                 =           replay
read_succeeded     read  -           -                 =           -
read_succeeded     read  pending     -                 succeeded   record_outcome
read_succeeded     read  succeeded   -                 =           -
read_succeeded     read  failed      -                 =           -
read_succeeded     read  timed_out   -                 =           -
read_succeeded     write -           -                 =           -
read_succeeded     write preparing   -                 =           -
read_succeeded     write granted     -                 =           -
read_succeeded     write succeeded   -                 =           -
read_succeeded     write failed      -                 =           -
read_succeeded     write not_started -                 =           -
read_succeeded     write unknown     -                 =           -
read_failed        read  -           -                 =           -
read_failed        read  pending     -                 failed      record_outcome
read_failed        read  succeeded   -                 =           -
read_failed        read  failed      -                 =           -
read_failed        read  timed_out   -                 =           -
read_failed        write -           -                 =           -
read_failed        write preparing   -                 =           -
read_failed        write granted     -                 =           -
read_failed        write succeeded   -                 =           -
read_failed        write failed      -                 =           -
read_failed        write not_started -                 =           -
read_failed        write unknown     -                 =           -
write_ready        read  -           -                 =           cancel_ready_deadline
write_ready        read  pending     -                 =           -
write_ready        read  succeeded   -                 =           cancel_ready_deadline
write_ready        read  failed      -                 =           cancel_ready_deadline
write_ready        read  timed_out   -                 =           cancel_ready_deadline
write_ready        write -           -                 =           cancel_ready_deadline
write_ready        write preparing   -                 granted     send_grant
write_ready        write granted     -                 =           -
write_ready        write succeeded   -                 =           cancel_ready_deadline
write_ready        write failed      -                 =           cancel_ready_deadline
write_ready        write not_started -                 =           cancel_ready_deadline
write_ready        write unknown     -                 =           cancel_ready_deadline
ready_stale_epoch  read  -           -                 =           cancel_ready_deadline
ready_stale_epoch  read  pending     -                 =           -
ready_stale_epoch  read  succeeded   -                 =           cancel_ready_deadline
ready_stale_epoch  read  failed      -                 =           cancel_ready_deadline
ready_stale_epoch  read  timed_out   -                 =           cancel_ready_deadline
ready_stale_epoch  write -           -                 =           cancel_ready_deadline
ready_stale_epoch  write preparing   -                 =           error_stale_lease_epoch
ready_stale_epoch  write granted     -                 =           -
ready_stale_epoch  write succeeded   -                 =           cancel_ready_deadline
ready_stale_epoch  write failed      -                 =           cancel_ready_deadline
ready_stale_epoch  write not_started -                 =           cancel_ready_deadline
ready_stale_epoch  write unknown     -                 =           cancel_ready_deadline
ready_not_in_vault read  -           -                 =           cancel_ready_deadline
ready_not_in_vault read  pending     -                 =           -
ready_not_in_vault read  succeeded   -                 =           cancel_ready_deadline
ready_not_in_vault read  failed      -                 =           cancel_ready_deadline
ready_not_in_vault read  timed_out   -                 =           cancel_ready_deadline
ready_not_in_vault write -           -                 =           cancel_ready_deadline
ready_not_in_vault write preparing   -                 failed      record_outcome cancel_superseded
ready_not_in_vault write granted     -                 =           -
ready_not_in_vault write succeeded   -                 =           cancel_ready_deadline
ready_not_in_vault write failed      -                 =           cancel_ready_deadline
ready_not_in_vault write not_started -                 =           cancel_ready_deadline
ready_not_in_vault write unknown     -                 =           cancel_ready_deadline
write_succeeded    read  -           -                 =           error_unknown_command
write_succeeded    read  pending     -                 =           error_unknown_command
write_succeeded    read  succeeded   -                 =           error_unknown_command
write_succeeded    read  failed      -                 =           error_unknown_command
write_succeeded    read  timed_out   -                 =           error_unknown_command
write_succeeded    write -           -                 =           error_unknown_command
write_succeeded    write preparing   -                 =           error_not_granted
write_succeeded    write granted     -                 succeeded   record_outcome send_result_ack
write_succeeded    write succeeded   -                 =           send_result_ack
write_succeeded    write failed      -                 =           send_result_ack
write_succeeded    write not_started -                 =           error_not_granted
write_succeeded    write unknown     -                 =           send_result_ack
write_failed       read  -           -                 =           error_unknown_command
write_failed       read  pending     -                 =           error_unknown_command
write_failed       read  succeeded   -                 =           error_unknown_command
write_failed       read  failed      -                 =           error_unknown_command
write_failed       read  timed_out   -                 =           error_unknown_command
write_failed       write -           -                 =           error_unknown_command
write_failed       write preparing   -                 =           error_not_granted
write_failed       write granted     -                 failed      record_outcome send_result_ack
write_failed       write succeeded   -                 =           send_result_ack
write_failed       write failed      -                 =           send_result_ack
write_failed       write not_started -                 =           error_not_granted
write_failed       write unknown     -                 =           send_result_ack
hello              read  -           -                 =           -
hello              read  -           prepared          =           hello_cancel
hello              read  -           started           =           hello_unknown
hello              read  -           completed_unacked =           -
hello              read  pending     -                 timed_out   -
hello              read  pending     prepared          timed_out   hello_cancel
hello              read  pending     started           timed_out   -
hello              read  pending     completed_unacked timed_out   -
hello              read  succeeded   -                 =           -
hello              read  succeeded   prepared          =           hello_cancel
hello              read  succeeded   started           =           -
hello              read  succeeded   completed_unacked =           -
hello              read  failed      -                 =           -
hello              read  failed      prepared          =           hello_cancel
hello              read  failed      started           =           -
hello              read  failed      completed_unacked =           -
hello              read  timed_out   -                 =           -
hello              read  timed_out   prepared          =           hello_cancel
hello              read  timed_out   started           =           -
hello              read  timed_out   completed_unacked =           -
hello              write -           -                 =           -
hello              write -           prepared          =           hello_cancel
hello              write -           started           =           hello_unknown
hello              write -           completed_unacked =           -
hello              write preparing   -                 not_started -
hello              write preparing   prepared          not_started hello_cancel
hello              write preparing   started           not_started hello_cancel
hello              write preparing   completed_unacked not_started hello_cancel
hello              write granted     -                 unknown     block_writes hello_unknown
hello              write granted     prepared          not_started hello_cancel
hello              write granted     started           unknown     block_writes hello_unknown
hello              write granted     completed_unacked =           -
hello              write succeeded   -                 =           -
hello              write succeeded   prepared          =           hello_cancel
hello              write succeeded   started           =           -
hello              write succeeded   completed_unacked =           -
hello              write failed      -                 =           -
hello              write failed      prepared          =           hello_cancel
hello              write failed      started           =           -
hello              write failed      completed_unacked =           -
hello              write not_started -                 =           -
hello              write not_started prepared          =           hello_cancel
hello              write not_started started           =           -
hello              write not_started completed_unacked =           -
hello              write unknown     -                 =           -
hello              write unknown     prepared          =           hello_cancel
hello              write unknown     started           =           hello_unknown
hello              write unknown     completed_unacked =           -
deadline           read  pending     -                 timed_out   cancel_deadline
deadline           read  succeeded   -                 =           -
deadline           read  failed      -                 =           -
deadline           read  timed_out   -                 =           -
deadline           write preparing   -                 not_started cancel_ready_deadline
deadline           write granted     -                 unknown     block_writes
deadline           write succeeded   -                 =           -
deadline           write failed      -                 =           -
deadline           write not_started -                 =           -
deadline           write unknown     -                 =           -
socket_lost        read  pending     -                 timed_out   -
socket_lost        read  succeeded   -                 =           -
socket_lost        read  failed      -                 =           -
socket_lost        read  timed_out   -                 =           -
socket_lost        write preparing   -                 not_started -
socket_lost        write granted     -                 =           -
socket_lost        write succeeded   -                 =           -
socket_lost        write failed      -                 =           -
socket_lost        write not_started -                 =           -
socket_lost        write unknown     -                 =           -
epoch_lost         read  pending     -                 timed_out   -
epoch_lost         read  succeeded   -                 =           -
epoch_lost         read  failed      -                 =           -
epoch_lost         read  timed_out   -                 =           -
epoch_lost         write preparing   -                 not_started -
epoch_lost         write granted     -                 unknown     block_writes
epoch_lost         write succeeded   -                 =           -
epoch_lost         write failed      -                 =           -
epoch_lost         write not_started -                 =           -
epoch_lost         write unknown     -                 =           -
"""

_S = CommandState
Key = tuple[Event, "Kind", CommandState | None, "JournalState | None"]


def _parse() -> dict[Key, tuple[CommandState | None, tuple[Effect, ...]]]:
    rows: dict[Key, tuple[CommandState | None, tuple[Effect, ...]]] = {}
    for line in TABLE.strip().splitlines():
        event, kind, state, journal, target, *effects = line.split()
        key: Key = (
            Event(event),
            kind,  # type: ignore[assignment]  # checked against KINDS below
            None if state == "-" else CommandState(state),
            None if journal == "-" else journal,
        )
        assert kind in KINDS
        assert key not in rows, line
        landed = None if target == "=" else CommandState(target)
        rows[key] = (landed, tuple(Effect(e) for e in effects if e != "-"))
    return rows


EXPECTED = _parse()
EVERY = [
    (event, kind, state, journal)
    for event, kind, state, journal in itertools.product(
        Event, KINDS, [None, *CommandState], [None, *JOURNAL_STATES]
    )
]


@pytest.mark.parametrize(("event", "kind", "state", "journal"), EVERY)
def test_every_combination_is_a_listed_decision_or_refused(
    event: Event, kind: Kind, state: CommandState | None, journal: JournalState | None
) -> None:
    key = (event, kind, state, journal)
    if key not in EXPECTED:
        with pytest.raises(IllegalCommandEventError):
            decide(kind, state, event, journal)
        return
    decision = decide(kind, state, event, journal)
    assert (decision.target, decision.effects) == EXPECTED[key]


def test_refused_combinations_are_exactly_the_impossible_ones() -> None:
    refused = {key for key in EVERY if key not in EXPECTED}
    impossible = {
        (event, kind, state, journal)
        for event, kind, state, journal in EVERY
        if (state is not None and state not in STATES_OF[kind])
        or (journal is not None and event != Event.HELLO)
        or (state is None and event in (Event.DEADLINE, Event.SOCKET_LOST, Event.EPOCH_LOST))
    }
    assert refused == impossible


@pytest.mark.parametrize(("event", "kind", "state", "journal"), sorted(EXPECTED, key=str))
def test_every_listed_move_is_one_the_state_machine_allows(
    event: Event, kind: Kind, state: CommandState | None, journal: JournalState | None
) -> None:
    target, _ = EXPECTED[(event, kind, state, journal)]
    if target is None:
        return
    if state is None:
        assert event == Event.ADMIT  # only an admission creates a row
    else:
        assert move(state, target) == target
    assert target in STATES_OF[kind]


def test_the_grant_leaves_only_once_from_preparing() -> None:
    granting = {key for key, (_, effects) in EXPECTED.items() if Effect.SEND_GRANT in effects}
    assert granting == {(Event.WRITE_READY, "write", _S.PREPARING, None)}
    into_preparing = {key for key, (target, _) in EXPECTED.items() if target == _S.PREPARING}
    # Back to preparing only by admitting again a write that never started.
    assert into_preparing == {
        (Event.ADMIT, "write", None, None),
        (Event.ADMIT, "write", _S.NOT_STARTED, None),
    }


def test_a_write_that_may_have_run_is_unknown_and_blocks_writes() -> None:
    for (event, _, state, journal), (target, effects) in EXPECTED.items():
        if target == _S.UNKNOWN:
            assert state == _S.GRANTED, (event, journal)
            assert Effect.BLOCK_WRITES in effects
        if Effect.BLOCK_WRITES in effects:
            assert target == _S.UNKNOWN


def test_final_states_never_move() -> None:
    final = {s for s in CommandState if not s.open and not s.retryable}
    for (event, _, state, _), (target, _) in EXPECTED.items():
        if state in final:
            assert target is None, event


def test_persisted_steps_are_the_crash_points() -> None:
    steps = {
        (event, kind, state): decision.step
        for event, kind, state, journal in EXPECTED
        if journal is None and (decision := decide(kind, state, event)).step is not None
    }
    assert steps == {
        (Event.ADMIT, "write", None): "preparing",
        (Event.ADMIT, "write", _S.NOT_STARTED): "preparing",
        (Event.WRITE_READY, "write", _S.PREPARING): "granted",
        (Event.WRITE_SUCCEEDED, "write", _S.GRANTED): "result",
        (Event.WRITE_FAILED, "write", _S.GRANTED): "result",
    }


def test_the_store_lists_the_open_states_from_the_enum() -> None:
    assert set(OPEN_STATES) == {"pending", "preparing", "granted"}
    assert set(OPEN_STATES) == {s.value for s in CommandState if s.open}


# -- HTTP answers ----------------------------------------------------------------------------------


def _row(state: CommandState, kind: str = "write", **extra: Any) -> CommandRow:
    values: dict[str, Any] = {
        "session_id": str(uuid.uuid4()),
        "command_id": str(uuid.uuid4()),
        "tenant": "acme",
        "actor": "bot",
        "name": "click" if kind == "write" else "snapshot",
        "kind": kind,
        "dry_run": False,
        "fingerprint": "f",
        "request": None,
        "state": state.value,
        "attempt": 1,
        "lease_epoch": 1,
        "browser_epoch": None,
        "admitted_at": 1_796_000_000.0,
        "ready_deadline": None,
        "deadline": 1_796_000_025.0,
        "result": None,
        "error_code": None,
        "error_message": None,
        "completed_at": 1_796_000_001.0,
    }
    return CommandRow(**(values | extra))


@pytest.mark.parametrize(
    ("state", "status", "body_status"),
    [
        (_S.PENDING, 202, "pending"),
        (_S.PREPARING, 202, "pending"),
        (_S.GRANTED, 202, "granted"),
        (_S.FAILED, 200, "failed"),
    ],
)
def test_open_and_failed_commands_answer_with_their_status(
    state: CommandState, status: int, body_status: str
) -> None:
    row = _row(state, error_code="ref_not_found" if state == _S.FAILED else None)
    answer = http_answer(row.session_id, row)
    assert (answer.status, _body(answer)["status"]) == (status, body_status)
    if status == 202:
        assert answer.headers == {
            "Location": f"/v1/sessions/{row.session_id}/commands/{row.command_id}",
            "Retry-After": "1",
        }
    else:
        assert _body(answer)["error"]["code"] == "ref_not_found"


def _body(answer: HttpAnswer) -> dict[str, Any]:
    body = answer.body
    return json.loads(body) if isinstance(body, bytes) else body.to_wire()


@pytest.mark.parametrize(
    "extra",
    [
        {
            "result": {
                "name": "click",
                "url": "https://example.com/",
                "title": "Ünïcode ✓",
                "generation": 3,
            }
        },
        {"state": "failed", "error_code": "ref_not_found", "error_message": "no such ref"},
        {"state": "failed", "error_code": "wait_timeout", "error_message": None},
        {
            "dry_run": True,
            "completed_at": 1_796_000_002.25,
            "result": {
                "name": "click",
                "url": "https://example.com/",
                "title": "",
                "generation": 1,
            },
        },
        {"completed_at": None},  # never settled with a time: the admission's is shown
        {
            "name": "snapshot",
            "kind": "read",
            "result": fake_snapshot({"format": "both"}, {"url": "https://example.com/"}),
        },
    ],
)
def test_an_outcome_is_answered_as_the_command_outcome_model_writes_it(
    extra: dict[str, Any],
) -> None:
    """The outcome's JSON is written from the row; it must be what the model would write."""
    values = {"result": None, "state": "succeeded"} | extra
    row = _row(_S(values.pop("state")), kind=values.pop("kind", "write"), **values)
    answer = http_answer(row.session_id, row)
    assert isinstance(answer.body, bytes)
    model = m.CommandOutcome(
        command_id=uuid.UUID(row.command_id),
        name=row.name,  # type: ignore[arg-type]
        status=row.state,  # type: ignore[arg-type]
        dry_run=row.dry_run,
        result=TypeAdapter(m.CommandResult).validate_python(row.result) if row.result else None,
        error=m.CommandError(code=row.error_code, message=row.error_message or "")  # type: ignore[arg-type]
        if row.error_code
        else None,
        completed_at=utc(row.completed_at or row.admitted_at),
    )
    assert json.loads(answer.body) == json.loads(model.to_wire_json())


@pytest.mark.parametrize(
    ("state", "status", "code", "retry_policy"),
    [
        (_S.UNKNOWN, 409, "command_outcome_unknown", "do_not_retry"),
        (_S.NOT_STARTED, 504, "command_not_started", "retry_same_command"),
        (_S.TIMED_OUT, 504, "command_timed_out", "retry_same_command"),
    ],
)
def test_unsettled_outcomes_answer_as_problems(
    state: CommandState, status: int, code: str, retry_policy: str
) -> None:
    row = _row(state)
    with pytest.raises(ProblemError) as caught:
        http_answer(row.session_id, row)
    assert (caught.value.status, caught.value.code) == (status, code)
    assert caught.value.extensions == {"command_id": row.command_id, "retry_policy": retry_policy}


def test_a_remembered_decision_is_the_one_worked_out_and_an_illegal_one_raises_every_time() -> None:
    for kind in KINDS:
        for state in [None, *STATES_OF[kind]]:
            for event in Event:
                try:
                    first = decide(kind, state, event)
                except IllegalCommandEventError:
                    with pytest.raises(IllegalCommandEventError):
                        decide(kind, state, event)
                    continue
                # The same answer from the state's enum and from its stored text.
                assert decide(kind, state.value if state else None, event) == first
    with pytest.raises(IllegalCommandEventError):
        decide("read", CommandState.GRANTED, Event.ADMIT)
    with pytest.raises(IllegalCommandEventError):
        decide("read", CommandState.GRANTED, Event.ADMIT)
