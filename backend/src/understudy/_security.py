"""Tokens, derived keys, keyed hashes, socket tickets and vault envelope encryption.

Everything here is a pure function of its arguments (plus the OS random source); nothing does I/O.

Key derivation, one HKDF-SHA256 ``info`` label per purpose, so a key leaked or misused for one
purpose says nothing about the others::

    master secret (>= 32 bytes)
      |-- understudy/v1/ticket-signing       -> HMAC key for socket tickets
      |-- understudy/v1/profile-state        -> HMAC key for profileStateKey hashes
      |-- understudy/v1/telemetry            -> HMAC key for telemetry pseudonyms
      |-- understudy/v1/request-fingerprint  -> HMAC key for command/create fingerprints
      `-- understudy/v1/vault-kek            -> AES-256-GCM key-encryption key (KEK)

Vault envelope encryption (AES-256-GCM throughout; every blob is ``nonce(12) || ciphertext+tag``)::

    KEK --wrap(aad = tenant)--> wrapped per-tenant data key (DEK)   stored
    DEK --seal(aad = caller)--> sealed secret                        stored
    plaintext exists only in memory, while a grant frame is built

Exceptions::

    SecurityError
      |-- TicketError   (reason: malformed | bad_signature | expired | wrong_audience)
      `-- VaultError    (tampered blob, wrong key, wrong tenant or wrong aad)
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from understudy.generated.protocol import TICKET_TTL_MS

if TYPE_CHECKING:
    from collections.abc import Mapping

TokenKind = Literal["consumer", "device", "operator"]
Audience = Literal["device", "session"]

_TOKEN_PREFIXES: Final[dict[TokenKind, str]] = {
    "consumer": "usk_",
    "device": "udc_",
    "operator": "uop_",
}
# secrets.token_urlsafe(32) always yields 43 base64url characters (256 bits, no padding).
_TOKEN_BODY = re.compile(r"[A-Za-z0-9_-]{43}")
_PSEUDONYM_KINDS: Final = frozenset({"tenant", "device", "session", "actor", "credential"})
MIN_MASTER_KEY_BYTES: Final = 32
TICKET_TTL_S: Final = TICKET_TTL_MS // 1000  # whole seconds: a ticket's `exp` is an integer
TICKET_MAX_CHARS: Final = 2048
_TICKET_PREFIX: Final = "ust1"
_NONCE_BYTES: Final = 12
_DEK_BYTES: Final = 32


class SecurityError(Exception):
    """Base class of the errors raised by this module."""


class TicketError(SecurityError):
    """A socket ticket was refused; ``reason`` is a stable code and the ticket is never included."""

    def __init__(
        self, reason: Literal["malformed", "bad_signature", "expired", "wrong_audience"]
    ) -> None:
        super().__init__(f"socket ticket refused: {reason}")
        self.reason = reason


class VaultError(SecurityError):
    """A vault blob failed authentication: tampered, or opened with the wrong key, tenant or aad."""


# --- tokens -------------------------------------------------------------------------------------


def generate_token(kind: TokenKind) -> str:
    """Return a fresh 256-bit token: ``usk_…`` consumer, ``udc_…`` device, ``uop_…`` operator."""
    return _TOKEN_PREFIXES[kind] + secrets.token_urlsafe(32)


def token_kind(token: str) -> TokenKind | None:
    """Return which kind of token ``token`` looks like, or None when it is malformed."""
    for kind, prefix in _TOKEN_PREFIXES.items():
        if token.startswith(prefix) and _TOKEN_BODY.fullmatch(token[len(prefix) :]):
            return kind
    return None


def token_digest(token: str) -> str:
    """Return the SHA-256 hex digest under which a token is stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def digests_equal(a: str, b: str) -> bool:
    """Compare two digests in constant time."""
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


# --- derived keys and keyed hashes --------------------------------------------------------------


def _derive(master: bytes, label: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label.encode()).derive(master)


@dataclass(frozen=True)
class Keys:
    """Per-purpose keys derived from one master secret. Key bytes are kept out of ``repr``."""

    ticket_signing: bytes = field(repr=False)
    profile_state: bytes = field(repr=False)
    telemetry: bytes = field(repr=False)
    request_fingerprint: bytes = field(repr=False)
    vault_kek: bytes = field(repr=False)

    @classmethod
    def from_master(cls, master: bytes) -> Keys:
        """Derive every purpose key from ``master``.

        Raises:
            ValueError: ``master`` is shorter than 32 bytes.
        """
        if len(master) < MIN_MASTER_KEY_BYTES:
            raise ValueError(
                f"the master key must be at least {MIN_MASTER_KEY_BYTES} random bytes, got "
                f"{len(master)}; generate one with `head -c 32 /dev/urandom | base64`"
            )
        return cls(
            ticket_signing=_derive(master, "understudy/v1/ticket-signing"),
            profile_state=_derive(master, "understudy/v1/profile-state"),
            telemetry=_derive(master, "understudy/v1/telemetry"),
            request_fingerprint=_derive(master, "understudy/v1/request-fingerprint"),
            vault_kek=_derive(master, "understudy/v1/vault-kek"),
        )


def _framed(*parts: str) -> bytes:
    # An 8-byte length before each part makes the encoding injective: ("ab", "c") != ("a", "bc").
    out = bytearray()
    for part in parts:
        raw = part.encode("utf-8")
        out += len(raw).to_bytes(8, "big") + raw
    return bytes(out)


def _hmac_hex(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def profile_state_hash(keys: Keys, tenant: str, value: str) -> str:
    """Return the keyed hash of a ``profileStateKey``, separated per tenant."""
    return _hmac_hex(keys.profile_state, _framed(tenant, value))


def pseudonym(keys: Keys, kind: str, value: str) -> str:
    """Return a 16-hex-character telemetry pseudonym for an identifier of the given kind.

    Raises:
        ValueError: ``kind`` is not tenant, device, session, actor or credential.
    """
    if kind not in _PSEUDONYM_KINDS:
        raise ValueError(f"unknown pseudonym kind {kind!r}; use one of {sorted(_PSEUDONYM_KINDS)}")
    return _hmac_hex(keys.telemetry, _framed(kind, value))[:16]


def canonical_json(payload: Mapping[str, Any]) -> bytes:
    """Serialise ``payload`` deterministically (sorted keys, no spaces, UTF-8, no NaN)."""
    text = json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def request_fingerprint(keys: Keys, tenant: str, scope: str, payload: Mapping[str, Any]) -> str:
    """Return the keyed fingerprint of a request body within a tenant and a scope."""
    return _hmac_hex(keys.request_fingerprint, _framed(tenant, scope) + canonical_json(payload))


# --- socket tickets -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TicketClaims:
    """What a socket ticket binds. Single use is enforced by the target actor consuming ``jti``."""

    aud: Audience
    tenant: str
    device: str
    session: str | None
    lease: str | None
    browser_epoch: str
    lease_epoch: int | None
    actor: str
    exp: int
    jti: str


_CLAIM_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "aud": (str,),
    "tenant": (str,),
    "device": (str,),
    "session": (str, type(None)),
    "lease": (str, type(None)),
    "browser_epoch": (str,),
    "lease_epoch": (int, type(None)),
    "actor": (str,),
    "exp": (int,),
    "jti": (str,),
}


def new_ticket_claims(
    *,
    aud: Audience,
    tenant: str,
    device: str,
    browser_epoch: str,
    actor: str,
    now: float,
    session: str | None = None,
    lease: str | None = None,
    lease_epoch: int | None = None,
) -> TicketClaims:
    """Return claims with a fresh random ``jti`` and ``exp`` 60 s after ``now``."""
    return TicketClaims(
        aud=aud,
        tenant=tenant,
        device=device,
        session=session,
        lease=lease,
        browser_epoch=browser_epoch,
        lease_epoch=lease_epoch,
        actor=actor,
        exp=int(now) + TICKET_TTL_S,
        jti=secrets.token_urlsafe(16),
    )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]+", text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _ticket_mac(keys: Keys, signed_part: str) -> bytes:
    return hmac.new(keys.ticket_signing, signed_part.encode("ascii"), hashlib.sha256).digest()


def sign_ticket(keys: Keys, claims: TicketClaims) -> str:
    """Return ``ust1.<payload>.<signature>`` for ``claims``."""
    signed_part = f"{_TICKET_PREFIX}.{_b64url(canonical_json(dataclasses.asdict(claims)))}"
    return f"{signed_part}.{_b64url(_ticket_mac(keys, signed_part))}"


def verify_ticket(keys: Keys, token: str, *, audience: Audience, now: float) -> TicketClaims:
    """Check a ticket's signature, audience and expiry, and return its claims.

    Replay is not checked here: the actor the ticket targets consumes ``jti`` atomically.

    Raises:
        TicketError: with ``reason`` malformed, bad_signature, expired (at or after ``exp``) or
            wrong_audience.
    """
    if not isinstance(token, str) or len(token) > TICKET_MAX_CHARS or not token.isascii():
        raise TicketError("malformed")
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != _TICKET_PREFIX:
        raise TicketError("malformed")
    signed_part = f"{parts[0]}.{parts[1]}"
    # The payload is attacker-controlled: authenticate it before parsing a single byte of it.
    # Comparing the encoded form (not decoded bytes) also refuses non-canonical base64 variants.
    expected = _b64url(_ticket_mac(keys, signed_part))
    if not hmac.compare_digest(parts[2].encode("ascii"), expected.encode("ascii")):
        raise TicketError("bad_signature")
    try:
        data = json.loads(_unb64url(parts[1]))
    except (ValueError, binascii.Error):
        raise TicketError("malformed") from None
    claims = _claims_from(data)
    if claims.aud != audience:
        raise TicketError("wrong_audience")
    if now >= claims.exp:
        raise TicketError("expired")
    return claims


def _claims_from(data: object) -> TicketClaims:
    if not isinstance(data, dict) or set(data) != set(_CLAIM_TYPES):
        raise TicketError("malformed")
    for name, types in _CLAIM_TYPES.items():
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, types):
            raise TicketError("malformed")
    if data["aud"] not in ("device", "session"):
        raise TicketError("malformed")
    return TicketClaims(**data)


# --- vault --------------------------------------------------------------------------------------


def new_data_key() -> bytes:
    """Return a fresh 256-bit data key."""
    return AESGCM.generate_key(bit_length=256)


def _encrypt(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(_NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def _decrypt(key: bytes, blob: bytes, aad: bytes) -> bytes:
    if len(blob) < _NONCE_BYTES + 16:
        raise VaultError("vault blob is truncated")
    try:
        return AESGCM(key).decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], aad)
    except InvalidTag:
        raise VaultError(
            "vault blob failed authentication (tampered, or wrong key or aad)"
        ) from None


def _check_dek(dek: bytes) -> None:
    if len(dek) != _DEK_BYTES:
        raise ValueError(f"a data key is {_DEK_BYTES} bytes, got {len(dek)}")


def wrap_data_key(keys: Keys, tenant: str, dek: bytes) -> bytes:
    """Encrypt a tenant's data key under the KEK, bound to that tenant."""
    _check_dek(dek)
    return _encrypt(keys.vault_kek, dek, _framed("understudy/v1/dek", tenant))


def unwrap_data_key(keys: Keys, tenant: str, blob: bytes) -> bytes:
    """Decrypt a tenant's data key.

    Raises:
        VaultError: the blob was tampered with or belongs to another tenant or master key.
    """
    dek = _decrypt(keys.vault_kek, blob, _framed("understudy/v1/dek", tenant))
    if len(dek) != _DEK_BYTES:
        raise VaultError("unwrapped data key has the wrong length")
    return dek


def seal(dek: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """Encrypt ``plaintext`` under a data key; ``aad`` is authenticated but not encrypted."""
    _check_dek(dek)
    return _encrypt(dek, plaintext, aad)


def open_sealed(dek: bytes, blob: bytes, aad: bytes) -> bytes:
    """Decrypt a blob made by :func:`seal`.

    Raises:
        VaultError: the blob was tampered with, or ``dek`` or ``aad`` differ from sealing time.
    """
    _check_dek(dek)
    return _decrypt(dek, blob, aad)
