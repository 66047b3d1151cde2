"""The command route without the framework's per-request work, answering exactly as the route.

`POST /v1/sessions/{id}/commands` is the hot path of the service: every governed command takes
it. Through Litestar a request pays for routing, a copy of the route handler per guard, the
signature model, dependency resolution and the response machinery, about as much CPU as the
command's own turn. This ASGI wrapper takes the requests of that route that need none of it (a
`Content-Length` body of at most `MAX_BODY_BYTES`) and runs the same steps as the route, in the
same order, with the same functions: the consumer credential, the session id, the body checks,
`command_answer` (what `run_command` answers, sent as the same two ASGI messages), and the
problem+json answers of the error handlers. Anything else (another method or path, a chunked or
oversized body, the sockets, lifespan) goes to the app unchanged. Like every response, it starts
only once every turn taken so far is durable.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Final

from litestar.enums import ScopeType

from understudy._problems import ProblemError, problem_response
from understudy.http._auth import authenticate_consumer, bearer_token
from understudy.http._commands import command_answer
from understudy.http._parsing import MAX_BODY_BYTES, check_body, parse_session_id
from understudy.http._responses import JSON

if TYPE_CHECKING:
    from collections.abc import Iterable

    from litestar import Response
    from litestar.types import (
        ASGIApp,
        HTTPResponseBodyEvent,
        HTTPResponseStartEvent,
        Message,
        Receive,
        Scope,
        Send,
    )

    from understudy._services import Services
    from understudy._write_protocol import HttpAnswer

# The route's template, for the log line of an unexpected error (never the path: it holds ids).
ROUTE: Final = "/v1/sessions/{session_id:str}/commands"
_PATH: Final = re.compile(r"/v1/sessions/([^/]+)/commands")
log = logging.getLogger("understudy.app")  # where the app's error handler logs too
_JSON: Final = JSON.encode("latin-1")


class FastCommands:
    """`app` with the command route's plain requests answered directly (module docstring).

    Args:
        app: The service's ASGI app (`create_app`), which answers everything else.
        services: The services the app was made with.
    """

    def __init__(self, app: ASGIApp, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        match = _PATH.fullmatch(scope["path"])
        heads = _Heads(scope["headers"]) if match is not None else None
        length = heads.content_length() if heads is not None else None
        if match is None or heads is None or length is None or length > MAX_BODY_BYTES:
            await self.app(scope, receive, send)
            return
        services = self.services
        try:
            who = authenticate_consumer(services, bearer_token(heads.authorization))
            sid = parse_session_id(match.group(1))
            body = check_body(await _body(receive), heads.content_type)
            status, headers, content = _serialised(await command_answer(services, who, sid, body))
        except ProblemError as exc:
            response = problem_response(exc)
        except Exception:
            log.exception("unhandled error on %s %s", "POST", ROUTE)
            response = problem_response(
                ProblemError(500, "internal_error", "an unexpected error occurred")
            )
        else:
            # The two messages the route's `json_response` would be sent as, in its header order,
            # without building the response.
            await services.db.durable()
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": content, "more_body": False})
            return
        await _respond(services, response, scope, receive, send)


class _Heads:
    """The three request headers the route reads, from the scope's raw list in one pass (as
    Litestar's `Headers` reads them: every `authorization`, every `content-length`, the first
    `content-type`), without building the multi-dict for the whole head."""

    __slots__ = ("authorization", "content_type", "lengths")

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        self.authorization: list[str] = []
        self.lengths: list[str] = []
        self.content_type = ""
        seen_type = False
        for name, value in raw:
            # The server hands names lower-cased (ASGI); values are latin-1 (RFC 9110 §5.5).
            if name == b"authorization":
                self.authorization.append(value.decode("latin-1"))
            elif name == b"content-length":
                self.lengths.append(value.decode("latin-1"))
            elif name == b"content-type" and not seen_type:
                self.content_type, seen_type = value.decode("latin-1"), True

    def content_length(self) -> int | None:
        if len(self.lengths) != 1 or not self.lengths[0].isdigit():
            return None
        return int(self.lengths[0])


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: what arrived is all
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _serialised(answer: HttpAnswer) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The status, the raw headers and the body of `answer`, as `json_response` makes them."""
    body = answer.body if isinstance(answer.body, bytes) else answer.body.to_wire_json().encode()
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in answer.headers.items()
    ]
    headers += ((b"content-type", _JSON), (b"content-length", b"%d" % len(body)))
    return answer.status, headers, body


async def _respond(
    services: Services, response: Response[Any], scope: Scope, receive: Receive, send: Send
) -> None:
    content, status = response.content, response.status_code
    plain = not response.cookies and response.background is None
    if isinstance(content, bytes) and status is not None and plain:
        # An answer already serialised (every outcome, `json_response`): the two messages the
        # route's conversion would send, in its header order, without building its response.
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in response.headers.items()
        ]
        headers.append((b"content-type", str(response.media_type).encode("latin-1")))
        headers.append((b"content-length", str(len(content)).encode("latin-1")))
        await services.db.durable()
        start: HTTPResponseStartEvent = {
            "type": "http.response.start",
            "status": status,
            "headers": headers,
        }
        await send(start)
        body: HTTPResponseBodyEvent = {
            "type": "http.response.body",
            "body": content,
            "more_body": False,
        }
        await send(body)
        return

    async def send_when_durable(message: Message) -> None:
        if message["type"] == "http.response.start":
            await services.db.durable()
        await send(message)

    # The route's own conversion (no app-level encoders, headers or cookies are configured).
    asgi_response = response.to_asgi_response(None, request=None)  # type: ignore[arg-type]
    await asgi_response(scope, receive, send_when_durable)
