"""Credentials for the target site: envelope encryption, and their one use inside a session.

    master key ─AES-256-GCM─▶ customer data key ─AES-256-GCM─▶ sealed password
              (AAD: customer id)                (AAD: credential id)

The master key is `SYNTHETIC_USERS_MASTER_KEY` (base64 of 32 bytes) or `<data dir>/master.key`,
created with mode 0600 on first start. Every seal uses a fresh random 96-bit nonce (NIST SP
800-38D §8.2.2), stored before the ciphertext. The associated data binds each blob to its owner:
a wrapped key copied to another customer, or a sealed password to another credential, fails to
open instead of decrypting.

The plaintext password exists only in `Credentials.create` (sealed at once) and in
`SessionLogin.vault_ref`, which hands it to Understudy's vault for `fill_secret` and forgets it:
the model, the transcript, reports and logs never receive it.

Exceptions:

    CredentialError
    ├── MasterKeyError     the master key setting or file is unusable (misuse)
    └── CredentialSealError a blob does not open under this key (tampered, or another key)
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
import secrets
import stat
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from synthetic_users._store._credentials import CredentialNotFound, CredentialRecord, CredentialRows

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from synthetic_users._store import Database

log = logging.getLogger("synthetic_users.credentials")

KEY_BYTES: Final = 32
NONCE_BYTES: Final = 12
MASTER_KEY_FILE: Final = "master.key"
_KEY_AAD: Final = b"synthetic-users/v1/customer-key\x00"
_PASSWORD_AAD: Final = b"synthetic-users/v1/credential\x00"


class CredentialError(Exception):
    """Base of the errors of credential encryption."""


class MasterKeyError(CredentialError):
    """The master key is missing, malformed or readable by others; the message says what to do."""


class CredentialSealError(CredentialError):
    """A sealed blob does not open: tampered, moved to another owner, or another master key."""


def parse_master_key(text: str, variable: str = "SYNTHETIC_USERS_MASTER_KEY") -> bytes:
    """The 32 bytes a base64 setting names; never repeats the value in an error."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise MasterKeyError(
            f"{variable} is not valid base64; generate one with `openssl rand -base64 32`"
        ) from None
    if len(key) != KEY_BYTES:
        raise MasterKeyError(
            f"{variable} decodes to {len(key)} bytes, {KEY_BYTES} are needed; generate one "
            "with `openssl rand -base64 32`"
        )
    return key


def load_master_key(data_dir: Path, configured: bytes | None = None) -> bytes:
    """The configured master key, or `<data_dir>/master.key` (created 0600 on first use).

    Raises:
        MasterKeyError: the file has the wrong size or is readable by other users.
    """
    if configured is not None:
        return configured
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / MASTER_KEY_FILE
    if not path.exists():
        # Written under a temporary name and linked into place: two starting processes either
        # win the link or read the winner's whole key, never half of one.
        temp = data_dir / f".{MASTER_KEY_FILE}.{secrets.token_hex(8)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            with contextlib.suppress(FileExistsError):
                os.link(temp, path)
        finally:
            temp.unlink()
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        raise MasterKeyError(f"{path} is readable by other users; run `chmod 600 {path}`")
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise MasterKeyError(f"{path} holds {len(key)} bytes, {KEY_BYTES} are needed")
    return key


def _seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def _open(key: bytes, blob: bytes, aad: bytes) -> bytes:
    try:
        return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
    except (InvalidTag, ValueError):
        raise CredentialSealError("a sealed value does not open under this key") from None


@dataclass(frozen=True)
class Keyring:
    """The master key, which wraps and unwraps customer data keys. Never in `repr`."""

    master_key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.master_key) != KEY_BYTES:
            raise MasterKeyError(f"the master key must be {KEY_BYTES} bytes")

    @classmethod
    def ephemeral(cls) -> Keyring:
        """A random master key that lives as long as the process (tests, `create_app` default)."""
        return cls(secrets.token_bytes(KEY_BYTES))

    def wrap(self, customer_id: str, data_key: bytes) -> bytes:
        return _seal(self.master_key, data_key, _KEY_AAD + customer_id.encode())

    def unwrap(self, customer_id: str, wrapped: bytes) -> bytes:
        return _open(self.master_key, wrapped, _KEY_AAD + customer_id.encode())


def seal_password(data_key: bytes, credential_id: str, password: str) -> bytes:
    return _seal(data_key, password.encode(), _PASSWORD_AAD + credential_id.encode())


def open_password(data_key: bytes, credential_id: str, sealed: bytes) -> str:
    return _open(data_key, sealed, _PASSWORD_AAD + credential_id.encode()).decode()


class Credentials:
    """Stored credentials of every customer: create, read (no password), delete, reveal."""

    def __init__(
        self, db: Database, keyring: Keyring, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._rows = CredentialRows(db)
        self._keyring = keyring
        self._clock = clock

    def _data_key(self, customer_id: str) -> bytes:
        wrapped = self._rows.wrapped_key(customer_id)
        if wrapped is None:
            fresh = self._keyring.wrap(customer_id, AESGCM.generate_key(bit_length=256))
            wrapped = self._rows.add_wrapped_key(customer_id, fresh, self._clock())
        return self._keyring.unwrap(customer_id, wrapped)

    def create(
        self, customer_id: str, *, name: str, username: str, password: str, origin: str | None
    ) -> CredentialRecord:
        """Seal `password` under the customer's data key and store the credential."""
        record = CredentialRecord(
            f"cred_{uuid.uuid4().hex}", customer_id, name, username, origin, self._clock()
        )
        sealed = seal_password(self._data_key(customer_id), record.credential_id, password)
        self._rows.insert(record, sealed)
        log.info("credential %s stored for %s", record.credential_id, customer_id)
        return record

    def get(self, customer_id: str, credential_id: str) -> CredentialRecord:
        """Raises `CredentialNotFound`."""
        return self._rows.get(customer_id, credential_id)

    def page(
        self, customer_id: str, limit: int, after: tuple[float, str] | None = None
    ) -> list[CredentialRecord]:
        return self._rows.page(customer_id, limit, after)

    def delete(self, customer_id: str, credential_id: str) -> None:
        """Raises `CredentialNotFound`."""
        self._rows.delete(customer_id, credential_id)

    def reveal(self, customer_id: str, credential_id: str) -> str:
        """The plaintext password; only `SessionLogin` calls this, inside a session.

        Raises:
            CredentialNotFound: deleted since the run was created.
            CredentialSealError: the stored blob does not open (another master key?).
        """
        sealed = self._rows.sealed_password(customer_id, credential_id)
        return open_password(self._data_key(customer_id), credential_id, sealed)


__all__ = [
    "CredentialError",
    "CredentialNotFound",
    "CredentialRecord",
    "CredentialSealError",
    "Credentials",
    "Keyring",
    "MasterKeyError",
    "load_master_key",
    "parse_master_key",
]
