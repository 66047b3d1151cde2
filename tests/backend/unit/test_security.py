"""Tokens, derived keys, keyed hashes, socket tickets and the vault envelope."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
from typing import TYPE_CHECKING

import pytest

from understudy._security import (
    Keys,
    TicketClaims,
    TicketError,
    VaultError,
    digests_equal,
    generate_token,
    new_data_key,
    new_ticket_claims,
    open_sealed,
    profile_state_hash,
    pseudonym,
    request_fingerprint,
    seal,
    sign_ticket,
    token_digest,
    token_kind,
    unwrap_data_key,
    verify_ticket,
    wrap_data_key,
)

if TYPE_CHECKING:
    from collections.abc import Callable

NOW = 1_800_000_000.0


@pytest.fixture
def keys() -> Keys:
    return Keys.from_master(bytes(range(32)))


def _device_claims(now: float = NOW) -> TicketClaims:
    return new_ticket_claims(
        aud="device",
        tenant="acme",
        device="laptop-1",
        browser_epoch="5f1d2c3b-4a59-4e8f-a7b6-c5d4e3f2a1b0",
        actor="device:acme/laptop-1",
        now=now,
    )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _flip(text: str, index: int) -> str:
    replacement = "A" if text[index] != "A" else "B"
    return text[:index] + replacement + text[index + 1 :]


# --- tokens -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "prefix"), [("consumer", "usk_"), ("device", "udc_")])
def test_generated_tokens_carry_their_kind_prefix_and_256_bits(kind: str, prefix: str) -> None:
    token = generate_token(kind)  # type: ignore[arg-type]
    assert token.startswith(prefix)
    assert len(base64.urlsafe_b64decode(token[4:] + "=")) == 32
    assert token_kind(token) == kind


def test_generated_tokens_are_unique() -> None:
    assert len({generate_token("device") for _ in range(200)}) == 200


@pytest.mark.parametrize(
    "token",
    [
        "",
        "usk_",
        "xyz_" + "a" * 43,
        "usk_" + "a" * 42,
        "usk_" + "a" * 44,
        "usk_" + "a" * 42 + "=",
        "usk_" + "a" * 42 + "/",
        "USK_" + "a" * 43,
    ],
)
def test_token_kind_refuses_malformed_tokens(token: str) -> None:
    assert token_kind(token) is None


def test_token_digest_is_plain_sha256_hex() -> None:
    assert token_digest("abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_digests_equal_compares_values() -> None:
    digest = token_digest(generate_token("consumer"))
    assert digests_equal(digest, str(digest))
    assert not digests_equal(digest, token_digest("other"))


# --- derived keys and keyed hashes --------------------------------------------------------------


def test_short_master_key_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="at least 32 random bytes, got 31"):
        Keys.from_master(b"x" * 31)


def test_each_purpose_gets_its_own_key_and_derivation_is_deterministic() -> None:
    first = Keys.from_master(b"m" * 32)
    values = [getattr(first, f.name) for f in dataclasses.fields(Keys)]
    assert len(set(values)) == 5
    assert all(len(value) == 32 for value in values)
    assert Keys.from_master(b"m" * 32) == first
    assert Keys.from_master(b"n" * 32).ticket_signing != first.ticket_signing


def test_keys_repr_hides_key_bytes(keys: Keys) -> None:
    assert keys.ticket_signing.hex() not in repr(keys)
    assert repr(keys.ticket_signing) not in repr(keys)


def test_profile_state_hash_is_stable_and_differs_across_tenants(keys: Keys) -> None:
    value = "crm-bot-profile"
    digest = profile_state_hash(keys, "acme", value)
    assert digest == profile_state_hash(keys, "acme", value)
    assert len(digest) == 64
    assert digest != profile_state_hash(keys, "globex", value)
    assert value not in digest


def test_profile_state_hash_frames_tenant_and_value(keys: Keys) -> None:
    assert profile_state_hash(keys, "ab", "c") != profile_state_hash(keys, "a", "bc")


def test_profile_state_hash_depends_on_the_master_key(keys: Keys) -> None:
    other = Keys.from_master(b"\xff" * 32)
    assert profile_state_hash(keys, "acme", "p") != profile_state_hash(other, "acme", "p")


def test_pseudonyms_are_short_hex_and_never_contain_the_raw_value(keys: Keys) -> None:
    value = "acme"
    alias = pseudonym(keys, "tenant", value)
    assert len(alias) == 16
    int(alias, 16)
    assert value not in alias
    assert alias == pseudonym(keys, "tenant", value)


def test_pseudonyms_are_separated_by_kind(keys: Keys) -> None:
    assert pseudonym(keys, "tenant", "x") != pseudonym(keys, "device", "x")


def test_pseudonym_refuses_an_unknown_kind(keys: Keys) -> None:
    with pytest.raises(ValueError, match="unknown pseudonym kind 'url'"):
        pseudonym(keys, "url", "https://example.com")


def test_request_fingerprint_ignores_key_order_but_not_content(keys: Keys) -> None:
    body = {"kind": "click", "args": {"ref": "e1"}, "dryRun": False}
    reordered = {"dryRun": False, "args": {"ref": "e1"}, "kind": "click"}
    fingerprint = request_fingerprint(keys, "acme", "command", body)
    assert fingerprint == request_fingerprint(keys, "acme", "command", reordered)
    assert fingerprint != request_fingerprint(keys, "acme", "command", {**body, "dryRun": True})
    assert fingerprint != request_fingerprint(keys, "globex", "command", body)
    assert fingerprint != request_fingerprint(keys, "acme", "create", body)


def test_request_fingerprint_handles_non_ascii_and_refuses_nan(keys: Keys) -> None:
    assert request_fingerprint(keys, "t", "s", {"text": "bücher"}) != request_fingerprint(
        keys, "t", "s", {"text": "bucher"}
    )
    with pytest.raises(ValueError, match="not JSON compliant"):
        request_fingerprint(keys, "t", "s", {"x": float("nan")})


# --- tickets ------------------------------------------------------------------------------------


def test_new_ticket_claims_expire_after_60_seconds_with_a_random_jti() -> None:
    first, second = _device_claims(), _device_claims()
    assert first.exp == int(NOW) + 60
    assert first.jti != second.jti
    assert len(first.jti) >= 21


def test_ticket_round_trip(keys: Keys) -> None:
    claims = _device_claims()
    ticket = sign_ticket(keys, claims)
    assert ticket.startswith("ust1.")
    assert verify_ticket(keys, ticket, audience="device", now=NOW) == claims


def test_ticket_format_is_hmac_over_prefix_and_payload(keys: Keys) -> None:
    claims = dataclasses.replace(
        _device_claims(), aud="session", session="s-1", lease="l-1", lease_epoch=3
    )
    payload = _b64url(json.dumps(dataclasses.asdict(claims)).encode())
    signature = hmac.new(keys.ticket_signing, f"ust1.{payload}".encode(), hashlib.sha256)
    ticket = f"ust1.{payload}.{_b64url(signature.digest())}"
    assert verify_ticket(keys, ticket, audience="session", now=NOW) == claims


def test_ticket_with_a_flipped_payload_character_is_refused(keys: Keys) -> None:
    prefix, payload, signature = sign_ticket(keys, _device_claims()).split(".")
    tampered = f"{prefix}.{_flip(payload, len(payload) // 2)}.{signature}"
    with pytest.raises(TicketError) as caught:
        verify_ticket(keys, tampered, audience="device", now=NOW)
    assert caught.value.reason == "bad_signature"


@pytest.mark.parametrize("position", [0, 20, -1])
def test_ticket_with_a_flipped_signature_character_is_refused(keys: Keys, position: int) -> None:
    ticket = sign_ticket(keys, _device_claims())
    index = len(ticket) + position if position < 0 else ticket.rindex(".") + 1 + position
    with pytest.raises(TicketError) as caught:
        verify_ticket(keys, _flip(ticket, index), audience="device", now=NOW)
    assert caught.value.reason == "bad_signature"


def test_ticket_signed_under_another_master_key_is_refused(keys: Keys) -> None:
    ticket = sign_ticket(Keys.from_master(b"\x01" * 32), _device_claims())
    with pytest.raises(TicketError) as caught:
        verify_ticket(keys, ticket, audience="device", now=NOW)
    assert caught.value.reason == "bad_signature"


def test_ticket_is_valid_until_just_before_exp_and_expired_at_exp(keys: Keys) -> None:
    claims = _device_claims()
    ticket = sign_ticket(keys, claims)
    verify_ticket(keys, ticket, audience="device", now=claims.exp - 0.001)
    with pytest.raises(TicketError) as caught:
        verify_ticket(keys, ticket, audience="device", now=claims.exp)
    assert caught.value.reason == "expired"


def test_device_ticket_is_refused_on_the_session_socket(keys: Keys) -> None:
    ticket = sign_ticket(keys, _device_claims())
    with pytest.raises(TicketError) as caught:
        verify_ticket(keys, ticket, audience="session", now=NOW)
    assert caught.value.reason == "wrong_audience"


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda t: t + "." + "x" * (2049 - len(t)), "malformed"),
        (lambda t: "ust2" + t[4:], "malformed"),
        (lambda t: t.rsplit(".", 1)[0], "malformed"),
        (lambda t: t + ".extra", "malformed"),
        (lambda t: t + "é", "malformed"),
        (lambda t: t.rsplit(".", 1)[0] + ".!!!", "bad_signature"),
    ],
)
def test_malformed_tickets_are_refused(
    keys: Keys, mangle: Callable[[str], str], reason: str
) -> None:
    ticket = mangle(sign_ticket(keys, _device_claims()))
    with pytest.raises(TicketError) as caught:
        verify_ticket(keys, ticket, audience="device", now=NOW)
    assert caught.value.reason == reason


def test_overlong_ticket_is_refused_before_any_work(keys: Keys) -> None:
    with pytest.raises(TicketError) as caught:
        verify_ticket(keys, "ust1." + "a" * 2044, audience="device", now=NOW)
    assert caught.value.reason == "malformed"


def test_correctly_signed_payload_of_the_wrong_shape_is_malformed(keys: Keys) -> None:
    fields = dataclasses.asdict(_device_claims())
    for payload in (
        {**fields, "extra": 1},
        {**fields, "exp": "soon"},
        {**fields, "lease_epoch": True},
        {**fields, "aud": "admin"},
        [1, 2],
    ):
        body = _b64url(json.dumps(payload).encode())
        mac = hmac.new(keys.ticket_signing, f"ust1.{body}".encode(), hashlib.sha256).digest()
        with pytest.raises(TicketError) as caught:
            verify_ticket(keys, f"ust1.{body}.{_b64url(mac)}", audience="device", now=NOW)
        assert caught.value.reason == "malformed"


def test_ticket_errors_never_contain_the_ticket(keys: Keys) -> None:
    ticket = sign_ticket(keys, _device_claims())
    for token, audience, now in (
        (ticket, "session", NOW),
        (ticket, "device", NOW + 3600),
        (_flip(ticket, 10), "device", NOW),
    ):
        with pytest.raises(TicketError) as caught:
            verify_ticket(keys, token, audience=audience, now=now)  # type: ignore[arg-type]
        for part in token.split("."):
            assert part not in str(caught.value) or part == "ust1"


def test_verification_is_stateless_so_the_actor_must_consume_the_jti(keys: Keys) -> None:
    # Replay is refused by the target actor consuming the JTI atomically, not here.
    ticket = sign_ticket(keys, _device_claims())
    first = verify_ticket(keys, ticket, audience="device", now=NOW)
    assert verify_ticket(keys, ticket, audience="device", now=NOW).jti == first.jti


# --- vault --------------------------------------------------------------------------------------


def test_vault_round_trip_through_a_wrapped_data_key(keys: Keys) -> None:
    dek = new_data_key()
    assert len(dek) == 32
    wrapped = wrap_data_key(keys, "acme", dek)
    blob = seal(dek, b"hunter2-password", b"secret:acme/crm")
    assert b"hunter2" not in blob
    assert dek not in wrapped
    restored = unwrap_data_key(keys, "acme", wrapped)
    assert open_sealed(restored, blob, b"secret:acme/crm") == b"hunter2-password"


def test_sealing_twice_uses_fresh_nonces() -> None:
    dek = new_data_key()
    assert seal(dek, b"same", b"aad") != seal(dek, b"same", b"aad")


def test_tampered_sealed_blob_is_refused() -> None:
    dek = new_data_key()
    blob = seal(dek, b"plaintext", b"aad")
    for index in (0, 12, len(blob) - 1):
        tampered = bytearray(blob)
        tampered[index] ^= 0x01
        with pytest.raises(VaultError):
            open_sealed(dek, bytes(tampered), b"aad")
    with pytest.raises(VaultError):
        open_sealed(dek, blob[:20], b"aad")


def test_sealed_blob_is_bound_to_its_aad_and_key() -> None:
    dek = new_data_key()
    blob = seal(dek, b"plaintext", b"secret:acme/a")
    with pytest.raises(VaultError):
        open_sealed(dek, blob, b"secret:acme/b")
    with pytest.raises(VaultError):
        open_sealed(new_data_key(), blob, b"secret:acme/a")


def test_wrapped_data_key_is_bound_to_tenant_and_master_key(keys: Keys) -> None:
    wrapped = wrap_data_key(keys, "acme", new_data_key())
    with pytest.raises(VaultError):
        unwrap_data_key(keys, "globex", wrapped)
    with pytest.raises(VaultError):
        unwrap_data_key(Keys.from_master(b"\x02" * 32), "acme", wrapped)


def test_data_keys_must_be_256_bits(keys: Keys) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        wrap_data_key(keys, "acme", b"short")
    with pytest.raises(ValueError, match="32 bytes"):
        seal(b"short", b"x", b"aad")
