"""Dialogs and blocked navigations: deduplicated, newest payloads kept, insertion order on ties."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from understudy._store.dialogs import KEEP_PAYLOADS

if TYPE_CHECKING:
    from understudy._store._ports import Repositories, SeenRecordRepository, Storage


def _table(repos: Repositories, which: str) -> SeenRecordRepository:
    return repos.dialogs if which == "dialogs" else repos.blocked


@pytest.mark.parametrize("which", ["dialogs", "blocked"])
def test_a_redelivered_id_is_not_stored_again(storage: Storage, which: str) -> None:
    with storage.transaction() as tx:
        table = _table(tx, which)
        assert table.record("s1", "r1", {"n": 1}, 1.0) is True
        assert table.record("s1", "r1", {"n": 2}, 2.0) is False
        assert table.record("s2", "r1", {"n": 3}, 2.0) is True, "ids are per session"
        assert table.newest("s1") == [{"n": 1}]
        assert table.seen_count("s1") == 1


@pytest.mark.parametrize("which", ["dialogs", "blocked"])
def test_ties_on_time_come_back_newest_inserted_first(storage: Storage, which: str) -> None:
    with storage.transaction() as tx:
        table = _table(tx, which)
        for record_id in ("b", "c", "a"):
            table.record("s1", record_id, {"id": record_id}, 5.0)
        table.record("s1", "z", {"id": "z"}, 4.0)
        assert [r["id"] for r in table.newest("s1")] == ["a", "c", "b", "z"]


@pytest.mark.parametrize("which", ["dialogs", "blocked"])
def test_only_the_newest_payloads_stay_and_old_ids_stay_seen(storage: Storage, which: str) -> None:
    total = KEEP_PAYLOADS + 5
    with storage.transaction() as tx:
        table = _table(tx, which)
        for i in range(total):
            table.record("s1", f"r{i}", {"i": i}, 1.0)  # one clock reading for all: ties
        newest = table.newest("s1")
        assert [r["i"] for r in newest] == list(range(total - 1, 4, -1))
        assert table.seen_count("s1") == total
        assert table.record("s1", "r0", {"i": 0}, 9.0) is False, "a trimmed id is still seen"
