"""One WebSocket peer, seen by the actors as a frame sender they can close."""

from __future__ import annotations

from typing import Protocol

from understudy.generated.protocol import (
    CLOSE_FRAME_RATE,
    CLOSE_HELLO_TIMEOUT,
    CLOSE_MESSAGE_TOO_BIG,
    CLOSE_NOT_AUTHORITATIVE,
    CLOSE_PROTOCOL,
    CLOSE_REVOKED,
    CLOSE_SHUTDOWN,
    CLOSE_SUPERSEDED,
    CLOSE_TICKET_REFUSED,
)


class Frame(Protocol):
    """What a socket sends: a generated model, or a small frame the server wrote as JSON itself."""

    def to_wire_json(self) -> str: ...


class Connection(Protocol):
    async def send(self, frame: Frame, *, committed: bool = False) -> None:
        """Send `frame` once every turn taken so far is durable; `committed`: the caller's turn
        is durable already and the frame says nothing else (it need not wait for other turns)."""
        ...

    async def close(self, code: int, reason: str) -> None: ...


# The close codes are the spec's (spec/frames/protocol-constants.json), re-exported here for the
# code that closes sockets; this module has no numbers of its own.
__all__ = [
    "CLOSE_FRAME_RATE",
    "CLOSE_HELLO_TIMEOUT",
    "CLOSE_MESSAGE_TOO_BIG",
    "CLOSE_NOT_AUTHORITATIVE",
    "CLOSE_PROTOCOL",
    "CLOSE_REVOKED",
    "CLOSE_SHUTDOWN",
    "CLOSE_SUPERSEDED",
    "CLOSE_TICKET_REFUSED",
    "Connection",
    "Frame",
]
