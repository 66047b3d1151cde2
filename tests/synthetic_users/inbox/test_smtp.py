"""The inbox's SMTP server on 127.0.0.1, spoken to with `smtplib` as a site's mailer would."""

from __future__ import annotations

import asyncio
import smtplib
from email import policy
from email.message import EmailMessage
from typing import TYPE_CHECKING

import pytest

from synthetic_users._inbox import InboxServer, InboxUnavailable, Mailbox
from synthetic_users._store import NewRun, SessionState, Store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

LIMIT = 64 * 1024
DOMAIN = "inbox.localhost"


class Inbox:
    def __init__(self, store: Store, mailbox: Mailbox, server: InboxServer) -> None:
        self.store, self.mailbox, self.server = store, mailbox, server
        run, _ = store.create_run(
            "acme",
            NewRun(
                target_url="http://127.0.0.1:9/",
                task="sign up",
                turn_budget=5,
                model="scripted",
                personas=[{"name": "Ada"}, {"name": "Bo"}],
                request_hash="h",
            ),
        )
        self.sessions = [s.session_id for s in store.sessions(run.run_id)]
        for session_id in self.sessions:
            store.start_session(session_id)

    async def send(
        self, to: str, message: EmailMessage | bytes, sender: str = "shop@x.test"
    ) -> None:
        """Send through smtplib in a thread (the server runs in this test's event loop)."""

        def deliver() -> None:
            with smtplib.SMTP("127.0.0.1", self.server.port, timeout=10) as client:
                client.sendmail(
                    sender, [to], message if isinstance(message, bytes) else crlf(message)
                )

        await asyncio.to_thread(deliver)


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[Inbox]:
    store = Store.open(tmp_path / "su.db")
    mailbox = Mailbox(store, DOMAIN)
    server = InboxServer(mailbox, host="127.0.0.1", port=0, max_bytes=LIMIT)
    await server.start()
    try:
        yield Inbox(store, mailbox, server)
    finally:
        await server.stop()
        store.close()


def crlf(message: EmailMessage) -> bytes:
    """The message as a mailer puts it on the wire (SMTP wants CRLF line ends)."""
    return message.as_bytes(policy=policy.SMTP)


def mail(subject: str, body: str = "hello") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "Shop <shop@x.test>"
    msg["Subject"] = subject
    msg.set_content(body)
    return msg


async def test_each_session_gets_its_own_unguessable_address_and_keeps_it(inbox: Inbox) -> None:
    ada, bo = inbox.sessions
    first = inbox.mailbox.address_for(ada)
    assert inbox.mailbox.address_for(ada) == first
    assert inbox.store.get_session(ada).inbox_address == first
    other = inbox.mailbox.address_for(bo)
    assert other != first
    token, _, domain = first.partition("@")
    assert domain == DOMAIN
    assert len(token) == 24 and token.isalnum() and token == token.lower()


async def test_mail_for_a_session_address_is_accepted_and_stored_for_that_session(
    inbox: Inbox,
) -> None:
    ada, bo = inbox.sessions
    address = inbox.mailbox.address_for(ada)
    inbox.mailbox.address_for(bo)
    await inbox.send(address.upper(), mail("Confirm your email", "Go: http://127.0.0.1:9/c/1"))
    [stored] = inbox.mailbox.messages(ada)
    assert (stored.mail_from, stored.subject) == ("shop@x.test", "Confirm your email")
    assert stored.text == "Go: http://127.0.0.1:9/c/1"
    assert stored.links == ("http://127.0.0.1:9/c/1",)
    assert stored.size > 0
    assert inbox.mailbox.messages(bo) == []


async def test_an_unknown_recipient_is_refused_at_rcpt_with_550_5_1_1(inbox: Inbox) -> None:
    inbox.mailbox.address_for(inbox.sessions[0])
    with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
        await inbox.send(f"nobody@{DOMAIN}", mail("hi"))
    code, text = refused.value.recipients[f"nobody@{DOMAIN}"]
    assert code == 550
    assert text.startswith(b"5.1.1")
    count = inbox.store.db.one("SELECT count(*) FROM inbox_messages")
    assert count is not None and count[0] == 0


async def test_a_message_declared_over_the_size_bound_is_refused_at_mail_with_552(
    inbox: Inbox,
) -> None:
    address = inbox.mailbox.address_for(inbox.sessions[0])
    # smtplib declares the size (ESMTP SIZE), so the server refuses before any data is sent.
    with pytest.raises(smtplib.SMTPSenderRefused) as refused:
        await inbox.send(address, mail("big", ("x" * 70 + "\n") * (LIMIT // 70)))
    assert refused.value.smtp_code == 552
    assert inbox.mailbox.messages(inbox.sessions[0]) == []


async def test_undeclared_data_over_the_size_bound_is_refused_with_552_and_the_next_passes(
    inbox: Inbox,
) -> None:
    ada = inbox.sessions[0]
    address = inbox.mailbox.address_for(ada)

    def undeclared() -> tuple[int, int]:
        with smtplib.SMTP("127.0.0.1", inbox.server.port, timeout=10) as client:
            client.ehlo()
            client.mail("shop@x.test")  # no SIZE: the server learns the size from the data
            client.rcpt(address)
            too_big, _ = client.data(crlf(mail("big", ("x" * 70 + "\n") * (LIMIT // 70))))
            client.rset()
            client.mail("shop@x.test")
            client.rcpt(address)
            small, _ = client.data(crlf(mail("small")))
            return too_big, small

    assert await asyncio.to_thread(undeclared) == (552, 250)
    assert [m.subject for m in inbox.mailbox.messages(ada)] == ["small"]


async def test_mail_for_a_session_that_ended_is_refused(inbox: Inbox) -> None:
    ada = inbox.sessions[0]
    address = inbox.mailbox.address_for(ada)
    inbox.store.set_session_state(ada, SessionState.COMPLETED)
    with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
        await inbox.send(address, mail("too late"))
    code, text = refused.value.recipients[address]
    assert (code, text[:5]) == (550, b"5.2.1")
    assert inbox.mailbox.messages(ada) == []


async def test_a_wait_wakes_for_new_mail_and_filters_on_the_subject(inbox: Inbox) -> None:
    ada = inbox.sessions[0]
    address = inbox.mailbox.address_for(ada)
    waiting = asyncio.create_task(
        inbox.mailbox.wait(ada, after=0, timeout_s=20, subject_contains="CODE")
    )
    await inbox.send(address, mail("Welcome"))
    await asyncio.sleep(0)
    assert not waiting.done()
    await inbox.send(address, mail("Your code", "481516"))
    message = await asyncio.wait_for(waiting, 10)
    assert message is not None and message.subject == "Your code"
    assert await inbox.mailbox.wait(ada, after=message.message_id, timeout_s=0.2) is None


async def test_a_taken_port_is_a_clear_error_naming_the_setting(inbox: Inbox) -> None:
    second = InboxServer(inbox.mailbox, host="127.0.0.1", port=inbox.server.port, max_bytes=LIMIT)
    with pytest.raises(InboxUnavailable, match="SYNTHETIC_USERS_SMTP_PORT"):
        await second.start()


async def test_a_session_that_ends_between_rcpt_and_data_gets_no_mail(inbox: Inbox) -> None:
    ada = inbox.sessions[0]
    address = inbox.mailbox.address_for(ada)

    def ends_midway() -> int:
        with smtplib.SMTP("127.0.0.1", inbox.server.port, timeout=10) as client:
            client.ehlo()
            client.mail("shop@x.test")
            assert client.rcpt(address)[0] == 250
            inbox.store.set_session_state(ada, SessionState.COMPLETED)
            code, _ = client.data(crlf(mail("late")))
            return code

    assert await asyncio.to_thread(ends_midway) == 550
    assert inbox.mailbox.messages(ada) == []
