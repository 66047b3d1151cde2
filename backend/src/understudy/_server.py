"""The uvicorn server of one process, with the connection limits uvicorn does not have.

HTTP/1.1 is parsed by httptools (llhttp, in C; h11 cost about a sixth of a governed write's
server CPU). uvicorn closes a keep-alive connection that stays silent after a response, but
nothing bounds a connection that never sends a byte, or one that trickles its request head a
byte a second: each holds a socket and a protocol object for as long as its peer likes.
`GuardedHttpToolsProtocol` gives every request head a deadline, from the connection's start (or
the end of the previous response) to the head's last byte. A silent connection is closed; a
partial head gets `408 request_timeout` (problem+json), and both leave a content-free
`connection.closed` event. A head larger than `MAX_HEAD_BYTES` (llhttp does not bound it), or
one the parser refuses, gets `400 invalid_request`. Every answer the protocol writes itself is
followed by a lingering close (RFC 9112 §9.6): the write side is shut (FIN after the answer) and
what the peer still sends is read and dropped until it closes, or `LINGER_S` passes. Closing at
once with bytes unread, or with bytes still on their way, makes the kernel answer them with a
reset, and a peer's socket API then reports the reset instead of the answer it already holds.
Bodies are bounded by size in the app; socket frames by `ws_max_size` and by the socket
handlers in `app.py`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from understudy._logs import log_config
from understudy._problems import MEDIA_TYPE, PROBLEM_TYPE_BASE, TITLES
from understudy.http._fast import FastCommands

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from litestar import Litestar

    from understudy._services import Services


# A request head larger than this is refused (400) and the connection closed: h11's default
# bound on an incomplete event, which the service had while it parsed with h11.
MAX_HEAD_BYTES = 16 * 1024


def _problem_response(status: str, problem: dict[str, str]) -> bytes:
    """A whole problem+json answer, written by the protocol before any request reaches the app."""
    code = problem["code"]
    body = json.dumps(
        {
            "type": PROBLEM_TYPE_BASE + code,
            "title": TITLES[code],
            "status": int(status.split()[0]),
            **problem,
        },
        separators=(",", ":"),
    ).encode()
    head = (
        f"HTTP/1.1 {status}\r\n"
        f"content-type: {MEDIA_TYPE}\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


_TIMEOUT_RESPONSE = _problem_response(
    "408 Request Timeout",
    {
        "code": "request_timeout",
        "detail": "the request head did not arrive in time; send it at once",
    },
)
# What the parser refuses (malformed HTTP/1.1, a body framed two ways, a head over the bound)
# gets the same problem shape as every other bad input, not uvicorn's text/plain line.
_MALFORMED_RESPONSE = _problem_response(
    "400 Bad Request",
    {
        "code": "invalid_request",
        "detail": "the request is not valid HTTP/1.1, or its head is over "
        f"{MAX_HEAD_BYTES // 1024} KiB",
    },
)
LINGER_S = 2.0  # how long a timed-out peer may keep sending before the socket is dropped


class _Deadline:
    """A deadline re-armed on every request of a connection, without a timer per request.

    A connection arms two per request (the keep-alive and the next head's) and disarms both as
    soon as the next request arrives: with a timer handle each, that is two handles made,
    cancelled and left in the event loop's heap per request. Here one handle stays scheduled
    while the deadline only moves later; when it fires early it waits for the rest.
    """

    __slots__ = ("_callback", "_due", "_handle", "_handle_at", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._callback = callback
        self._due: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = 0.0

    @property
    def armed(self) -> bool:
        return self._due is not None

    def arm(self, delay_s: float) -> None:
        self._due = due = self._loop.time() + delay_s
        if self._handle is not None and self._handle_at <= due:
            return  # the handle fires first and waits for the rest
        if self._handle is not None:
            self._handle.cancel()
        self._schedule(due)

    def disarm(self) -> None:
        self._due = None

    def close(self) -> None:
        """Disarm and drop the handle (the connection is gone)."""
        self._due = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self, at: float) -> None:
        self._handle_at = at
        self._handle = self._loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._handle = None
        due = self._due
        if due is None:
            return
        if due > self._handle_at:
            self._schedule(due)
            return
        self._due = None
        self._callback()


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline and a size bound on every request head (see
    the module docstring).

    Subclassed per server by `guarded_protocol`, which sets the class attributes.
    """

    head_timeout_s: ClassVar[float] = 10.0
    # A one-element tuple: a bare function class attribute would be bound as a method.
    on_close: ClassVar[tuple[Callable[[str], None]]] = (lambda reason: None,)

    _head_bytes = False  # whether any byte of the awaited head arrived
    # From the connection's start or a request's last byte to the next request's whole head:
    # what h11 calls the client's IDLE state.
    _awaiting_head = True
    _head_size = 0  # bytes of the awaited head, counted a read at a time
    _heads_completed = 0  # heads parsed on this connection
    _lingering = False  # the answer is sent; what still arrives is dropped
    _linger_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_deadline = _Deadline(self.loop, self._head_timed_out)
        # uvicorn's keep-alive timeout, on the same kind of deadline (`on_response_complete`).
        self._keep_alive = _Deadline(self.loop, self.timeout_keep_alive_handler)
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_deadline.close()
        self._keep_alive.close()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the answer is out; what the peer still sends is dropped
        if self._head_deadline.armed and data:
            self._head_bytes = True
        awaiting, heads = self._awaiting_head, self._heads_completed
        super().data_received(data)
        # A read that began and ended inside one head counts whole. llhttp streams the head to
        # the callbacks without bounding it, as h11 does (its default, `MAX_HEAD_BYTES`), so a
        # peer could otherwise grow the header list for as long as the deadline lets it. A read
        # in which a head completed held a body too (and maybe the next request's first bytes):
        # it is not counted, or a whole request with a large body would look like a large head.
        if awaiting and self._awaiting_head and heads == self._heads_completed and data:
            self._head_size += len(data)
            if self._head_size > MAX_HEAD_BYTES and not self._answered():
                self.logger.warning("A request head over %d bytes was refused.", MAX_HEAD_BYTES)
                self.send_400_response("")

    def send_400_response(self, msg: str) -> None:
        # uvicorn's answer to a parser error (and ours to a head over the bound), as problem+json.
        # The parser's state is spent: nothing after this is fed to it.
        self._answer_and_close(_MALFORMED_RESPONSE)

    def _answered(self) -> bool:
        return self._lingering or self.transport.is_closing()

    def _answer_and_close(self, answer: bytes) -> None:
        """Write `answer`, then close without resetting: a lingering close (module docstring)."""
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined request the parser refused while an earlier response is still being
            # written: that response is cut, as uvicorn's own close cuts it.
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.write(answer)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self._lingering = True
        self._head_deadline.close()
        self._keep_alive.close()
        self.transport.write_eof()
        self._linger_timer = self.loop.call_later(LINGER_S, self.transport.close)

    def on_headers_complete(self) -> None:
        self._awaiting_head, self._head_size = False, 0
        self._heads_completed += 1
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._awaiting_head = True
        super().on_message_complete()

    def _unset_keepalive_if_required(self) -> None:
        self._keep_alive.disarm()

    def on_response_complete(self) -> None:
        # uvicorn 0.54's, with the keep-alive timeout armed on `_keep_alive`.
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._unset_keepalive_if_required()
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        else:
            self._keep_alive.arm(self.timeout_keep_alive)
        if self._awaiting_head:
            self._arm_head_timer()

    def _arm_head_timer(self) -> None:
        self._head_bytes = False
        self._head_deadline.arm(self.head_timeout_s)

    def _cancel_head_timer(self) -> None:
        self._head_deadline.disarm()

    def _head_timed_out(self) -> None:
        if self._answered() or not self._awaiting_head:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is still being written; its completion re-arms the timer
        if self._head_bytes:
            self._answer_and_close(_TIMEOUT_RESPONSE)
            self.on_close[0]("slow_headers")
        else:
            self.transport.close()  # nothing arrived, so nothing is left unread to reset
            self.on_close[0]("idle")


def guarded_protocol(
    head_timeout_s: float, on_close: Callable[[str], None]
) -> type[HttpToolsProtocol]:
    """A `GuardedHttpToolsProtocol` subclass bound to one server's limit and telemetry."""
    return type(
        "ServerHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"head_timeout_s": head_timeout_s, "on_close": (on_close,)},
    )


def server_config(app: Litestar, services: Services, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration `understudy serve`, the tests and the benchmarks share."""
    settings = services.settings
    limits = settings.connection_limits

    def closed(reason: str) -> None:
        services.telemetry.emit("connection.closed", kind="http", reason=reason)

    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": "warning",
        "lifespan": "on",
        "http": guarded_protocol(limits.request_head_timeout_s, closed),
        "ws": "websockets-sansio",
        # A frame over the bound is refused from its header, before its payload is buffered;
        # the socket closes with 1009 (RFC 6455 §7.4.1).
        "ws_max_size": limits.max_frame_bytes,
        **({"log_config": config} if (config := log_config(settings.log_format)) else {}),
        **overrides,
    }
    # The command route's plain requests skip the framework (`http._fast`); the rest is the app.
    return uvicorn.Config(FastCommands(app, services), **options)
