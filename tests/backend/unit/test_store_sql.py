"""The dialect renders the one SQL source for each engine; SQLite runs what it renders."""

from __future__ import annotations

import sqlite3

import pytest

from understudy._store._sql import POSTGRESQL, SQLITE


def test_sqlite_keeps_named_parameters_as_written() -> None:
    sql = "SELECT * FROM t WHERE a = :a AND b = ':b'"
    assert SQLITE.render(sql) == sql


def test_postgresql_renders_named_parameters_in_pyformat() -> None:
    sql = "UPDATE t SET a = :a, note = 'at :noon; 100%' WHERE id = :id AND x::text LIKE 'y%'"
    assert POSTGRESQL.render(sql) == (
        "UPDATE t SET a = %(a)s, note = 'at :noon; 100%%' WHERE id = %(id)s AND x::text LIKE 'y%%'"
    )


def test_postgresql_doubles_every_literal_percent_and_leaves_comments_alone() -> None:
    assert POSTGRESQL.render("SELECT a % 2 FROM t -- 50% :not") == (
        "SELECT a %% 2 FROM t -- 50%% :not"
    )


@pytest.mark.parametrize(("a", "b", "least"), [(1, 2, 1), (3, 2, 2), (2.5, 2.5, 2.5)])
def test_sqlite_least_is_the_smaller_value(a: float, b: float, least: float) -> None:
    expr = SQLITE.least(":a", ":b")
    assert "MIN(" not in expr
    row = sqlite3.connect(":memory:").execute(f"SELECT {expr}", {"a": a, "b": b}).fetchone()
    assert row[0] == least


def test_postgresql_least_is_the_builtin() -> None:
    assert POSTGRESQL.least("a", "b") == "LEAST(a, b)"
