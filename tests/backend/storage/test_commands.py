"""The command journal: admission, retries, grants, settling, open commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from understudy._store import ConflictError
from understudy._store.commands import CommandOutcome

from .conftest import new_command, new_session

if TYPE_CHECKING:
    from understudy._store._ports import Storage


@pytest.fixture
def journal(storage: Storage) -> Storage:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1"))
        tx.commands.insert(new_command("c1"))
    return storage


def test_inserted_command_reads_back_as_attempt_one(journal: Storage) -> None:
    with journal.read() as r:
        row = r.commands.get("s1", "c1")
        assert r.commands.get("s1", "c2") is None
        assert r.commands.get("s2", "c1") is None
    assert row is not None
    assert (row.state, row.attempt, row.dry_run, row.request) == (
        "preparing",
        1,
        False,
        {"selector": "#go"},
    )
    assert (row.result, row.error_code, row.completed_at) == (None, None, None)
    assert (row.ready_deadline, row.deadline, row.browser_epoch) == (210.0, 230.0, "be1")


def test_command_id_is_unique_per_session(journal: Storage) -> None:
    with pytest.raises(ConflictError), journal.transaction() as tx:
        tx.commands.insert(new_command("c1", name="type"))
    with journal.transaction() as tx:
        tx.commands.insert(new_command("c1", session_id="s2"))  # another session: no conflict
    with journal.read() as r:
        row = r.commands.get("s1", "c1")
        assert row is not None and row.name == "click"


def test_dry_run_and_empty_request_round_trip(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.commands.insert(new_command("c2", dry_run=True, request=None, kind="read"))
    with storage.read() as r:
        row = r.commands.get("s1", "c2")
    assert row is not None and row.dry_run is True and row.request is None


def test_grant_clears_the_ready_deadline(journal: Storage) -> None:
    with journal.transaction() as tx:
        row = tx.commands.grant("s1", "c1", state="granted")
    assert row is not None and (row.state, row.ready_deadline, row.deadline) == (
        "granted",
        None,
        230.0,
    )


def test_settle_with_an_outcome_stores_it_and_drops_the_request(journal: Storage) -> None:
    with journal.transaction() as tx:
        row = tx.commands.settle(
            "s1",
            "c1",
            state="succeeded",
            completed_at=220.0,
            outcome=CommandOutcome(result={"clicked": True}),
        )
    assert row is not None
    assert (row.state, row.completed_at, row.ready_deadline) == ("succeeded", 220.0, None)
    assert (row.result, row.error_code, row.error_message, row.request) == (
        {"clicked": True},
        None,
        None,
        None,
    )
    with journal.read() as r:
        assert r.commands.get("s1", "c1") == row


def test_settle_with_an_error_outcome(journal: Storage) -> None:
    with journal.transaction() as tx:
        row = tx.commands.settle(
            "s1",
            "c1",
            state="failed",
            completed_at=221.0,
            outcome=CommandOutcome(error_code="no_match", error_message="nothing matched"),
        )
    assert row is not None
    assert (row.result, row.error_code, row.error_message) == (None, "no_match", "nothing matched")


def test_settle_on_a_deadline_keeps_the_request(journal: Storage) -> None:
    with journal.transaction() as tx:
        row = tx.commands.settle("s1", "c1", state="not_started", completed_at=230.0)
    assert row is not None
    assert (row.state, row.completed_at, row.request) == (
        "not_started",
        230.0,
        {"selector": "#go"},
    )


def test_readmit_starts_a_new_attempt_and_clears_the_last_end(journal: Storage) -> None:
    with journal.transaction() as tx:
        tx.commands.settle(
            "s1",
            "c1",
            state="failed",
            completed_at=221.0,
            outcome=CommandOutcome(error_code="x", error_message="y"),
        )
        row = tx.commands.readmit(
            "s1",
            "c1",
            state="preparing",
            attempt=2,
            lease_epoch=3,
            browser_epoch="be3",
            request={"selector": "#again"},
            admitted_at=300.0,
            ready_deadline=310.0,
            deadline=330.0,
        )
    assert row is not None
    assert (row.state, row.attempt, row.lease_epoch, row.browser_epoch) == (
        "preparing",
        2,
        3,
        "be3",
    )
    assert (row.request, row.admitted_at, row.ready_deadline, row.deadline) == (
        {"selector": "#again"},
        300.0,
        310.0,
        330.0,
    )
    assert (row.error_code, row.error_message, row.completed_at) == (None, None, None)


def test_changes_to_a_missing_command_return_none(journal: Storage) -> None:
    with journal.transaction() as tx:
        assert tx.commands.grant("s1", "nope", state="granted") is None
        assert tx.commands.settle("s1", "nope", state="failed", completed_at=1.0) is None


def test_open_commands_are_the_unsettled_ones_oldest_first(journal: Storage) -> None:
    with journal.transaction() as tx:
        tx.commands.insert(new_command("c0", admitted_at=150.0, state="pending", kind="read"))
        tx.commands.insert(new_command("c2", admitted_at=250.0))
        tx.commands.insert(new_command("c3", admitted_at=260.0))
        tx.commands.grant("s1", "c2", state="granted")
        tx.commands.settle("s1", "c3", state="timed_out", completed_at=270.0)
        tx.commands.insert(new_command("x1", session_id="s2"))
        tx.commands.insert(new_command("x2", session_id="s3", state="succeeded"))
    with journal.read() as r:
        assert [c.command_id for c in r.commands.open_commands("s1")] == ["c0", "c1", "c2"]
        assert sorted(r.commands.sessions_with_open_commands()) == ["s1", "s2"]


def test_open_commands_admitted_at_the_same_moment_come_in_command_id_order(
    journal: Storage,
) -> None:
    # One clock reading per turn makes ties possible; an engine must not order them at random.
    with journal.transaction() as tx:
        tx.commands.insert(new_command("c9", session_id="s2", admitted_at=200.0))
        tx.commands.insert(new_command("c0", session_id="s2", admitted_at=200.0))
        tx.commands.insert(new_command("c5", session_id="s2", admitted_at=100.0))
        tx.commands.insert(new_command("x", session_id="s0"))
    with journal.read() as r:
        assert [c.command_id for c in r.commands.open_commands("s2")] == ["c5", "c0", "c9"]
        assert r.commands.sessions_with_open_commands() == ["s0", "s1", "s2"]


def test_insert_returns_the_row_as_stored(storage: Storage) -> None:
    with storage.transaction() as tx:
        row = tx.commands.insert(new_command("c7", request={"ref": "g1e1"}))
        assert row == tx.commands.get("s1", "c7")
    assert (row.attempt, row.request, row.completed_at) == (1, {"ref": "g1e1"}, None)


def test_admission_finds_the_earlier_admission_and_the_other_open_commands(
    journal: Storage,
) -> None:
    with journal.transaction() as tx:
        tx.commands.insert(new_command("c0", admitted_at=150.0, state="pending", kind="read"))
        tx.commands.insert(new_command("c2", admitted_at=250.0))
        tx.commands.settle("s1", "c2", state="not_started", completed_at=260.0)
        tx.commands.insert(new_command("x1", session_id="s2"))
    with journal.read() as r:
        prior, others = r.commands.admission("s1", "c2")  # settled: found, not open
        assert prior is not None and prior.state == "not_started"
        assert [c.command_id for c in others] == ["c0", "c1"]
        prior, others = r.commands.admission("s1", "c1")  # open itself: not among the others
        assert prior is not None and prior.command_id == "c1"
        assert [c.command_id for c in others] == ["c0"]
        assert r.commands.admission("s1", "new") == (None, [*others, prior])
        assert r.commands.admission("s9", "c1") == (None, [])


def test_next_due_is_the_earliest_deadline_of_an_open_command(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1", lease_epoch=2))
        assert tx.commands.next_due("s1") is None
        # Preparing: its ready deadline; granted or a read: its deadline.
        tx.commands.insert(new_command("w1", lease_epoch=2, ready_deadline=210.0, deadline=230.0))
        assert tx.commands.next_due("s1") == 210.0
        tx.commands.grant("s1", "w1", state="granted")
        assert tx.commands.next_due("s1") == 230.0
        tx.commands.insert(
            new_command(
                "r1",
                lease_epoch=2,
                state="pending",
                kind="read",
                ready_deadline=None,
                deadline=220.0,
            )
        )
        assert tx.commands.next_due("s1") == 220.0
        # Admitted under an older lease epoch than the session's: due at its admission.
        tx.commands.insert(new_command("old", lease_epoch=1, admitted_at=205.0))
        assert tx.commands.next_due("s1") == 205.0
        for command_id in ("w1", "r1", "old"):
            tx.commands.settle("s1", command_id, state="failed", completed_at=240.0)
        assert tx.commands.next_due("s1") is None
