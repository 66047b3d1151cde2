"""Masking of email addresses and phone numbers before anything is stored."""

from __future__ import annotations

import pytest

from synthetic_users._safety._pii import (
    PiiMasker,
    default_region,
    mask_own_inboxes,
    mask_pii,
)

INBOX = "sess-7f3a@inbox.syntheticusers.io"


@pytest.mark.parametrize(
    ("locale", "region"),
    [("en-US", "US"), ("en_GB", "GB"), ("de-AT", "AT"), ("fr", None), ("und", None), ("", None)],
)
def test_the_default_region_comes_from_the_locale(locale: str, region: str | None) -> None:
    assert default_region(locale) == region


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Write to jane.doe+shop@example.co.uk today", "Write to [email] today"),
        ("Contact: Support@Example.COM.", "Contact: [email]."),
        ("/signup?email=jane%40example.com&next=/", "/signup?email=[email]&next=/"),
        ("a@b.io, c_d@e-f.org", "[email], [email]"),
        ("müller@beispiel.de", "[email]"),
        ("textbox 'jane@example.com'", "textbox '[email]'"),
        ("(jane@example.com)", "([email])"),
        ("o'brien@example.com", "[email]"),
    ],
)
def test_email_addresses_are_masked(text: str, masked: str) -> None:
    assert mask_pii(text) == masked


@pytest.mark.parametrize(
    "text",
    ["@handle on social", "user@localhost", "price 3@4 for 2", "see docs/setup.md"],
)
def test_things_that_only_look_a_bit_like_addresses_stay(text: str) -> None:
    assert mask_pii(text) == text


@pytest.mark.parametrize(
    ("locale", "text", "masked"),
    [
        ("en-US", "Call us at (415) 555-0132 today", "Call us at [phone] today"),
        ("en-GB", "Ring 020 7946 0958 or 0800 123 4567", "Ring [phone] or [phone]"),
        ("fr-FR", "Appelez le 06 12 34 56 78", "Appelez le [phone]"),
        ("en-US", "UK office: +44 20 7946 0958", "UK office: [phone]"),
        ("fr", "Mobile +4915123456789 only", "Mobile [phone] only"),
        ("en-US", "tel:+33612345678", "tel:[phone]"),
    ],
)
def test_phone_numbers_in_national_and_international_formats_are_masked(
    locale: str, text: str, masked: str
) -> None:
    assert mask_pii(text, locale=locale) == masked


def test_e164_numbers_the_library_rejects_are_masked_too() -> None:
    # +1 555 555 0123 is a fictional range libphonenumber does not call valid.
    assert mask_pii("Test line +15555550123.", locale="en-US") == "Test line [phone]."


@pytest.mark.parametrize(
    "text",
    [
        "Order #48213377 placed",
        "Total: 1,299.00 GBP",
        "2026-12-01 10:30",
        "ref g2e14 and g12e3456",
        "ZIP 94103",
        "Step 3 of 12.",
    ],
)
def test_prices_dates_refs_and_order_numbers_stay(text: str) -> None:
    assert mask_pii(text, locale="en-GB") == text


def test_own_inboxes_become_the_persona_inbox_and_other_addresses_emails() -> None:
    masker = PiiMasker.for_persona("en-US", [INBOX.upper()])

    text = f"Sent to {INBOX} and {INBOX.replace('@', '+orders@')}; cc jane@example.com"

    assert masker.mask(text) == "Sent to [persona inbox] and [persona inbox]; cc [email]"


def test_an_address_that_only_ends_like_an_own_inbox_is_another_address() -> None:
    masker = PiiMasker.for_persona("en-US", [INBOX])

    assert masker.mask(f"x{INBOX}") == "[email]"


def test_mask_own_inboxes_leaves_other_addresses_alone() -> None:
    text = f"{INBOX} wrote to jane@example.com"

    assert mask_own_inboxes(text, [INBOX]) == "[persona inbox] wrote to jane@example.com"


def test_digits_of_an_address_are_never_read_as_a_phone_number() -> None:
    assert mask_pii("4155550132@sms.example.com", locale="en-US") == "[email]"


def test_json_values_are_masked_throughout_and_keys_kept() -> None:
    masker = PiiMasker.for_persona("en-US", [INBOX])
    transcript = {
        "turn": 3,
        "ok": True,
        "note": "It mailed jane@example.com",
        "steps": [{"jane@example.com": "call (415) 555-0132"}, None, 2.5, ("x", INBOX)],
    }

    assert masker.mask_value(transcript) == {
        "turn": 3,
        "ok": True,
        "note": "It mailed [email]",
        "steps": [{"jane@example.com": "call [phone]"}, None, 2.5, ["x", "[persona inbox]"]],
    }
