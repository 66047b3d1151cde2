"""`understudy serve` with the moments its sockets carry each command's bytes stamped.

The hop trace (`bench._hops`) stamps a governed write at the load generator, in the server's
command rows (start of the admission and outcome turns) and in the extension's service worker.
A crossing between the server and the worker ("write_ready -> write_grant at the extension")
then mixes two costs: the server's turn and commit, and the socket with Chromium's delivery of
the frame to the worker. This launcher adds the server's side of every crossing, so the two can
be told apart:

- ``ws_in``: a socket frame whole in the server (parsed by uvicorn's WebSocket protocol, before
  the application reads it);
- ``ws_out``: a socket frame about to be encoded and handed to the kernel (uvicorn's ``send``);
- ``http_in``: a request's last byte parsed (httptools' ``on_message_complete``);
- ``http_out``: a response's last body chunk about to be handed to the kernel.

The outgoing stamps are taken before the write, not after: a loopback write wakes its reader,
which often takes the core at once, so a stamp after it can land tens of milliseconds late on
this 2-core machine. Taken before, the frame's encoding (tens of microseconds) counts towards
the sockets.

Each stamp keeps the frame's ``type`` and its ``commandId`` (from the first bytes, as the
worker's wrappers do), never other content, on ``time.time()``: the load generator's clock, on
the same machine. ``python -m bench._wiretap_serve`` starts the server like ``understudy
serve``; SIGUSR1 starts an empty record, SIGUSR2 stops it and writes it as JSON to the path in
``BENCH_WIRE_OUT``. While no record is open each patched call costs one Python call and a test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from understudy._server import GuardedHttpToolsProtocol
from understudy.cli import main

if TYPE_CHECKING:
    from types import FrameType

_TYPE = re.compile(rb'"type"\s*:\s*"([a-z_]+)"')
_ID = re.compile(rb'"commandId"\s*:\s*"([0-9a-f-]{36})"')
_HEAD_BYTES = 2048  # where a frame's type and a command's id are (a write's body is smaller)

_record: list[list[Any]] | None = None


def stamp(kind: str, data: bytes | bytearray | memoryview | str, at: float | None = None) -> None:
    """Record `kind` for the frame or body `data` starts, at `at` (ms, default now); nothing
    while no record is open."""
    if _record is None:
        return
    at = time.time() * 1000 if at is None else at
    head = data[:_HEAD_BYTES]
    head = head.encode() if isinstance(head, str) else bytes(head)
    found_type, found_id = _TYPE.search(head), _ID.search(head)
    _record.append(
        [
            kind,
            found_type.group(1).decode() if found_type else "?",
            found_id.group(1).decode() if found_id else None,
            at,
        ]
    )


def install() -> None:
    """Patch uvicorn's protocols (this process only) to stamp what they carry."""
    receive_event = WebSocketsSansIOProtocol.send_receive_event_to_app
    ws_send = WebSocketsSansIOProtocol.send
    message_complete = GuardedHttpToolsProtocol.on_message_complete
    http_send = RequestResponseCycle.send

    def send_receive_event_to_app(self: WebSocketsSansIOProtocol) -> None:
        if self.frames:
            stamp("ws_in", self.frames[0])
        receive_event(self)

    async def send_frame(self: WebSocketsSansIOProtocol, message: Any) -> None:
        at = time.time() * 1000
        await ws_send(self, message)
        if message["type"] == "websocket.send":
            stamp("ws_out", message.get("text") or message.get("bytes") or b"", at)

    def on_message_complete(self: GuardedHttpToolsProtocol) -> None:
        if self.cycle is not None:
            stamp("http_in", self.cycle.body)
        message_complete(self)

    async def send_response(self: RequestResponseCycle, message: Any) -> None:
        at = time.time() * 1000
        await http_send(self, message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            stamp("http_out", message.get("body", b""), at)

    WebSocketsSansIOProtocol.send_receive_event_to_app = send_receive_event_to_app  # type: ignore[method-assign]
    WebSocketsSansIOProtocol.send = send_frame  # type: ignore[method-assign]
    GuardedHttpToolsProtocol.on_message_complete = on_message_complete  # type: ignore[method-assign]
    RequestResponseCycle.send = send_response  # type: ignore[method-assign]


def _start(signum: int, frame: FrameType | None) -> None:
    global _record
    _record = []


def _stop(signum: int, frame: FrameType | None) -> None:
    global _record
    record, _record = _record or [], None
    out = os.environ["BENCH_WIRE_OUT"]
    with open(out + ".tmp", "w") as file:
        json.dump(record, file)
    os.replace(out + ".tmp", out)  # the benchmark waits for the complete file to appear


if __name__ == "__main__":
    install()
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    sys.exit(main(["serve"]))
