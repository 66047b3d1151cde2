"""An email inbox per persona session: the SMTP server, the stored mail, how a persona reads it.

Each persona session gets its own unguessable address, `<random token>@<inbox domain>`, when it
first starts (`Mailbox.address_for`); the persona gives it to the site under study as its email.
`InboxServer` (aiosmtpd, in the service's event loop) accepts mail for those addresses only:

- an unknown recipient is refused at RCPT (`550 5.1.1`), a session that ended too (`550 5.2.1`);
- a message over the size bound is refused (`552 5.3.4`, aiosmtpd's `data_size_limit`);
- an accepted message is decoded (`email` stdlib: text/plain preferred, HTML turned into text),
  its links extracted, and stored per session (`inbox_messages`).

The agent loop reads the inbox through `Mailbox.messages` and `Mailbox.wait` (the `read_inbox` and
`wait_for_email` actions). What the model is shown names no address but the sender's and the
persona's own; a link is followed only when its origin is the run's target origin (the loop checks).

Exceptions:

    InboxError
    └── InboxUnavailable     the SMTP server could not listen (the message names the setting)
"""

from __future__ import annotations

from synthetic_users._inbox._mailbox import InboxMessage, Mailbox, new_address
from synthetic_users._inbox._parse import ParsedMail, parse_mail
from synthetic_users._inbox._smtp import InboxError, InboxServer, InboxUnavailable

__all__ = [
    "InboxError",
    "InboxMessage",
    "InboxServer",
    "InboxUnavailable",
    "Mailbox",
    "ParsedMail",
    "new_address",
    "parse_mail",
]
