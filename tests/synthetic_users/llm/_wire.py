"""Local stand-ins for the providers' HTTP APIs, speaking their documented wire formats.

`WireServer` is a threading HTTP server on 127.0.0.1 (an ephemeral port) that answers one path —
`/v1/chat/completions` for OpenAI-compatible servers, `/v1/messages` for Anthropic — from a
per-test script of `Reply`s, and records every request's headers and JSON body. A reply can be
delayed past the client's timeout; stopping the server wakes such a reply and drops it, so the
server always stops promptly and joins its handler threads.

The builders write response bodies in each provider's documented shape:

- OpenAI Chat Completions (`object: chat.completion`): `choices[0].message` with `content`,
  `refusal` and `tool_calls[]` of `{id, type: function, function: {name, arguments}}`, where
  `arguments` is a JSON *string*; `finish_reason`; optional `usage` with `prompt_tokens` and
  `completion_tokens`. Errors are `{"error": {message, type, param, code}}`.
- Anthropic Messages (`type: message`): `content[]` of `text` and `tool_use` `{id, name,
  input}` blocks (`input` a JSON object), `stop_reason`, `usage` with `input_tokens` and
  `output_tokens`. Errors are `{"type": "error", "error": {type, message}}`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import TracebackType

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class Reply:
    """One scripted answer: status, JSON body (or raw text), headers, and a delay before it."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON


class WireServer:
    """A scripted provider stand-in; use as a context manager (it binds, serves and stops)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.requests: list[Recorded] = []
        self._replies: list[Reply] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        # Joined on close: a test never leaves a handler thread behind.
        self._server.daemon_threads = False
        # A short poll keeps `shutdown` (which waits for the next poll) quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`: the SDKs add `/v1/...` (OpenAI's base takes `/v1` too)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order."""
        with self._lock:
            self._replies.extend(replies)

    def __enter__(self) -> WireServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stopping.set()  # wakes delayed replies, which then send nothing
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if recorded.path != self.path:
                return Reply(404, {"error": {"message": f"no route {recorded.path}"}})
            if not self._replies:
                return Reply(500, {"error": {"message": "the test scripted no more replies"}})
            return self._replies.pop(0)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        wire = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                recorded = Recorded(
                    method="POST",
                    path=self.path,
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=json.loads(raw) if raw else None,
                )
                reply = wire._next(recorded)
                if reply.delay_s and wire._stopping.wait(reply.delay_s):
                    return  # the test is over; the client gave up long ago
                body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                payload = body.encode()
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
                pass  # keep test output to what the tests say

        return Handler


# --- OpenAI Chat Completions -------------------------------------------------------------------


def openai_tool_call(call_id: str, name: str, arguments: str | dict[str, Any]) -> dict[str, Any]:
    """One entry of `message.tool_calls`; `arguments` goes on the wire as a JSON string."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def openai_completion(
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    content: str | None = None,
    refusal: str | None = None,
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = (120, 9),
    model: str = "gpt-test",
) -> dict[str, Any]:
    """A `chat.completion` object with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1764590000,
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage is not None:
        prompt, completion = usage
        body["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    return body


def openai_error(message: str, *, kind: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# --- Anthropic Messages ------------------------------------------------------------------------


def anthropic_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def anthropic_tool_use(use_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": arguments}


def anthropic_message(
    *content: dict[str, Any],
    stop_reason: str = "tool_use",
    usage: dict[str, int] | None = None,
    stop_details: dict[str, Any] | None = None,
    model: str = "claude-test",
) -> dict[str, Any]:
    """A `message` object, with `usage` (always present on the real API) unless told otherwise."""
    body: dict[str, Any] = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage if usage is not None else {"input_tokens": 310, "output_tokens": 42},
    }
    if stop_details is not None:
        body["stop_details"] = stop_details
    return body


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """Anthropic's error body."""
    return {"type": "error", "error": {"type": kind, "message": message}}
