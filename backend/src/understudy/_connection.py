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
CLOSE_SHUTDOWN = 1001
