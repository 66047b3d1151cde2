"""Transactions: atomic, nested ones join, a failed turn leaves nothing, schema version."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from understudy._store import LATEST, ConflictError

from .conftest import new_session

if TYPE_CHECKING:
    from understudy._store._ports import Storage

    from .conftest import Engine


def test_migrated_storage_is_at_the_latest_version_and_migrating_again_is_a_no_op(
    storage: Storage,
) -> None:
    assert storage.schema_version() == LATEST
    assert storage.migrate(2.0) == []


def test_an_error_inside_a_transaction_rolls_it_back(storage: Storage) -> None:
    with pytest.raises(RuntimeError), storage.transaction() as tx:
        tx.sessions.insert(new_session("s1"))
        raise RuntimeError("turn failed")
    with storage.read() as r:
        assert r.sessions.get("s1") is None


def test_a_nested_transaction_joins_the_outer_one(storage: Storage) -> None:
    with pytest.raises(RuntimeError), storage.transaction() as outer:
        with storage.transaction() as inner:
            inner.sessions.insert(new_session("s1"))
        outer.sessions.insert(new_session("s2"))
        raise RuntimeError("outer failed")
    with storage.read() as r:
        assert r.sessions.get("s1") is None and r.sessions.get("s2") is None


def test_committed_writes_are_visible_on_another_connection(
    engine: Engine, storage: Storage
) -> None:
    other = engine.open()
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1"))
    with other.read() as r:
        assert r.sessions.get("s1") is not None


async def test_a_turn_that_conflicts_rolls_back_alone_and_the_others_become_durable(
    engine: Engine, storage: Storage
) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s0"))

    async def turn(session_id: str) -> None:
        with storage.transaction() as tx:
            tx.sessions.insert(new_session(f"{session_id}-ok"))
            tx.sessions.insert(new_session(session_id))
        await storage.durable()

    outcomes = await asyncio.gather(turn("s1"), turn("s0"), turn("s2"), return_exceptions=True)
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], ConflictError)
    with engine.open().read() as r:  # what another connection sees is what was committed
        assert r.sessions.get("s1-ok") is not None and r.sessions.get("s2-ok") is not None
        assert r.sessions.get("s0-ok") is None


def test_a_missing_required_value_is_not_reported_as_a_conflict(storage: Storage) -> None:
    with pytest.raises(Exception) as caught, storage.transaction() as tx:
        tx.sessions.insert(new_session(status=None))
    assert not isinstance(caught.value, ConflictError)
