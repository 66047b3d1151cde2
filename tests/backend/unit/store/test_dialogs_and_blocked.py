"""Dialogs and blocked navigations: deduplicated by id, payloads kept for the newest 50."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from understudy._store import blocked, dialogs

if TYPE_CHECKING:
    from understudy._store import Database
    from understudy._store._ports import SeenRecordRepository

# (repository name, payloads it keeps)
STORES = [
    pytest.param("dialogs", dialogs.KEEP_PAYLOADS, id="dialogs"),
    pytest.param("blocked", blocked.KEEP_PAYLOADS, id="blocked"),
]


def _repo(db: Database, name: str) -> SeenRecordRepository:
    repository: SeenRecordRepository = getattr(db.storage.repos, name)
    return repository


def _payload(i: int) -> dict[str, Any]:
    return {"n": i}


@pytest.mark.parametrize(("name", "keep"), STORES)
def test_a_redelivered_id_is_not_stored_twice(db: Database, name: str, keep: int) -> None:
    store = _repo(db, name)
    assert store.record("s1", "d1", _payload(1), now=1.0) is True
    assert store.record("s1", "d1", _payload(99), now=2.0) is False
    assert store.newest("s1") == [_payload(1)]


@pytest.mark.parametrize(("name", "keep"), STORES)
def test_only_the_newest_payloads_are_kept_and_old_ids_still_dedupe(
    db: Database, name: str, keep: int
) -> None:
    store = _repo(db, name)
    total = keep + 5
    for i in range(total):
        assert store.record("s1", f"d{i}", _payload(i), now=float(i))
    newest = store.newest("s1")
    assert newest == [_payload(i) for i in reversed(range(5, total))]
    # The oldest record lost its payload, not its id: a redelivery is still recognised.
    assert store.record("s1", "d0", _payload(0), now=1_000.0) is False


@pytest.mark.parametrize(("name", "keep"), STORES)
def test_sessions_are_kept_apart(db: Database, name: str, keep: int) -> None:
    store = _repo(db, name)
    assert store.record("s1", "d1", _payload(1), now=1.0)
    assert store.record("s2", "d1", _payload(2), now=1.0)  # the same id on another session
    assert store.newest("s2") == [_payload(2)]


def test_every_seen_dialog_is_counted_with_or_without_payload(db: Database) -> None:
    for i in range(dialogs.KEEP_PAYLOADS + 3):
        db.storage.repos.dialogs.record("s1", f"d{i}", _payload(i), now=float(i))
    assert db.storage.repos.dialogs.seen_count("s1") == dialogs.KEEP_PAYLOADS + 3
    assert db.storage.repos.dialogs.seen_count("other") == 0
