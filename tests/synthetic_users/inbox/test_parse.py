"""Decoding received mail: MIME structure, transfer encodings, HTML-only bodies, links."""

from __future__ import annotations

from email.message import EmailMessage

from synthetic_users._inbox import parse_mail


def test_a_multipart_message_prefers_its_plain_text_and_keeps_the_html_links() -> None:
    msg = EmailMessage()
    msg["From"] = "Demo Shop <orders@shop.example>"
    msg["To"] = "abc@inbox.localhost"
    msg["Subject"] = "Confirm your order"
    msg.set_content("Hello,\n\nconfirm here: http://127.0.0.1:8000/confirm?t=abc\n")
    msg.add_alternative(
        '<p>Hello, <a href="http://127.0.0.1:8000/confirm?t=abc">confirm</a> or '
        '<a href="https://elsewhere.example/track">track</a></p>',
        subtype="html",
    )
    mail = parse_mail(msg.as_bytes())
    assert mail.mail_from == "orders@shop.example"
    assert mail.subject == "Confirm your order"
    assert mail.text == "Hello,\n\nconfirm here: http://127.0.0.1:8000/confirm?t=abc"
    assert "<p>" not in mail.text
    assert mail.links == (
        "http://127.0.0.1:8000/confirm?t=abc",
        "https://elsewhere.example/track",
    )


def test_quoted_printable_and_a_non_ascii_charset_are_decoded() -> None:
    raw = (
        b"From: shop@shop.example\r\n"
        b"To: abc@inbox.localhost\r\n"
        b"Subject: =?utf-8?q?Votre_commande_=C3=A0_confirmer?=\r\n"
        b"MIME-Version: 1.0\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n"
        b"Content-Transfer-Encoding: quoted-printable\r\n"
        b"\r\n"
        b"Caf=C3=A9 cr=C3=A8me: your code is 481516. A very long line that is soft=\r\n"
        b"-wrapped by the encoder.\r\n"
    )
    mail = parse_mail(raw)
    assert mail.subject == "Votre commande à confirmer"
    assert mail.text == (
        "Café crème: your code is 481516. A very long line that is soft-wrapped by the encoder."
    )
    assert mail.links == ()


def test_an_html_only_message_becomes_text_without_scripts_styles_or_tags() -> None:
    msg = EmailMessage()
    msg["From"] = "shop@shop.example"
    msg["Subject"] = "Welcome"
    msg.set_content(
        "<html><head><style>p {color: red}</style></head><body>"
        "<h1>Welcome&nbsp;aboard</h1><script>alert(1)</script>"
        '<p>Click <a href="http://127.0.0.1:8000/verify/xyz">verify</a> to start.</p>'
        "<p>Thanks &amp; bye</p></body></html>",
        subtype="html",
    )
    mail = parse_mail(msg.as_bytes())
    assert mail.text == "Welcome\xa0aboard\nClick verify to start.\nThanks & bye"
    assert mail.links == ("http://127.0.0.1:8000/verify/xyz",)


def test_a_message_without_from_uses_the_envelope_sender_and_links_are_listed_once() -> None:
    raw = (
        b"Subject: codes\r\n\r\n"
        b"Go to https://shop.example/a. Or https://shop.example/a again, or https://shop.example/b\r\n"
    )
    mail = parse_mail(raw, envelope_from="bounce@shop.example")
    assert mail.mail_from == "bounce@shop.example"
    assert mail.links == ("https://shop.example/a", "https://shop.example/b")
