"""The module functions of `understudy._store` keep their names and meaning."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from understudy._store import ConflictError, Database, commands, credentials, migrate, sessions

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "f.db", group_commit=False)
    migrate(database, 1.0)
    yield database
    database.close()


def _session(db: Database, session_id: str = "s1") -> None:
    sessions.insert(
        db,
        session_id=session_id,
        tenant="acme",
        actor="bot",
        mode="attended",
        status="awaiting_attach",
        allowed_origins=[],
        created_at=1.0,
        expires_at=100.0,
        idle_expires_at=50.0,
    )


def test_keyword_insert_and_update_still_work(db: Database) -> None:
    with db.transaction():
        _session(db)
        sessions.update(db, "s1", capacity_held=1, command_count=4)
    row = sessions.require(db, "s1")
    assert (row.capacity_held, row.command_count) == (True, 4)


def test_update_refuses_a_column_that_is_not_updatable(db: Database) -> None:
    with db.transaction():
        _session(db)
        with pytest.raises(ValueError, match="tenant"):
            sessions.update(db, "s1", tenant="beta")


def test_keyword_insert_raises_conflict_on_a_taken_id(db: Database) -> None:
    with db.transaction():
        _session(db)
    with pytest.raises(ConflictError), db.transaction():
        _session(db)


def test_an_unknown_keyword_is_a_type_error_not_a_silent_column(db: Database) -> None:
    with pytest.raises(TypeError), db.transaction():
        sessions.insert(db, session_id="s1", colour="red")


def test_command_update_encodes_its_result_and_typed_reads_decode_it(db: Database) -> None:
    with db.transaction():
        commands.insert(
            db,
            session_id="s1",
            command_id="c1",
            tenant="acme",
            actor="bot",
            name="read_text",
            kind="read",
            dry_run=False,
            fingerprint="f",
            request={"q": 1},
            state="pending",
            lease_epoch=1,
            browser_epoch=None,
            admitted_at=1.0,
            ready_deadline=None,
            deadline=5.0,
        )
        commands.update(db, "s1", "c1", state="succeeded", result={"text": "hi"}, request=None)
    row = commands.get(db, "s1", "c1")
    assert row is not None and (row.state, row.result, row.request) == (
        "succeeded",
        {"text": "hi"},
        None,
    )


def test_device_connected_returns_zero_for_an_unknown_device(db: Database) -> None:
    with db.transaction():
        epoch = credentials.device_connected(
            db,
            "acme",
            "nope",
            now=1.0,
            browser_epoch="b",
            protocol_versions=[2],
            capabilities=[],
            local_policy={},
        )
    assert epoch == 0


def test_database_storage_is_one_object_per_database(db: Database) -> None:
    assert db.storage is db.storage
    with db.storage.transaction() as tx:
        assert tx.sessions.get("none") is None
