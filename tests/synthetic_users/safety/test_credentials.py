"""Envelope encryption of stored credentials: a master key wraps per-customer data keys."""

from __future__ import annotations

import base64
import os
import stat
from typing import TYPE_CHECKING

import pytest

from synthetic_users._config import ConfigError, load_settings
from synthetic_users._safety._credentials import (
    CredentialNotFound,
    Credentials,
    CredentialSealError,
    Keyring,
    MasterKeyError,
    load_master_key,
    open_password,
)
from synthetic_users._store import Store
from synthetic_users._store._credentials import CredentialRows

if TYPE_CHECKING:
    from pathlib import Path

PASSWORD = "Tr0ub4dor&3-unique-7c1e"  # noqa: S105 - the secret the test hunts for


def credentials(tmp_path: Path, keyring: Keyring | None = None) -> tuple[Store, Credentials]:
    store = Store.open(tmp_path / "su.db")
    return store, Credentials(store.db, keyring or Keyring.ephemeral())


def stored_bytes(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("su.db*")))


def test_the_master_key_file_is_created_once_readable_by_its_owner_only(tmp_path: Path) -> None:
    first = load_master_key(tmp_path)
    assert len(first) == 32
    assert stat.S_IMODE((tmp_path / "master.key").stat().st_mode) == 0o600
    assert load_master_key(tmp_path) == first  # the next start reads the same key
    assert [p.name for p in tmp_path.iterdir()] == ["master.key"]  # no temporary left


def test_a_master_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    load_master_key(tmp_path)
    os.chmod(tmp_path / "master.key", 0o644)
    with pytest.raises(MasterKeyError, match="chmod 600"):
        load_master_key(tmp_path)


def test_the_setting_wins_over_the_file_and_is_checked(tmp_path: Path) -> None:
    key = os.urandom(32)
    env = {"SYNTHETIC_USERS_MASTER_KEY": base64.b64encode(key).decode()}
    settings = load_settings(env)
    assert settings.master_key == key
    assert "master_key" not in repr(settings)
    assert load_master_key(tmp_path, settings.master_key) == key
    assert not (tmp_path / "master.key").exists()
    for bad in ("not base64!", base64.b64encode(b"short").decode()):
        with pytest.raises(ConfigError, match="SYNTHETIC_USERS_MASTER_KEY") as caught:
            load_settings({"SYNTHETIC_USERS_MASTER_KEY": bad})
        assert bad not in str(caught.value)


def test_a_password_is_stored_only_sealed_and_reveals_under_the_same_key(tmp_path: Path) -> None:
    keyring = Keyring.ephemeral()
    store, creds = credentials(tmp_path, keyring)
    record = creds.create(
        "acme", name="Shopper", username="shopper@example.com", password=PASSWORD, origin=None
    )
    assert record.credential_id.startswith("cred_")
    assert PASSWORD not in repr(record)
    store.close()
    raw = stored_bytes(tmp_path)
    for form in (PASSWORD.encode(), base64.b64encode(PASSWORD.encode()), PASSWORD.encode("utf-16")):
        assert form not in raw
    _, reopened = credentials(tmp_path, keyring)  # a restart with the same master key
    assert reopened.reveal("acme", record.credential_id) == PASSWORD
    _, other_master = credentials(tmp_path, Keyring.ephemeral())
    with pytest.raises(CredentialSealError):
        other_master.reveal("acme", record.credential_id)


def test_each_seal_has_its_own_nonce(tmp_path: Path) -> None:
    _, creds = credentials(tmp_path)
    a = creds.create("acme", name="a", username="u", password=PASSWORD, origin=None)
    b = creds.create("acme", name="b", username="u", password=PASSWORD, origin=None)
    rows = CredentialRows(creds._rows._db)
    sealed_a = rows.sealed_password("acme", a.credential_id)
    sealed_b = rows.sealed_password("acme", b.credential_id)
    assert sealed_a[:12] != sealed_b[:12] and sealed_a != sealed_b


def test_customers_have_their_own_data_keys_bound_to_their_ids(tmp_path: Path) -> None:
    keyring = Keyring.ephemeral()
    store, creds = credentials(tmp_path, keyring)
    creds.create("acme", name="a", username="u", password=PASSWORD, origin=None)
    creds.create("globex", name="g", username="u", password=PASSWORD, origin=None)
    rows = CredentialRows(store.db)
    acme, globex = rows.wrapped_key("acme"), rows.wrapped_key("globex")
    assert acme is not None and globex is not None
    assert keyring.unwrap("acme", acme) != keyring.unwrap("globex", globex)
    with pytest.raises(CredentialSealError):
        keyring.unwrap("globex", acme)  # a wrapped key copied to another customer


def test_a_sealed_password_moved_to_another_credential_does_not_open(tmp_path: Path) -> None:
    keyring = Keyring.ephemeral()
    store, creds = credentials(tmp_path, keyring)
    a = creds.create("acme", name="a", username="u", password=PASSWORD, origin=None)
    b = creds.create("acme", name="b", username="u", password="other", origin=None)  # noqa: S106
    rows = CredentialRows(store.db)
    sealed_a = rows.sealed_password("acme", a.credential_id)
    store.db.execute(
        "UPDATE credentials SET sealed_password = ? WHERE credential_id = ?",
        (sealed_a, b.credential_id),
    )
    with pytest.raises(CredentialSealError):
        creds.reveal("acme", b.credential_id)
    wrapped = rows.wrapped_key("acme")
    assert wrapped is not None
    assert open_password(keyring.unwrap("acme", wrapped), a.credential_id, sealed_a) == PASSWORD


def test_one_customer_never_reads_anothers_credential(tmp_path: Path) -> None:
    _, creds = credentials(tmp_path)
    record = creds.create("acme", name="a", username="u", password=PASSWORD, origin=None)
    with pytest.raises(CredentialNotFound):
        creds.get("globex", record.credential_id)
    with pytest.raises(CredentialNotFound):
        creds.reveal("globex", record.credential_id)
    with pytest.raises(CredentialNotFound):
        creds.delete("globex", record.credential_id)
    creds.delete("acme", record.credential_id)
    with pytest.raises(CredentialNotFound):
        creds.reveal("acme", record.credential_id)
