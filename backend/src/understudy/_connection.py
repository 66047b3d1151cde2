"""One WebSocket peer, seen by the actors as a frame sender they can close."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from understudy.generated._wire import WireModel


class Connection(Protocol):
    async def send(self, frame: WireModel) -> None: ...

    async def close(self, code: int, reason: str) -> None: ...


# Close codes (4000-4999 are for applications, RFC 6455 §7.4.2).
CLOSE_SUPERSEDED = 4000  # a newer authoritative connection replaced this one
CLOSE_TICKET_REFUSED = 4401  # replayed, expired, tampered or wrong-audience ticket
CLOSE_NOT_AUTHORITATIVE = 4403  # the ticket is valid but its authority is gone (epoch, lease)
CLOSE_PROTOCOL = 4400  # the first frame was not an acceptable hello
CLOSE_HELLO_TIMEOUT = 4408  # no accepted hello within the hello timeout of the accept
CLOSE_FRAME_RATE = 4429  # more frames than the socket's frame budget
CLOSE_REVOKED = 4410  # the device credential or the session's device was revoked
CLOSE_SHUTDOWN = 1001
CLOSE_MESSAGE_TOO_BIG = 1009  # a frame over the size bound (RFC 6455 §7.4.1), sent by uvicorn
