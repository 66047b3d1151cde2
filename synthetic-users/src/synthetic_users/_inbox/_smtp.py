"""The SMTP server of the inbox: aiosmtpd in the service's event loop, for known addresses only."""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import TYPE_CHECKING, Any, Final

from aiosmtpd.smtp import SMTP

from synthetic_users._inbox._parse import parse_mail

if TYPE_CHECKING:
    from aiosmtpd.smtp import Envelope, Session

    from synthetic_users._inbox._mailbox import Mailbox

log = logging.getLogger("synthetic_users.inbox")

UNKNOWN: Final = "550 5.1.1 No such mailbox here"
CLOSED: Final = "550 5.2.1 This mailbox is closed: its session has ended"
TOO_BIG: Final = "552 5.3.4 Message too big for this mailbox"
MAX_RECIPIENTS: Final = 10


class InboxError(Exception):
    """The inbox could not do what was asked."""


class InboxUnavailable(InboxError):
    """The SMTP server could not listen where the settings say."""


class _Handler:
    """aiosmtpd's hooks: refuse unknown and ended recipients, bound the size, store the rest."""

    def __init__(self, mailbox: Mailbox, max_bytes: int) -> None:
        self._mailbox = mailbox
        self._max_bytes = max_bytes

    async def handle_RCPT(  # aiosmtpd calls the hooks by these names
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        known = self._mailbox.recipient(address)
        if known is None:
            return UNKNOWN
        if not known[1]:
            return CLOSED
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return "452 4.5.3 Too many recipients"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # aiosmtpd calls the hooks by these names
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        raw = envelope.original_content or b""
        if isinstance(envelope.content, bytes) and not raw:
            raw = envelope.content
        # aiosmtpd refuses data past `data_size_limit` itself; this bounds what it let through.
        if len(raw) > self._max_bytes:
            return TOO_BIG
        mail = parse_mail(raw, envelope_from=envelope.mail_from or "")
        stored = 0
        for address in envelope.rcpt_tos:
            known = self._mailbox.recipient(address)
            if known is None or not known[1]:  # ended between RCPT and DATA
                continue
            self._mailbox.deliver(known[0], mail, len(raw))
            stored += 1
        if not stored:
            return CLOSED
        log.info("stored a message of %d bytes for %d inbox(es)", len(raw), stored)
        return "250 OK: stored"


class InboxServer:
    """Listens for mail on `host:port` (port 0 picks a free one) until `stop`."""

    def __init__(
        self, mailbox: Mailbox, *, host: str = "127.0.0.1", port: int = 2525, max_bytes: int
    ) -> None:
        self._mailbox = mailbox
        self._host = host
        self._port = port
        self._max_bytes = max_bytes
        self._server: asyncio.Server | None = None
        self._connections: weakref.WeakSet[SMTP] = weakref.WeakSet()

    @property
    def port(self) -> int:
        """The port listened on (after `start`)."""
        if self._server is None or not self._server.sockets:
            raise InboxError("the inbox server is not listening")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Listen.

        Raises:
            InboxUnavailable: the address is taken or cannot be bound.
        """
        loop = asyncio.get_running_loop()
        handler = _Handler(self._mailbox, self._max_bytes)

        def protocol() -> SMTP:
            smtp = SMTP(
                handler,
                data_size_limit=self._max_bytes,
                hostname=self._mailbox.domain,
                ident="synthetic-users inbox",
                enable_SMTPUTF8=True,
                timeout=60,
                loop=loop,
            )
            self._connections.add(smtp)
            return smtp

        try:
            self._server = await loop.create_server(protocol, self._host, self._port)
        except OSError as exc:
            raise InboxUnavailable(
                f"the inbox cannot listen on {self._host}:{self._port} ({exc.strerror}); set "
                "SYNTHETIC_USERS_SMTP_HOST / SYNTHETIC_USERS_SMTP_PORT (0 turns the inbox off)"
            ) from exc
        log.info("inbox listening on %s:%d for *@%s", self._host, self.port, self._mailbox.domain)

    async def stop(self) -> None:
        """Stop listening and close open connections."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        for smtp in list(self._connections):  # a client that never said QUIT
            if smtp.transport is not None and not smtp.transport.is_closing():
                smtp.transport.close()
        await server.wait_closed()
