"""Close requests written by the operator CLI and applied by the service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from understudy._store.close_requests import CloseRequest

if TYPE_CHECKING:
    from understudy._store import Database


def test_pending_requests_come_oldest_first_until_done(db: Database) -> None:
    db.storage.repos.close_requests.request("s2", now=2.0)
    db.storage.repos.close_requests.request("s1", now=1.0)
    assert db.storage.repos.close_requests.pending() == ["s1", "s2"]
    db.storage.repos.close_requests.done("s1", "closing", now=3.0)
    assert db.storage.repos.close_requests.pending() == ["s2"]
    assert db.storage.repos.close_requests.get("s1") == CloseRequest("s1", 1.0, 3.0, "closing")


def test_asking_again_reopens_an_applied_request(db: Database) -> None:
    db.storage.repos.close_requests.request("s1", now=1.0)
    db.storage.repos.close_requests.done("s1", "not_found", now=2.0)
    db.storage.repos.close_requests.request("s1", now=5.0)
    assert db.storage.repos.close_requests.get("s1") == CloseRequest("s1", 5.0, None, None)
    assert db.storage.repos.close_requests.pending() == ["s1"]


def test_an_unknown_session_has_no_request(db: Database) -> None:
    assert db.storage.repos.close_requests.get("nobody") is None
    assert db.storage.repos.close_requests.pending() == []
