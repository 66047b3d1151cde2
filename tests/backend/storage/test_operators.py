"""Operator tokens, per-tenant settings and close requests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from understudy._store import ConflictError

if TYPE_CHECKING:
    from understudy._store._ports import Storage


def test_operator_api_is_off_until_an_active_token_exists(storage: Storage) -> None:
    with storage.read() as r:
        assert r.operators.any_active() is False
    with storage.transaction() as tx:
        tx.operators.add_token(digest="h1", token_id="t1", name="ops", now=1.0)  # noqa: S106
    with storage.read() as r:
        assert r.operators.any_active() is True
        token = r.operators.token_by_digest("h1")
        assert token is not None and (token.token_id, token.name, token.revoked_at) == (
            "t1",
            "ops",
            None,
        )
        assert r.operators.token_by_digest("nope") is None
    with storage.transaction() as tx:
        assert tx.operators.revoke_token("t1", 2.0) is True
        assert tx.operators.revoke_token("t1", 3.0) is False
    with storage.read() as r:
        assert r.operators.any_active() is False
        assert [(t.token_id, t.revoked_at) for t in r.operators.tokens()] == [("t1", 2.0)]


@pytest.mark.parametrize(("digest", "token_id"), [("h1", "t2"), ("h2", "t1")])
def test_operator_token_digest_and_id_are_unique(
    storage: Storage, digest: str, token_id: str
) -> None:
    with storage.transaction() as tx:
        tx.operators.add_token(digest="h1", token_id="t1", name="ops", now=1.0)  # noqa: S106
    with pytest.raises(ConflictError), storage.transaction() as tx:
        tx.operators.add_token(digest=digest, token_id=token_id, name="x", now=2.0)


def test_tokens_list_oldest_first(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.operators.add_token(digest="a", token_id="late", name="x", now=5.0)  # noqa: S106
        tx.operators.add_token(digest="b", token_id="early", name="y", now=1.0)  # noqa: S106
    with storage.read() as r:
        assert [t.token_id for t in r.operators.tokens()] == ["early", "late"]


def test_unattended_flag_defaults_off_and_is_set_per_tenant(storage: Storage) -> None:
    with storage.transaction() as tx:
        assert tx.operators.unattended_flag("acme") is False
        tx.operators.set_unattended_flag("acme", True, 1.0)
        assert tx.operators.unattended_flag("acme") is True
        assert tx.operators.unattended_flag("beta") is False
        tx.operators.set_unattended_flag("acme", False, 2.0)
        assert tx.operators.unattended_flag("acme") is False


def test_close_request_is_pending_until_done_and_asking_again_reopens_it(
    storage: Storage,
) -> None:
    with storage.transaction() as tx:
        tx.close_requests.request("s2", 2.0)
        tx.close_requests.request("s1", 1.0)
        assert tx.close_requests.pending() == ["s1", "s2"]
        assert tx.close_requests.done("s1", "closing", 3.0) is True
        assert tx.close_requests.done("nope", "closing", 3.0) is False
        assert tx.close_requests.pending() == ["s2"]
        done = tx.close_requests.get("s1")
        assert done is not None and (done.done_at, done.outcome) == (3.0, "closing")
        tx.close_requests.request("s1", 4.0)
        again = tx.close_requests.get("s1")
        assert again is not None
        assert (again.requested_at, again.done_at, again.outcome) == (4.0, None, None)
        assert tx.close_requests.get("nope") is None
