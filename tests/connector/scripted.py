"""A scripted Understudy backend for httpx.MockTransport, and a fake clock.

Each step answers one request with a response documented in spec/openapi.yaml; every body is built
through the generated models, so a script cannot play a shape the spec does not allow. The backend
records every request it receives, so a test asserts the exact sequence the connector sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from uuid import UUID

import httpx

from understudy_connector import AsyncClient, Client
from understudy_connector.generated.models import (
    CommandOutcome,
    CommandPending,
    Problem,
    Session,
    SessionTombstone,
)

BASE_URL = "http://understudy.test"
API_KEY = "usk_test_key"
SESSION_ID = UUID("7d0c4f5e-3b7a-4f0e-9a51-2f7f2a6b9c10")
TIMESTAMP = "2026-11-30T09:00:00Z"

Step = Callable[[httpx.Request], httpx.Response]
MakeClient = Callable[..., tuple[Client, "ScriptedBackend"]]
MakeAsyncClient = Callable[..., tuple[AsyncClient, "ScriptedBackend"]]

TAB = {"tabId": 412, "url": "https://example.com/login", "title": "Sign in", "active": True}
LOGIN_SNAPSHOT: dict[str, Any] = {
    "name": "snapshot",
    "url": "https://example.com/login",
    "title": "Sign in",
    "generation": 2,
    "truncated": False,
    "nodes": [
        {"role": "RootWebArea", "name": "Sign in", "depth": 0},
        {"ref": "g2e5", "role": "textbox", "name": "Username", "depth": 1},
        {"ref": "g2e6", "role": "textbox", "name": "Password", "depth": 1},
        {"ref": "g2e7", "role": "button", "name": "Sign in", "depth": 1},
    ],
}
READ_RESULTS: dict[str, dict[str, Any]] = {
    "hello": {"name": "hello", "protocolVersion": 2, "capabilities": ["safe_write_v2"], "tab": TAB},
    "get_tabs": {"name": "get_tabs", "tabs": [TAB]},
    "snapshot": LOGIN_SNAPSHOT,
    "screenshot": {
        "name": "screenshot",
        "mimeType": "image/png",
        "data": "iVBORw0KGgo=",
        "width": 1280,
        "height": 720,
    },
    "wait_for": {"name": "wait_for", "matched": True, "elapsedMs": 420},
}


def result_for(name: str, **preview: Any) -> dict[str, Any]:
    """A valid result of `name` (for a write: the tab afterwards, with an optional preview)."""
    if name in READ_RESULTS:
        return READ_RESULTS[name]
    result: dict[str, Any] = {
        "name": name,
        "url": "https://example.com/home",
        "title": "Home",
        "generation": 3,
    }
    if preview:
        result["preview"] = preview
    return result


@dataclass(frozen=True)
class Recorded:
    """One request the backend received."""

    method: str
    path: str
    url: httpx.URL
    headers: httpx.Headers
    body: Any

    @property
    def command_id(self) -> str:
        """The command id the request concerns (body of a submit, path of a poll)."""
        if self.method == "POST":
            return str(self.body["commandId"])
        return self.path.rsplit("/", 1)[-1]


@dataclass
class ScriptedBackend:
    """Answers requests with `steps`, in order; fails the test on a request past the script."""

    steps: list[Step]
    requests: list[Recorded] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append(
            Recorded(request.method, request.url.path, request.url, request.headers, body)
        )
        if not self.steps:
            raise AssertionError(f"unscripted request: {request.method} {request.url}")
        return self.steps.pop(0)(request)

    def transport(self) -> httpx.MockTransport:
        """A transport for `Client` or `AsyncClient` that plays this script."""
        return httpx.MockTransport(self)

    @property
    def calls(self) -> list[tuple[str, str]]:
        """`(method, path)` of every request, in order."""
        return [(recorded.method, recorded.path) for recorded in self.requests]


class FakeClock:
    """A monotonic clock that only moves when the connector sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


def _command_id(request: httpx.Request) -> str:
    if request.method == "POST":
        return str(json.loads(request.content)["commandId"])
    return request.url.path.rsplit("/", 1)[-1]


def _json(status: int, model: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=model.to_wire(), headers=headers)


def outcome(
    name: str = "snapshot",
    *,
    status: str = "succeeded",
    result: dict[str, Any] | None = None,
    error: tuple[str, str] | None = None,
) -> Step:
    """`200` with the durable outcome of the request's command."""

    def step(request: httpx.Request) -> httpx.Response:
        dry_run = bool(json.loads(request.content).get("dryRun")) if request.content else False
        body: dict[str, Any] = {
            "commandId": _command_id(request),
            "name": name,
            "status": status,
            "dryRun": dry_run,
            "completedAt": TIMESTAMP,
        }
        if status == "succeeded":
            body["result"] = result if result is not None else result_for(name)
        if error is not None:
            body["error"] = {"code": error[0], "message": error[1]}
        return _json(200, CommandOutcome.model_validate(body))

    return step


def pending(
    name: str = "snapshot",
    *,
    status: str = "pending",
    retry_after: int | None = 1,
    location: str | None = "",
) -> Step:
    """`202` `poll_same_command`; `location=""` points at the command's own poll URL."""

    def step(request: httpx.Request) -> httpx.Response:
        command_id = _command_id(request)
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        if location is not None:
            headers["Location"] = location or f"/v1/sessions/{SESSION_ID}/commands/{command_id}"
        model = CommandPending.model_validate(
            {
                "commandId": command_id,
                "name": name,
                "status": status,
                "retryPolicy": "poll_same_command",
            }
        )
        return _json(202, model, headers)

    return step


def problem(
    status: int,
    code: str,
    *,
    retry_after: int | None = None,
    with_command_id: bool = True,
) -> Step:
    """An RFC 9457 problem with `code`; on command paths it names the request's command."""

    def step(request: httpx.Request) -> httpx.Response:
        body: dict[str, Any] = {
            "type": f"https://understudy.dev/problems/{code}",
            "title": code.replace("_", " ").capitalize(),
            "status": status,
            "code": code,
            "detail": f"scripted {code}",
        }
        if with_command_id and "/commands" in request.url.path:
            body["commandId"] = _command_id(request)
        headers = {"Content-Type": "application/problem+json"}
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        return httpx.Response(
            status,
            content=Problem.model_validate(body).to_wire_json().encode(),
            headers=headers,
        )

    return step


def network_error(request: httpx.Request) -> httpx.Response:
    """The connection fails before any answer."""
    raise httpx.ConnectError("connection refused", request=request)


def session(
    code: int = 201,
    *,
    status: str = "connected",
    mode: str = "unattended",
    retry_after: int | None = None,
    location: bool = False,
) -> Step:
    """A `Session` body (create `200`/`201`/`202`, get `200`, delete `202`)."""

    def step(request: httpx.Request) -> httpx.Response:
        body: dict[str, Any] = {
            "sessionId": str(SESSION_ID),
            "mode": mode,
            "status": status,
            "allowedOrigins": ["https://example.com"] if mode == "unattended" else [],
            "createdAt": TIMESTAMP,
            "expiresAt": "2026-12-01T09:00:00Z",
            "idleExpiresAt": "2026-11-30T11:00:00Z",
            "commandCount": 0,
            "writesBlocked": False,
            "dialogs": [],
        }
        if mode == "unattended":
            body["deviceId"] = "laptop-1"
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        if location:
            headers["Location"] = f"/v1/sessions/{SESSION_ID}"
        return _json(code, Session.model_validate(body), headers)

    return step


def tombstone(code: int = 200, *, reason: str = "deleted", status: str = "closed") -> Step:
    """A `SessionTombstone` (delete `200`, get `410`)."""

    def step(request: httpx.Request) -> httpx.Response:
        model = SessionTombstone.model_validate(
            {"sessionId": str(SESSION_ID), "status": status, "endedAt": TIMESTAMP, "reason": reason}
        )
        return _json(code, model)

    return step


def raw(status: int, content: bytes, content_type: str = "application/json") -> Step:
    """A response outside the spec, to check that the connector refuses it."""

    def step(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=content, headers={"Content-Type": content_type})

    return step


class _Bridge(BaseHTTPRequestHandler):
    """Plays a ScriptedBackend over real HTTP, for a connector running in another process."""

    backend: ScriptedBackend

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = httpx.Request(
            self.command,
            f"http://{self.headers['Host']}{self.path}",
            headers=list(self.headers.items()),
            content=self.rfile.read(length) if length else b"",
        )
        try:
            response = self.backend(request)
        except AssertionError:
            response = httpx.Response(599, text="unscripted request")
        self.send_response(response.status_code)
        for name, value in response.headers.items():
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.content)))
        self.end_headers()
        self.wfile.write(response.content)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def served(backend: ScriptedBackend) -> Iterator[str]:
    """Serve `backend` on a loopback port; yields its base URL."""
    handler = type("Bridge", (_Bridge,), {"backend": backend})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
