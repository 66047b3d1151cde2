"""Group commit: turns of one loop iteration share one COMMIT, and nothing is durable before it.

Durability is judged from a second SQLite connection, as a restarted process would see the file.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING

import pytest

from understudy._store._db import Database, DurabilityError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "t.db")
    database.execute("CREATE TABLE t (actor TEXT, n INTEGER)")
    yield database
    database.close()


def _on_disk(db: Database) -> list[tuple[str, int]]:
    other = sqlite3.connect(db.path)
    try:
        return sorted(other.execute("SELECT actor, n FROM t").fetchall())
    finally:
        other.close()


def _turn(db: Database, actor: str, n: int) -> None:
    with db.transaction():
        db.execute("INSERT INTO t VALUES (?, ?)", (actor, n))


async def test_turns_of_one_iteration_share_one_commit(db: Database) -> None:
    before = db.commits
    _turn(db, "a", 1)
    _turn(db, "b", 1)
    _turn(db, "c", 1)
    assert _on_disk(db) == []  # taken, not yet durable
    assert db.query("SELECT count(*) AS n FROM t")[0]["n"] == 3  # visible to this connection
    await db.durable()
    assert db.commits == before + 1
    assert _on_disk(db) == [("a", 1), ("b", 1), ("c", 1)]


async def test_actors_in_separate_tasks_join_the_same_group(db: Database) -> None:
    before = db.commits

    async def actor(name: str) -> None:
        _turn(db, name, 1)
        await db.durable()
        assert (name, 1) in _on_disk(db)  # when durable() returns, the turn is on disk

    await asyncio.gather(*(actor(f"actor-{i}") for i in range(20)))
    assert db.commits == before + 1
    assert len(_on_disk(db)) == 20


async def test_a_failing_turn_rolls_back_alone(db: Database) -> None:
    _turn(db, "a", 1)
    with pytest.raises(RuntimeError), db.transaction():
        db.execute("INSERT INTO t VALUES ('b', 1)")
        raise RuntimeError("the turn fails after a write")
    _turn(db, "c", 1)
    await db.durable()
    assert _on_disk(db) == [("a", 1), ("c", 1)]


async def test_nested_transactions_join_their_turn(db: Database) -> None:
    with db.transaction():
        db.execute("INSERT INTO t VALUES ('a', 1)")
        with db.transaction():
            db.execute("INSERT INTO t VALUES ('a', 2)")
    await db.durable()
    assert _on_disk(db) == [("a", 1), ("a", 2)]


async def test_durable_returns_at_once_when_nothing_is_pending(db: Database) -> None:
    before = db.commits
    await db.durable()
    assert db.commits == before


async def test_each_iteration_gets_its_own_group(db: Database) -> None:
    before = db.commits
    _turn(db, "a", 1)
    await db.durable()
    _turn(db, "a", 2)
    await db.durable()
    assert db.commits == before + 2


async def test_a_failed_commit_fails_every_turn_of_its_group(db: Database) -> None:
    db.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    db.execute("CREATE TABLE child (p INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
    _turn(db, "a", 1)
    with db.transaction():
        db.execute("INSERT INTO child VALUES (42)")  # a deferred check fails at COMMIT
    with pytest.raises(DurabilityError):
        await db.durable()
    assert _on_disk(db) == []
    _turn(db, "b", 1)  # the connection is usable afterwards
    await db.durable()
    assert _on_disk(db) == [("b", 1)]


def test_outside_a_loop_every_transaction_commits_at_once(db: Database) -> None:
    before = db.commits
    _turn(db, "cli", 1)
    assert _on_disk(db) == [("cli", 1)]
    assert db.commits == before + 1


async def test_close_commits_an_open_group(tmp_path: Path) -> None:
    database = Database(tmp_path / "c.db")
    database.execute("CREATE TABLE t (actor TEXT, n INTEGER)")
    _turn(database, "a", 1)
    database.close()
    reopened = sqlite3.connect(tmp_path / "c.db")
    assert reopened.execute("SELECT actor, n FROM t").fetchall() == [("a", 1)]
    reopened.close()


async def test_switched_off_every_turn_commits_on_its_own(tmp_path: Path) -> None:
    database = Database(tmp_path / "off.db", group_commit=False)
    database.execute("CREATE TABLE t (actor TEXT, n INTEGER)")
    before = database.commits
    _turn(database, "a", 1)
    _turn(database, "b", 1)
    assert _on_disk(database) == [("a", 1), ("b", 1)]  # durable before any await
    assert database.commits == before + 2
    database.close()


async def test_a_cancelled_waiter_leaves_the_group_and_the_other_waiters_alone(
    db: Database,
) -> None:
    async def turn_then_wait() -> None:
        _turn(db, "a", 1)
        await db.durable()

    taker = asyncio.ensure_future(turn_then_wait())
    gone = asyncio.ensure_future(db.durable())
    stays = asyncio.ensure_future(db.durable())
    await asyncio.sleep(0)  # all three wait on the open group now; its COMMIT comes next
    assert not taker.done()
    gone.cancel()
    await stays  # still resolved by the COMMIT, not cancelled with the other one
    await taker
    assert gone.cancelled()
    assert _on_disk(db) == [("a", 1)]


def _control(db: Database) -> list[str]:
    """Every transaction-control statement the connection runs from now on."""
    seen: list[str] = []
    db._conn.set_trace_callback(  # what SQLite itself is asked to do
        lambda sql: (
            seen.append(sql.split()[0].upper())
            if sql.split()[0].upper() in ("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK", "COMMIT")
            else None
        )
    )
    return seen


async def test_a_turn_alone_in_its_group_takes_no_savepoint(db: Database) -> None:
    seen = _control(db)
    _turn(db, "a", 1)
    await db.durable()
    assert seen == ["BEGIN", "COMMIT"]
    seen.clear()
    _turn(db, "a", 2)
    _turn(db, "b", 2)  # a second turn joins as a savepoint: it may roll back alone
    await db.durable()
    assert seen == ["BEGIN", "SAVEPOINT", "RELEASE", "COMMIT"]


async def test_a_failing_first_turn_rolls_back_and_the_next_turn_opens_a_new_group(
    db: Database,
) -> None:
    before = db.commits
    with pytest.raises(RuntimeError), db.transaction():
        db.execute("INSERT INTO t VALUES ('a', 1)")
        raise RuntimeError("the first turn of the group fails after a write")
    _turn(db, "b", 1)
    _turn(db, "c", 1)
    with pytest.raises(RuntimeError), db.transaction():
        db.execute("INSERT INTO t VALUES ('d', 1)")
        raise RuntimeError("a later turn of the group fails alone")
    await db.durable()
    assert _on_disk(db) == [("b", 1), ("c", 1)]
    assert db.commits == before + 1
