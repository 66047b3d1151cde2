"""The per-session inbox in the store: addresses, messages, and waiting for a new one."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from synthetic_users._store import SessionNotFound

if TYPE_CHECKING:
    from collections.abc import Callable

    from synthetic_users._inbox._parse import ParsedMail
    from synthetic_users._store import Store

TOKEN_BYTES: Final = 15  # 120 random bits: 24 base32 characters, never guessed
POLL_S: Final = 1.0  # a wait also looks at the store this often (mail stored by another process)


def new_address(domain: str) -> str:
    """A fresh, unguessable inbox address at `domain` (lower case, so matching ignores case)."""
    token = base64.b32encode(secrets.token_bytes(TOKEN_BYTES)).decode("ascii").lower()
    return f"{token}@{domain.lower()}"


@dataclass(frozen=True)
class InboxMessage:
    """One stored message of a session's inbox."""

    message_id: int
    session_id: str
    received_at: float  # Unix seconds
    mail_from: str
    subject: str
    text: str
    links: tuple[str, ...]
    size: int


class Mailbox:
    """Inbox addresses and messages of persona sessions, kept in the service's store.

    `deliver` and `wait` must run in one event loop (the service's): a delivery wakes the
    waiters at once; a wait also re-reads the store every `POLL_S` seconds.
    """

    def __init__(
        self, store: Store, domain: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self.domain = domain.lower()
        self._clock = clock
        self._arrived: set[asyncio.Event] = set()

    def address_for(self, session_id: str) -> str:
        """The session's address, assigned on first use and kept for its lifetime.

        Raises:
            SessionNotFound: no such session.
        """
        address = new_address(self.domain)
        self._store.db.execute(
            "UPDATE persona_sessions SET inbox_address = ? "
            "WHERE session_id = ? AND inbox_address IS NULL",
            (address, session_id),
        )
        row = self._store.db.one(
            "SELECT inbox_address FROM persona_sessions WHERE session_id = ?", (session_id,)
        )
        if row is None:
            raise SessionNotFound(session_id)
        return str(row["inbox_address"])

    def recipient(self, address: str) -> tuple[str, bool] | None:
        """The session an address belongs to and whether it still takes mail; None if unknown."""
        row = self._store.db.one(
            "SELECT session_id, status FROM persona_sessions WHERE inbox_address = ?",
            (address.strip().lower(),),
        )
        if row is None:
            return None
        return str(row["session_id"]), row["status"] in ("queued", "running")

    def deliver(self, session_id: str, mail: ParsedMail, size: int) -> int:
        """Store one message for the session and wake its waiters; returns the message id."""
        with self._store.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO inbox_messages (session_id, received_at, mail_from, subject, body, "
                "links, size) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    self._clock(),
                    mail.mail_from,
                    mail.subject,
                    mail.text,
                    json.dumps(list(mail.links)),
                    size,
                ),
            )
            message_id = int(cursor.lastrowid or 0)
        for event in self._arrived:
            event.set()
        return message_id

    def messages(self, session_id: str, *, after: int = 0) -> list[InboxMessage]:
        """The session's messages with an id above `after`, oldest first."""
        rows = self._store.db.query(
            "SELECT * FROM inbox_messages WHERE session_id = ? AND message_id > ? "
            "ORDER BY message_id",
            (session_id, after),
        )
        return [
            InboxMessage(
                message_id=row["message_id"],
                session_id=row["session_id"],
                received_at=row["received_at"],
                mail_from=row["mail_from"],
                subject=row["subject"],
                text=row["body"],
                links=tuple(json.loads(row["links"])),
                size=row["size"],
            )
            for row in rows
        ]

    async def wait(
        self,
        session_id: str,
        *,
        after: int,
        timeout_s: float,
        subject_contains: str | None = None,
    ) -> InboxMessage | None:
        """The first message above `after` (whose subject contains the text, when given).

        Returns at once when one is stored already; None when none arrives within `timeout_s`.
        """
        needle = subject_contains.casefold() if subject_contains else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        event = asyncio.Event()
        self._arrived.add(event)
        try:
            while True:
                event.clear()
                for message in self.messages(session_id, after=after):
                    if needle is None or needle in message.subject.casefold():
                        return message
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(remaining, POLL_S))
        finally:
            self._arrived.discard(event)
