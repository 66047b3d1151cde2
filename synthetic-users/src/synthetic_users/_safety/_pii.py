"""Masking of email addresses and phone numbers in any text, before it is stored.

Transcripts, reactions and reports quote pages the persona saw, and pages show people's contact
details. `PiiMasker.mask` replaces them:

- the persona's own inbox addresses (the per-session addresses a run hands the site) become
  `[persona inbox]`, so a report can still say where a confirmation went;
- every other email address becomes `[email]`, in plain or URL-encoded form (`jane%40x.com`,
  as sign-up links carry them);
- phone numbers become `[phone]`: libphonenumber's `PhoneNumberMatcher` finds numbers written
  in the persona's region's national formats and in international format, and only valid
  numbers (its `VALID` leniency: prices, dates and order numbers are left alone); a fallback
  takes any E.164-shaped `+` number it rejected (test and reserved ranges such as +1 555 …).

Emails go first, so the digits of an address are never read as a phone number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import phonenumbers

if TYPE_CHECKING:
    from collections.abc import Iterable

EMAIL: Final = "[email]"
PHONE: Final = "[phone]"
PERSONA_INBOX: Final = "[persona inbox]"

# Local part, then `@` (or its URL encoding), then a dotted domain with a letter TLD. Wider than
# RFC 5322's common subset on purpose: masking a near-address costs less than leaking one. The
# local part never starts with a quote or a dot, so a quoted address (`textbox 'jane@x.com'`)
# keeps its quotes and `...jane@x.com` its dots.
_EMAIL_RE: Final = re.compile(
    r"(?<![\w%+-])(?P<local>[\w%+-][\w.%+'-]*)(?:@|%40)"
    r"(?P<domain>[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,})(?![\w-])",
    re.IGNORECASE,
)
# E.164: a plus, then up to 15 digits with no leading zero (ITU-T E.164 §6.1).
_E164_RE: Final = re.compile(r"(?<![\w+])\+[1-9]\d{6,14}(?!\d)")
_REGION_RE: Final = re.compile(r"^[A-Za-z]{2,3}[-_](?P<region>[A-Za-z]{2}|\d{3})\b")


def default_region(locale: str) -> str | None:
    """The region of a BCP 47 locale (`en-US` → `US`, `de_AT` → `AT`), or None (`fr`, `und`).

    Only regions libphonenumber knows are returned; with None, only international numbers
    (`+…`) are recognised.
    """
    match = _REGION_RE.match(locale.strip())
    if match is None:
        return None
    region = match.group("region").upper()
    return region if region in phonenumbers.SUPPORTED_REGIONS else None


def _is_own(match: re.Match[str], own_inboxes: frozenset[str]) -> bool:
    local, domain = match.group("local"), match.group("domain").lower()
    untagged = local.split("+", 1)[0]
    return any(f"{part}@{domain}".lower() in own_inboxes for part in (local, untagged))


@dataclass(frozen=True)
class PiiMasker:
    """Masks emails and phone numbers; one per persona session.

    Args:
        region: the default region for national phone formats (see `default_region`).
        own_inboxes: the persona's own addresses, masked as `[persona inbox]`; a `+tag` on
            one of them (`inbox+news@…`) counts as the same inbox.
    """

    region: str | None = None
    own_inboxes: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def for_persona(cls, locale: str, own_inboxes: Iterable[str] = ()) -> PiiMasker:
        """A masker for a persona of `locale` whose inboxes are `own_inboxes`."""
        return cls(default_region(locale), frozenset(a.strip().lower() for a in own_inboxes))

    def mask(self, text: str) -> str:
        """`text` with every email address and phone number replaced by its placeholder."""
        return self.mask_phones(self.mask_emails(text))

    def mask_emails(self, text: str) -> str:
        """`text` with own inbox addresses as `[persona inbox]` and other addresses as `[email]`."""
        return _EMAIL_RE.sub(self._email_placeholder, text)

    def _email_placeholder(self, match: re.Match[str]) -> str:
        return PERSONA_INBOX if _is_own(match, self.own_inboxes) else EMAIL

    def mask_phones(self, text: str) -> str:
        """`text` with every phone number replaced by `[phone]`."""
        spans = [
            (match.start, match.end)
            for match in phonenumbers.PhoneNumberMatcher(
                text, self.region, leniency=phonenumbers.Leniency.VALID
            )
        ]
        masked = _replace_spans(text, spans)
        return _E164_RE.sub(PHONE, masked)

    def mask_value(self, value: Any) -> Any:
        """A JSON-like value (dicts, lists, strings, scalars) with every string masked.

        Keys are kept as they are: they are the document's structure, not data someone typed.
        """
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {key: self.mask_value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.mask_value(item) for item in value]
        return value


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    parts: list[str] = []
    position = 0
    for start, end in spans:  # the matcher yields them in order, never overlapping
        parts.append(text[position:start])
        parts.append(PHONE)
        position = end
    parts.append(text[position:])
    return "".join(parts)


def mask_pii(text: str, *, locale: str = "en-US", own_inboxes: Iterable[str] = ()) -> str:
    """One-off masking of `text` for a persona of `locale` (see `PiiMasker`)."""
    return PiiMasker.for_persona(locale, own_inboxes).mask(text)


def mask_own_inboxes(text: str, own_inboxes: Iterable[str]) -> str:
    """`text` with only the given addresses replaced by `[persona inbox]`; others stay."""
    own = frozenset(address.strip().lower() for address in own_inboxes)
    return _EMAIL_RE.sub(
        lambda match: PERSONA_INBOX if _is_own(match, own) else match.group(), text
    )
