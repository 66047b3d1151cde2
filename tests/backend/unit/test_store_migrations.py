"""Migration scripts are split by statement, never inside a literal, a comment or a body."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from understudy._store import LATEST, Database, migrate
from understudy._store._migrations import MIGRATIONS, MigrationSyntaxError, split_statements
from understudy._store._sql import POSTGRESQL

if TYPE_CHECKING:
    from pathlib import Path


def test_plain_statements_split_at_each_semicolon() -> None:
    assert split_statements("CREATE TABLE a (x INT);\n CREATE TABLE b (y INT);") == [
        "CREATE TABLE a (x INT)",
        "CREATE TABLE b (y INT)",
    ]


def test_last_statement_needs_no_semicolon_and_empty_ones_are_dropped() -> None:
    assert split_statements(";; SELECT 1 ;\n\n SELECT 2  ") == ["SELECT 1", "SELECT 2"]


def test_semicolon_inside_string_literal_does_not_split() -> None:
    script = "INSERT INTO t VALUES ('a;b', 'it''s; fine'); SELECT 1"
    assert split_statements(script) == ["INSERT INTO t VALUES ('a;b', 'it''s; fine')", "SELECT 1"]


def test_semicolon_inside_quoted_identifier_does_not_split() -> None:
    assert split_statements('CREATE TABLE "odd;name" (x INT); SELECT 1') == [
        'CREATE TABLE "odd;name" (x INT)',
        "SELECT 1",
    ]


def test_semicolon_inside_comments_does_not_split() -> None:
    script = "-- first; still a comment\nSELECT 1; /* a; b; */ SELECT 2;"
    assert split_statements(script) == [
        "-- first; still a comment\nSELECT 1",
        "/* a; b; */ SELECT 2",
    ]


def test_a_statement_of_only_comments_is_dropped() -> None:
    assert split_statements("SELECT 1; -- trailing note; with a semicolon\n") == ["SELECT 1"]


def test_trigger_body_is_one_statement_even_with_case_end_inside() -> None:
    script = """
    CREATE TRIGGER t_touch AFTER UPDATE ON t BEGIN
        UPDATE t SET n = CASE WHEN n > 1 THEN n ELSE 1 END WHERE id = new.id;
        INSERT INTO log VALUES ('x;y');
    END;
    SELECT 1;
    """
    statements = split_statements(script)
    assert len(statements) == 2
    assert statements[0].startswith("CREATE TRIGGER") and statements[0].endswith("END")
    assert statements[1] == "SELECT 1"


def test_temporary_trigger_is_recognised() -> None:
    script = "CREATE TEMP TRIGGER t AFTER INSERT ON a BEGIN DELETE FROM b; END; SELECT 1"
    assert len(split_statements(script)) == 2


def test_case_end_outside_a_trigger_does_not_nest() -> None:
    script = "SELECT CASE WHEN 1 THEN 'a' END; SELECT 2"
    assert split_statements(script) == ["SELECT CASE WHEN 1 THEN 'a' END", "SELECT 2"]


def test_dollar_quoted_body_does_not_split() -> None:
    script = "CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql; SELECT 2"
    assert split_statements(script) == [
        "CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql",
        "SELECT 2",
    ]


@pytest.mark.parametrize(
    "script",
    [
        "SELECT 'never closed; SELECT 2",
        'SELECT "never closed',
        "SELECT 1; /* never closed; SELECT 2",
        "CREATE FUNCTION f() AS $$ SELECT 1;",
        "CREATE TRIGGER t AFTER INSERT ON a BEGIN DELETE FROM b;",
    ],
)
def test_unterminated_text_is_a_clear_error(script: str) -> None:
    with pytest.raises(MigrationSyntaxError):
        split_statements(script)


def test_every_released_migration_splits_into_the_statements_sqlite_counts() -> None:
    for number, _description, sql in MIGRATIONS:
        statements = split_statements(sql)
        assert statements, number
        for statement in statements:
            assert sqlite3.complete_statement(statement + ";"), (number, statement)
            assert not statement.rstrip().endswith(";")


def test_migrate_applies_every_version_once(tmp_path: Path) -> None:
    db = Database(tmp_path / "m.db", group_commit=False)
    assert migrate(db, 1.0) == list(range(1, LATEST + 1))
    assert migrate(db, 2.0) == []
    versions = [r["version"] for r in db.query("SELECT version FROM schema_migrations")]
    assert versions == list(range(1, LATEST + 1))
    db.close()


def test_a_failing_migration_leaves_no_partial_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = (*MIGRATIONS, (LATEST + 1, "broken", "CREATE TABLE half (x INT); CREATE TABLE ("))
    monkeypatch.setattr("understudy._store._migrations.MIGRATIONS", bad)
    db = Database(tmp_path / "m.db", group_commit=False)
    with pytest.raises(sqlite3.Error):
        migrate(db, 1.0)
    names = {r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "half" not in names
    assert "tenant_settings" in names  # the migrations before it are committed
    db.close()


def test_dialogs_of_a_database_before_migration_6_are_numbered_by_time_then_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("understudy._store._migrations.MIGRATIONS", MIGRATIONS[:5])
    db = Database(tmp_path / "m.db", group_commit=False)
    migrate(db, 1.0)
    with db.transaction():
        for dialog_id, seen_at in (("b", 2.0), ("a", 2.0), ("c", 1.0)):
            db.execute(
                "INSERT INTO dialogs (session_id, dialog_id, record, seen_at) VALUES (?, ?, ?, ?)",
                ("s1", dialog_id, "{}", seen_at),
            )
    monkeypatch.setattr("understudy._store._migrations.MIGRATIONS", MIGRATIONS)
    assert migrate(db, 2.0) == list(range(6, LATEST + 1))
    rows = db.query("SELECT dialog_id, seq FROM dialogs ORDER BY seq")
    assert [(r["dialog_id"], r["seq"]) for r in rows] == [("c", 1), ("a", 2), ("b", 3)]
    db.close()


def test_postgresql_dialect_maps_the_column_types_of_released_migrations() -> None:
    ddl = POSTGRESQL.ddl("CREATE TABLE t (at REAL NOT NULL, blob BLOB, note TEXT DEFAULT 'REAL')")
    assert ddl == (
        "CREATE TABLE t (at DOUBLE PRECISION NOT NULL, blob BYTEA, note TEXT DEFAULT 'REAL')"
    )
