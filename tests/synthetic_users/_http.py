"""A local HTTP server for tests: 127.0.0.1, an ephemeral port, a function decides each answer.

`LocalServer(respond)` records every request (method, path, lower-cased headers, raw body) and
answers what `respond(request)` returns. A `Reply` may be delayed past the client's timeout;
stopping the server wakes such a reply and drops it, so the server always stops promptly and
joins its handler threads.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import TracebackType


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: Any = None  # JSON-encoded unless bytes or str
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class LocalServer:
    """Use as a context manager: it binds, serves on a thread, and stops on exit."""

    def __init__(self, respond: Callable[[Recorded], Reply]) -> None:
        self.requests: list[Recorded] = []
        self._respond = respond
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> LocalServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            return self._respond(recorded)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                recorded = Recorded(
                    method="POST",
                    path=self.path,
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=self.rfile.read(length),
                )
                reply = server._next(recorded)
                if reply.delay_s and server._stopping.wait(reply.delay_s):
                    return
                body = reply.body
                if isinstance(body, str):
                    payload = body.encode()
                elif isinstance(body, bytes):
                    payload = body
                else:
                    payload = json.dumps(body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and closed the connection

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
