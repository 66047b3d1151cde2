"""Exact per-minute quota counters."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from understudy._store import Database


def test_uses_within_the_limit_are_admitted_and_the_next_is_told_when_to_retry(
    db: Database,
) -> None:
    assert [db.storage.repos.quotas.take("commands", "s1", 3, now=120.0 + i) for i in range(3)] == [
        None
    ] * 3
    # The window is [120, 180): a use at 125 s waits until 180 s.
    assert db.storage.repos.quotas.take("commands", "s1", 3, now=125.0) == 55.0


def test_a_refused_use_is_not_counted(db: Database) -> None:
    assert db.storage.repos.quotas.take("commands", "s1", 1, now=0.0) is None
    for _ in range(5):
        assert db.storage.repos.quotas.take("commands", "s1", 1, now=10.0) is not None
    row = db.one("SELECT count FROM quota_counters WHERE scope = 'commands' AND subject = 's1'")
    assert row is not None and row["count"] == 1


def test_a_new_window_starts_from_zero_and_forgets_the_old_one(db: Database) -> None:
    assert db.storage.repos.quotas.take("commands", "s1", 1, now=59.9) is None
    assert db.storage.repos.quotas.take("commands", "s1", 1, now=59.95) is not None
    assert db.storage.repos.quotas.take("commands", "s1", 1, now=60.0) is None
    windows = db.query("SELECT window_start FROM quota_counters WHERE subject = 's1'")
    assert [r["window_start"] for r in windows] == [60]


def test_the_wait_is_at_least_one_second(db: Database) -> None:
    assert db.storage.repos.quotas.take("commands", "s1", 1, now=0.0) is None
    assert db.storage.repos.quotas.take("commands", "s1", 1, now=59.99) == 1.0


def test_scopes_and_subjects_count_apart(db: Database) -> None:
    assert db.storage.repos.quotas.take("commands", "s1", 1, now=0.0) is None
    assert db.storage.repos.quotas.take("commands", "s2", 1, now=0.0) is None
    assert db.storage.repos.quotas.take("creates", "s1", 1, now=0.0) is None
    assert db.storage.repos.quotas.take("commands", "s1", 1, now=0.0) is not None
