"""Signatures: the Standard Webhooks test vector, and agreement with an independent verifier."""

from __future__ import annotations

import base64

from synthetic_users._webhooks import headers, new_secret, signature

from ._helpers import verify


def test_the_signature_matches_the_standard_webhooks_test_vector() -> None:
    # The vector the Standard Webhooks reference libraries test against.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # noqa: S105 (the published vector)
    got = signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert got == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_new_secret_is_whsec_and_32_random_bytes() -> None:
    one, two = new_secret(), new_secret()
    assert one.startswith("whsec_") and one != two
    assert len(base64.b64decode(one.removeprefix("whsec_"))) == 32


def test_signed_headers_verify_independently_and_a_changed_body_does_not() -> None:
    secret, body = new_secret(), b'{"type":"run.completed"}'
    sent = headers(secret, "msg_1", 1_780_000_000, body)
    assert sent["webhook-id"] == "msg_1" and sent["webhook-timestamp"] == "1780000000"
    assert verify(secret, sent, body)
    assert not verify(secret, sent, body + b" ")
    assert not verify(new_secret(), sent, body)
