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


def test_every_serving_process_is_a_node_and_a_closed_one_leaves(
    opened: list[PostgresStorage], url: str
) -> None:
    first = PostgresStorage(url, max_size=2, node_id="node-a")
    second = PostgresStorage(url, max_size=2, node_id="node-b")
    opened += [first, second]
    first.migrate(1.0)
    assert second.service_holder() is None
    first.claim_service()
    second.claim_service()  # no refusal: a second node on the same database
    first.keep_claim()
    assert first.heartbeat_ok
    assert second.service_holder() == "nodes node-a, node-b"  # what the CLI reports
    first.close()
    assert second.service_holder() == "nodes node-b"


def test_a_node_whose_row_was_forgotten_registers_again_on_its_next_heartbeat(
    opened: list[PostgresStorage], url: str
) -> None:
    node = PostgresStorage(url, max_size=2, node_id="node-a")
    opened.append(node)
    node.migrate(1.0)
    node.claim_service()
    with node.transaction():
        node.sql.run("DELETE FROM nodes")
    assert node.service_holder() is None
    node.keep_claim()
    assert node.service_holder() == "nodes node-a"


def test_a_heartbeat_that_cannot_reach_the_server_is_reported_not_raised(
    opened: list[PostgresStorage], url: str
) -> None:
    node = PostgresStorage(url, max_size=2, node_id="node-a")
    opened.append(node)
    node.migrate(1.0)
    node.claim_service()
    with node.transaction():
        node.sql.run("DROP TABLE nodes")  # every heartbeat statement now fails
    node.keep_claim()
    assert not node.heartbeat_ok


def test_a_heartbeat_does_not_wait_for_a_pooled_connection(
    opened: list[PostgresStorage], url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_postgres, "POOL_TIMEOUT_S", 1.0)
    node = PostgresStorage(url, max_size=1, node_id="node-a")
    opened.append(node)
    node.migrate(1.0)
    node.claim_service()
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:  # turns and polls of a loaded node keep every pooled connection busy
        with node.read():
            holding.set()
            done.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(5)
        node.keep_claim()
        assert node.heartbeat_ok
    finally:
        done.set()
        holder.join()


def test_a_heartbeat_that_finds_its_node_late_or_taken_for_gone_counts_it(
    opened: list[PostgresStorage], url: str
) -> None:
    node = PostgresStorage(url, max_size=2, node_id="node-a")
    opened.append(node)
    node.migrate(1.0)
    node.claim_service()
    node.keep_claim()
    assert node.late_heartbeats == 0
    with node.transaction():
        node.sql.run("UPDATE nodes SET heartbeat_at = heartbeat_at - 60")  # a minute's pause
    node.keep_claim()
    assert node.late_heartbeats == 1
    with node.transaction() as repos:
        repos.nodes.stopped("node-a")  # or marked stopped
    node.keep_claim()
    assert node.late_heartbeats == 2
    assert node.service_holder() == "nodes node-a"  # registered again
    node.keep_claim()
    assert node.late_heartbeats == 2


def test_installations_in_two_schemas_of_one_database_see_only_their_own_nodes(
    pg_cluster: PgCluster, opened: list[PostgresStorage], url: str
) -> None:
    other = pg_cluster.create_schema(f"engine_{uuid.uuid4().hex[:12]}")
    mine = PostgresStorage(url, max_size=2, node_id="mine")
    theirs = PostgresStorage(other, max_size=2, node_id="theirs")
    opened += [mine, theirs]
    for storage in (mine, theirs):
        storage.migrate(1.0)
        storage.claim_service()
    assert mine.service_holder() == "nodes mine"
    assert theirs.service_holder() == "nodes theirs"


def test_a_second_service_on_the_database_starts_as_another_node(url: str, tmp_path: Path) -> None:
    settings = replace(Settings(), data_dir=tmp_path / "node-a", database_url=url)
    first = build_services(settings)
    second = build_services(replace(settings, data_dir=tmp_path / "node-b"))
    try:
        assert first.node is not None and second.node is not None
        assert first.node.node_id != second.node.node_id
    finally:
        for services in (first, second):
            services.db.close()
            services.telemetry.close()
            if services.data_dir_lock is not None:
                unlock_data_dir(services.data_dir_lock)


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
    # A service elsewhere, on another data directory.
    service = PostgresStorage(url, max_size=1, node_id="node-a")
    try:
        with service.read() as r:
            assert [k.tenant for k in r.api_keys.all()] == ["acme"]
        service.claim_service()
        assert main(["status"]) == 0
        assert "service: running (nodes node-a)" in capsys.readouterr().out
    finally:
        service.close()
