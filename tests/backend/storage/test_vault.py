"""Vault storage: wrapped keys and sealed secrets, bytes in and bytes out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from understudy._store import ConflictError

if TYPE_CHECKING:
    from understudy._store._ports import Storage

WRAPPED = bytes(range(256))  # every byte value survives the round trip


def test_wrapped_key_round_trips_and_is_one_per_tenant(storage: Storage) -> None:
    with storage.transaction() as tx:
        assert tx.vault.wrapped_key("acme") is None
        tx.vault.add_wrapped_key("acme", WRAPPED, 1.0)
        tx.vault.add_wrapped_key("beta", b"b", 1.0)
    with pytest.raises(ConflictError), storage.transaction() as tx:
        tx.vault.add_wrapped_key("acme", b"again", 2.0)
    with storage.read() as r:
        assert r.vault.wrapped_key("acme") == WRAPPED
        assert r.vault.wrapped_keys() == [("acme", WRAPPED), ("beta", b"b")]


def test_replacing_a_wrapped_key(storage: Storage) -> None:
    with storage.transaction() as tx:
        assert tx.vault.replace_wrapped_key("acme", b"x") is False
        tx.vault.add_wrapped_key("acme", b"one", 1.0)
        assert tx.vault.replace_wrapped_key("acme", b"two") is True
        assert tx.vault.replace_wrapped_key("acme", b"three", created_at=5.0) is True
        assert tx.vault.wrapped_key("acme") == b"three"


def test_sealed_secrets_are_stored_replaced_listed_and_deleted(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.vault.put_secret("acme", "pw", WRAPPED, 1.0)
        tx.vault.put_secret("acme", "api", b"a", 1.0)
        tx.vault.put_secret("beta", "pw", b"other tenant", 1.0)
        tx.vault.put_secret("acme", "pw", b"replaced", 2.0)
    with storage.read() as r:
        assert r.vault.sealed("acme", "pw") == b"replaced"
        assert r.vault.sealed("acme", "missing") is None
        assert r.vault.exists("acme", "api") and not r.vault.exists("acme", "missing")
        assert r.vault.names("acme") == ["api", "pw"]
        assert r.vault.sealed_all("acme") == [("api", b"a"), ("pw", b"replaced")]
    with storage.transaction() as tx:
        assert tx.vault.delete("acme", "pw") is True
        assert tx.vault.delete("acme", "pw") is False
    with storage.read() as r:
        assert r.vault.names("acme") == ["api"]
        assert r.vault.names("beta") == ["pw"]
