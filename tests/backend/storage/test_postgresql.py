"""What only the PostgreSQL engine has to prove: its migrations, its locks, its errors, its URL.

The shared behaviour is the contract suite next to this file (parametrised over both engines);
these tests cover what SQLite cannot show: the DDL rewrites on a real server, migrations racing
from two nodes, deadlocks mapped to a retryable conflict, and the CLI selecting the engine by
`UNDERSTUDY_DATABASE_URL`.
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

import psycopg
import pytest

from understudy._bootstrap import build_services
from understudy._config import Settings
from understudy._lock import unlock_data_dir
from understudy._store import LATEST, SchemaTooNewError, _postgres
from understudy._store._errors import (
    RetryableConflictError,
    StorageInUseError,
    StorageUnavailableError,
)
from understudy._store._migrations import MIGRATIONS
from understudy._store._postgres import PostgresDatabase, PostgresStorage, redacted
from understudy.cli import main

from .conftest import new_command, new_session

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.support.pgcluster import PgCluster


@pytest.fixture
def url(pg_cluster: PgCluster) -> Iterator[str]:
    """A fresh, empty database (a schema of its own) on the session's cluster."""
    name = f"engine_{uuid.uuid4().hex[:12]}"
    yield pg_cluster.create_schema(name)
    pg_cluster.drop_schema(name)


@pytest.fixture
def opened(url: str) -> Iterator[list[PostgresStorage]]:
    storages: list[PostgresStorage] = []
    yield storages
    for storage in storages:
        storage.close()


def open_storage(opened: list[PostgresStorage], url: str) -> PostgresStorage:
    storage = PostgresStorage(url, max_size=2)
    opened.append(storage)
    return storage


def columns(url: str) -> dict[tuple[str, str], str]:
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema()"
        ).fetchall()
    return {(table, column): kind for table, column, kind in found}


def test_a_fresh_database_migrates_to_the_latest_version_and_again_is_a_no_op(
    opened: list[PostgresStorage], url: str
) -> None:
    storage = open_storage(opened, url)
    assert storage.schema_version() == 0
    assert storage.migrate(5.0) == [number for number, _, _ in MIGRATIONS]
    assert storage.schema_version() == LATEST
    assert storage.migrate(6.0) == []
    with psycopg.connect(url) as conn:
        applied = conn.execute("SELECT version, applied_at FROM schema_migrations").fetchall()
    assert applied == [(number, 5.0) for number, _, _ in MIGRATIONS]


def test_migrations_map_sqlite_types_to_postgresql_ones(
    opened: list[PostgresStorage], url: str
) -> None:
    open_storage(opened, url).migrate(1.0)
    types = columns(url)
    # REAL would be a 4-byte float: epoch seconds would lose their fraction.
    assert types[("sessions", "created_at")] == "double precision"
    assert types[("schema_migrations", "applied_at")] == "double precision"
    assert types[("vault_keys", "wrapped_key")] == "bytea"
    assert types[("dialogs", "seq")] == "integer"


def test_epoch_seconds_and_bytes_round_trip_exactly(
    opened: list[PostgresStorage], url: str
) -> None:
    storage = open_storage(opened, url)
    storage.migrate(1.0)
    created = 1_764_612_345.123456
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1", created_at=created))
        tx.vault.add_wrapped_key("acme", b"\x00\xffwrapped", 1.0)
    with storage.read() as r:
        row = r.sessions.require("s1")
        assert row.created_at == created
        assert row.capacity_held is True
        assert r.vault.wrapped_key("acme") == b"\x00\xffwrapped"


def test_two_nodes_migrating_at_once_apply_each_version_once(
    opened: list[PostgresStorage], url: str
) -> None:
    nodes = [open_storage(opened, url) for _ in range(2)]
    applied: list[list[int]] = []
    start = threading.Barrier(2)

    def migrate(storage: PostgresStorage) -> None:
        start.wait()
        applied.append(storage.migrate(1.0))

    threads = [threading.Thread(target=migrate, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(applied, key=len) == [[], [number for number, _, _ in MIGRATIONS]]


def test_a_database_migrated_by_a_newer_binary_is_refused(
    opened: list[PostgresStorage], url: str
) -> None:
    storage = open_storage(opened, url)
    storage.migrate(1.0)
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO schema_migrations VALUES (%s, 'from the future', 2.0)", (LATEST + 1,)
        )
    with pytest.raises(SchemaTooNewError, match=f"schema version {LATEST + 1}"):
        storage.check_supported()
    with pytest.raises(SchemaTooNewError):
        storage.migrate(3.0)


def test_a_deadlock_is_a_retryable_conflict_and_rolls_the_loser_back(
    opened: list[PostgresStorage], url: str
) -> None:
    first, second = open_storage(opened, url), open_storage(opened, url)
    first.migrate(1.0)
    with first.transaction() as tx:
        tx.sessions.insert(new_session("a"))
        tx.sessions.insert(new_session("b"))
    both_hold_one = threading.Barrier(2)
    errors: list[BaseException] = []

    def cross(storage: PostgresStorage, mine: str, theirs: str) -> None:
        try:
            with storage.transaction():
                storage.sql.run(
                    "UPDATE sessions SET command_count = 1 WHERE session_id = :s", {"s": mine}
                )
                both_hold_one.wait()
                storage.sql.run(
                    "UPDATE sessions SET command_count = 2 WHERE session_id = :s", {"s": theirs}
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=cross, args=(first, "a", "b")),
        threading.Thread(target=cross, args=(second, "b", "a")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(errors) == 1 and isinstance(errors[0], RetryableConflictError)
    with first.read() as r:  # the winner's two changes, none of the loser's
        counts = sorted(r.sessions.require(s).command_count for s in ("a", "b"))
    assert counts == [1, 2]


def test_a_lock_held_elsewhere_fails_the_turn_after_the_lock_timeout(
    opened: list[PostgresStorage], url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_postgres, "LOCK_TIMEOUT_MS", 200)
    storage = open_storage(opened, url)
    storage.migrate(1.0)
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1"))
    with psycopg.connect(url) as other:  # another process holds the row in an open transaction
        other.execute("SELECT 1 FROM sessions WHERE session_id = 's1' FOR UPDATE")
        with pytest.raises(RetryableConflictError, match="lock timeout"), storage.transaction():
            storage.sql.run(
                "UPDATE sessions SET command_count = 9 WHERE session_id = :s", {"s": "s1"}
            )
    with storage.read() as r:
        assert r.sessions.require("s1").command_count == 0


def test_one_service_per_database_until_it_closes(opened: list[PostgresStorage], url: str) -> None:
    first, second = open_storage(opened, url), open_storage(opened, url)
    assert second.service_holder() is None
    first.claim_service()
    first.claim_service()  # claiming again is a no-op
    with pytest.raises(StorageInUseError, match="another Understudy service is using"):
        second.claim_service()
    holder = second.service_holder()  # what the CLI reports, from any host or data directory
    assert holder is not None and holder.startswith("PostgreSQL client 127.0.0.1, backend pid")
    with second.transaction():  # the CLI still works beside the service
        second.sql.one("SELECT 1 AS one")
    first.close()
    assert second.service_holder() is None
    second.claim_service()


def _end_claim_connection(storage: PostgresStorage) -> None:
    """What a PostgreSQL restart does to the service lock: its connection (and the lock) end."""
    holder = storage.service_holder()
    assert holder is not None
    pid = int(holder.rsplit(" ", 1)[1])
    with psycopg.connect(storage._url, autocommit=True) as admin:
        # Waits (up to 5 s) until the process has ended, and with it the lock.
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    assert storage.service_holder() is None


def test_a_lost_service_lock_is_taken_again_before_another_service_can(
    opened: list[PostgresStorage], url: str
) -> None:
    first, second = open_storage(opened, url), open_storage(opened, url)
    first.claim_service()
    first.keep_claim()  # held: nothing to do
    _end_claim_connection(first)
    first.keep_claim()
    assert first.service_holder() is not None
    with pytest.raises(StorageInUseError):
        second.claim_service()


def test_a_lock_still_held_by_the_ending_process_of_the_lost_connection_is_waited_for(
    opened: list[PostgresStorage], url: str
) -> None:
    first = open_storage(opened, url)
    first.claim_service()
    holder = first.service_holder()
    assert holder is not None
    assert first._claim is not None
    # The client side of the connection is gone, its server process (busy, so it does not see
    # the close yet) and the lock not yet.
    first._claim.pgconn.send_query(b"SELECT pg_sleep(30)")
    first._claim.pgconn.finish()
    first.keep_claim()  # no StorageInUseError: the holder is our own old process
    assert first.service_holder() == holder
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (int(holder.rsplit(" ", 1)[1]),))
    first.keep_claim()
    assert first.service_holder() not in (None, holder)


def test_a_service_whose_lock_another_took_meanwhile_is_told_to_stop(
    opened: list[PostgresStorage], url: str
) -> None:
    first, second = open_storage(opened, url), open_storage(opened, url)
    first.claim_service()
    _end_claim_connection(first)
    second.claim_service()  # the gap a restart leaves
    with pytest.raises(StorageInUseError, match="another Understudy service is using"):
        first.keep_claim()


def test_installations_in_two_schemas_of_one_database_do_not_block_each_other(
    pg_cluster: PgCluster, opened: list[PostgresStorage], url: str
) -> None:
    other = pg_cluster.create_schema(f"engine_{uuid.uuid4().hex[:12]}")
    mine, theirs = open_storage(opened, url), open_storage(opened, other)
    mine.claim_service()
    theirs.claim_service()
    assert theirs.service_holder() is not None and mine.service_holder() is not None


def test_a_second_service_on_the_database_is_refused_at_start_up(url: str, tmp_path: Path) -> None:
    settings = replace(Settings(), data_dir=tmp_path / "node-a", database_url=url)
    first = build_services(settings)
    try:
        with pytest.raises(StorageInUseError):
            build_services(replace(settings, data_dir=tmp_path / "node-b"))
    finally:
        first.db.close()
        first.telemetry.close()
        if first.data_dir_lock is not None:
            unlock_data_dir(first.data_dir_lock)


def test_the_change_marker_moves_when_another_process_revokes(
    opened: list[PostgresStorage], url: str
) -> None:
    service, cli = open_storage(opened, url), open_storage(opened, url)
    service.migrate(1.0)
    with cli.transaction() as tx:
        tx.devices.add(tenant="acme", device_id="d1", digest="a" * 64, now=1.0)
    before = service.change_marker()
    assert service.change_marker() == before, "no change, no move"
    with cli.transaction() as tx:
        assert tx.devices.revoke("acme", "d1", 2.0)
    assert service.change_marker() != before


def test_the_database_facade_runs_repositories_and_legacy_statements(url: str) -> None:
    db = PostgresDatabase(url, max_size=2)
    try:
        db.storage.migrate(1.0)
        turns = db.storage.turns if isinstance(db.storage, PostgresStorage) else 0
        repos = db.storage.repos
        with db.transaction():
            repos.sessions.insert(new_session("s1"))
            repos.commands.insert(new_command("c1"))
            repos.commands.grant("s1", "c1", state="granted")
        assert db.turns == db.commits == turns + 1
        # Outside a transaction a statement commits on its own, as on SQLite.
        repos.devices.add(tenant="acme", device_id="d1", digest="b" * 64, now=1.0)
        assert repos.devices.get("acme", "d1") is not None
        row = db.one(
            "SELECT state FROM commands WHERE session_id = ? AND command_id = ?", ("s1", "c1")
        )
        assert row is not None and row["state"] == "granted"  # a `?` statement
        assert [c.command_id for c in repos.commands.open_commands("s1")] == ["c1"]
    finally:
        db.close()


def test_an_unreachable_server_is_a_clear_error_without_the_password(
    pg_cluster: PgCluster,
) -> None:
    url = f"postgresql://understudy:s3cret@127.0.0.1:{pg_cluster.port}/no_such_database"
    with pytest.raises(StorageUnavailableError) as caught:
        PostgresStorage(url)
    message = str(caught.value)
    assert "cannot connect to PostgreSQL at" in message and "no_such_database" in message
    assert "s3cret" not in message
    assert redacted(url) in message


def test_understudy_migrate_uses_the_database_url(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for variable in list(os.environ):
        if variable.startswith("UNDERSTUDY_"):
            monkeypatch.delenv(variable)
    monkeypatch.setenv("UNDERSTUDY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("UNDERSTUDY_DATABASE_URL", url)
    assert main(["migrate"]) == 0
    versions = ", ".join(str(number) for number, _, _ in MIGRATIONS)
    assert f"applied schema migration(s) {versions}\n" in capsys.readouterr().out
    assert main(["migrate"]) == 0
    again = capsys.readouterr().out
    assert "applied" not in again and f"schema is up to date (version {LATEST})" in again
    assert not (tmp_path / "data" / "understudy.db").exists(), "no SQLite file on the side"
    assert main(["keys", "create", "--tenant", "acme", "--actor", "bot"]) == 0
    capsys.readouterr()
    service = PostgresStorage(url, max_size=1)  # a service elsewhere, on another data directory
    try:
        with service.read() as r:
            assert [k.tenant for k in r.api_keys.all()] == ["acme"]
        service.claim_service()
        assert main(["status"]) == 0
        assert "service: running (PostgreSQL client 127.0.0.1" in capsys.readouterr().out
    finally:
        service.close()
