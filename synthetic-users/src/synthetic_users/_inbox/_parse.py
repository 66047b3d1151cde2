"""Decode one received message into what a persona reads: sender, subject, text, links.

The MIME structure is walked with the `email` package's modern policy: the best `text/plain`
part is preferred, an HTML-only message is turned into text (scripts and styles dropped, block
elements on their own lines), transfer encodings (quoted-printable, base64) and charsets are
decoded by the library. Links come from the HTML's `<a href>` (when there is HTML) and from bare
`http(s)://` URLs in the text, in order of appearance, each once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage, MIMEPart
from email.utils import getaddresses
from html.parser import HTMLParser
from typing import Final

MAX_LINKS: Final = 20
MAX_TEXT: Final = 20_000
_URL: Final = re.compile(r"https?://[^\s<>\"'()\[\]]+", re.IGNORECASE)
_BLOCK: Final = frozenset(
    {"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "section"}
)


@dataclass(frozen=True)
class ParsedMail:
    """A message as stored: who sent it, its subject, its text and its links."""

    mail_from: str  # the From header's address (the envelope sender when the header has none)
    subject: str
    text: str
    links: tuple[str, ...]


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.links: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "head"):
            self._skip += 1
        if tag in _BLOCK:
            self.parts.append("\n")
        if tag == "a":
            href = dict(attrs).get("href")
            if href and _URL.fullmatch(href.strip()):
                self.links.append(href.strip())

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head") and self._skip:
            self._skip -= 1
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, list[str]]:
    """The visible text of an HTML body and its links."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    lines = (
        re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(parser.parts).split("\n")
    )
    return "\n".join(line for line in lines if line), parser.links


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _content(part: MIMEPart) -> str:
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # an unknown charset or a broken encoding
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""


def _unique(links: list[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for link in links:
        seen.setdefault(link.rstrip(".,;:!?"), None)
    return tuple(seen)[:MAX_LINKS]


def parse_mail(raw: bytes, envelope_from: str = "") -> ParsedMail:
    """Decode `raw` (the bytes received over SMTP).

    Args:
        raw: the message as received.
        envelope_from: `MAIL FROM`, used when the message has no usable From header.
    """
    message = message_from_bytes(raw, policy=policy.default)
    if not isinstance(message, EmailMessage):  # pragma: no cover - policy.default gives these
        raise TypeError("the email policy did not give an EmailMessage")
    senders = [addr for _, addr in getaddresses([str(message.get("From", ""))]) if addr]
    subject = " ".join(str(message.get("Subject", "")).split())
    plain = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    links: list[str] = []
    if html is not None:
        html_text, links = html_to_text(_content(html))
    if plain is not None:
        text = _tidy(_content(plain))
    elif html is not None:
        text = html_text
    else:
        text = ""
    links.extend(m.group(0) for m in _URL.finditer(text))
    return ParsedMail(
        mail_from=(senders[0] if senders else envelope_from)[:320],
        subject=subject[:500],
        text=text[:MAX_TEXT],
        links=_unique(links),
    )
