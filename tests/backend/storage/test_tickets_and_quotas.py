"""Single-use ticket ids and quota counters, including two writers on two connections."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from understudy._store.quotas import WINDOW_S

if TYPE_CHECKING:
    from understudy._store._ports import Storage

    from .conftest import Engine


def test_a_ticket_id_is_consumed_once(storage: Storage) -> None:
    with storage.transaction() as tx:
        assert tx.tickets.consume("j1", expires_at=100.0, now=50.0) is True
        assert tx.tickets.consume("j1", expires_at=100.0, now=51.0) is False
        assert tx.tickets.consume("j2", expires_at=100.0, now=51.0) is True


def test_an_expired_ticket_id_is_forgotten_only_a_minute_after_expiry(storage: Storage) -> None:
    with storage.transaction() as tx:
        assert tx.tickets.consume("j1", expires_at=100.0, now=50.0) is True
    with storage.transaction() as tx:
        assert tx.tickets.consume("j1", expires_at=100.0, now=159.0) is False
    with storage.transaction() as tx:
        assert tx.tickets.consume("j1", expires_at=300.0, now=161.0) is True


def test_quota_counts_up_to_the_limit_then_refuses_with_the_wait(storage: Storage) -> None:
    now = 10 * WINDOW_S + 15.5
    with storage.transaction() as tx:
        assert [tx.quotas.take("cmd", "acme/bot", 3, now) for _ in range(3)] == [None] * 3
        assert tx.quotas.take("cmd", "acme/bot", 3, now) == 45.0
        assert tx.quotas.used("cmd", "acme/bot", now) == 3, "a refused use is not counted"
        assert tx.quotas.take("cmd", "acme/other", 3, now) is None, "subjects count apart"
        assert tx.quotas.take("create", "acme/bot", 3, now) is None, "scopes count apart"


def test_quota_window_resets_on_the_minute(storage: Storage) -> None:
    with storage.transaction() as tx:
        assert tx.quotas.take("cmd", "s", 1, 59.0) is None
        assert tx.quotas.take("cmd", "s", 1, 59.9) == 1.0, "never less than one second"
        assert tx.quotas.take("cmd", "s", 1, 60.0) is None
        assert tx.quotas.used("cmd", "s", 60.0) == 1


def test_a_zero_limit_refuses_without_counting(storage: Storage) -> None:
    with storage.transaction() as tx:
        assert tx.quotas.take("cmd", "s", 0, 30.0) == 30.0
        assert tx.quotas.used("cmd", "s", 30.0) == 0


def test_several_quotas_are_taken_in_one_call_each_within_its_own_limit(
    storage: Storage,
) -> None:
    uses = [("session", "s1", 2), ("tenant", "acme", 3)]
    with storage.transaction() as tx:
        assert tx.quotas.take_all(uses, 30.0) == [None, None]
        assert tx.quotas.take_all(uses, 31.0) == [None, None]
        # The session quota is full: refused with the wait; the tenant's still fits (and is
        # counted: a caller that refuses rolls back).
        assert tx.quotas.take_all(uses, 32.0) == [28.0, None]
        assert (tx.quotas.used("session", "s1", 32.0), tx.quotas.used("tenant", "acme", 32.0)) == (
            2,
            3,
        )
        assert tx.quotas.take_all(uses, 33.0) == [27.0, 27.0]
        assert tx.quotas.take_all([("session", "s1", 0), ("tenant", "acme", 9)], 34.0) == [
            26.0,
            None,
        ]
        # A new window starts both at one and forgets the old ones.
        assert tx.quotas.take_all(uses, 60.0) == [None, None]
        assert tx.quotas.used("session", "s1", 60.0) == 1
        assert tx.quotas.used("session", "s1", 30.0) == 0
        assert tx.quotas.take_all([], 60.0) == []
        with pytest.raises(ValueError, match="each scope once"):
            tx.quotas.take_all([("session", "s1", 2), ("session", "s2", 2)], 60.0)


def test_quota_holds_exactly_under_two_writers_racing(engine: Engine, storage: Storage) -> None:
    other = engine.open()
    limit, tries = 25, 40
    granted: list[int] = [0, 0]
    start = threading.Barrier(2)

    def hammer(index: int, target: Storage) -> None:
        start.wait()
        for _ in range(tries):
            with target.transaction() as tx:
                if tx.quotas.take("cmd", "acme/bot", limit, 30.0) is None:
                    granted[index] += 1

    threads = [threading.Thread(target=hammer, args=(i, s)) for i, s in enumerate((storage, other))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(granted) == limit
    with storage.read() as r:
        assert r.quotas.used("cmd", "acme/bot", 30.0) == limit


def test_the_last_slot_taken_in_an_open_transaction_is_not_granted_twice(
    engine: Engine, storage: Storage
) -> None:
    other = engine.open()
    result: list[float | None] = []

    def take_on_other() -> None:
        with other.transaction() as tx:
            result.append(tx.quotas.take("cmd", "s", 2, 30.0))

    with storage.transaction() as tx:
        assert tx.quotas.take("cmd", "s", 2, 30.0) is None
        assert tx.quotas.take("cmd", "s", 2, 30.0) is None
        racer = threading.Thread(target=take_on_other)
        racer.start()  # waits for this transaction (a writer lock or the counter's row lock)
    racer.join(timeout=30)
    assert result == [30.0]


def test_a_ticket_id_raced_on_two_connections_is_consumed_once(
    engine: Engine, storage: Storage
) -> None:
    other = engine.open()
    outcomes: list[bool] = []
    start = threading.Barrier(2)
    lock = threading.Lock()

    def consume(target: Storage) -> None:
        start.wait()
        with target.transaction() as tx:
            fresh = tx.tickets.consume("j1", expires_at=100.0, now=50.0)
        with lock:
            outcomes.append(fresh)

    threads = [threading.Thread(target=consume, args=(s,)) for s in (storage, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == [False, True]
