"""The two WebSocket routes, served by one handler: the device socket and a session's socket.

Both check the upgrade the same way (origin, then the ticket), hand the accepted socket to its
agent, and feed it frames within the connection limits until it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, Literal, Protocol

from litestar import websocket
from litestar.connection import WebSocket
from litestar.exceptions import WebSocketDisconnect
from litestar.params import FromPath

from understudy import _security
from understudy._connection import (
    CLOSE_FRAME_RATE,
    CLOSE_HELLO_TIMEOUT,
    CLOSE_MESSAGE_TOO_BIG,
    CLOSE_NOT_AUTHORITATIVE,
    CLOSE_TICKET_REFUSED,
)
from understudy.http._auth import ServicesDep

if TYPE_CHECKING:
    from understudy._connection import Connection, Frame
    from understudy._services import Services
    from understudy._store._db import Database


class _WsConnection:
    def __init__(self, socket: WebSocket[Any, Any, Any], db: Database) -> None:
        self._socket = socket
        self._db = db

    async def send(self, frame: Frame, *, committed: bool = False) -> None:
        # A frame may say what a turn decided: it leaves only once that turn is durable. A turn's
        # own frames (`committed`) come after its commit, and waiting for every turn taken since
        # (other actors' groups) would only hold them back.
        if not committed:
            await self._db.durable()
        await self._socket.send_text(frame.to_wire_json())

    async def close(self, code: int, reason: str) -> None:
        await self._socket.close(code=code, reason=reason)


class _Agent(Protocol):
    async def accept(self, conn: Connection, claims: _security.TicketClaims) -> int | None: ...

    async def handle(self, serial: int, raw: str | bytes) -> None: ...

    def said_hello(self, serial: int) -> bool: ...

    async def disconnected(self, serial: int) -> None: ...


class _FrameBudget:
    """A token bucket: `rate` frames a second sustained, `burst` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._at = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


async def _serve_frames(
    socket: WebSocket[Any, Any, Any],
    services: Services,
    agent: _Agent,
    serial: int,
    kind: str,
    frame_rate: float,
) -> None:
    """Feed the socket's frames to its agent until it closes, within the connection limits.

    A socket that has not said an accepted `hello` within the hello timeout closes with 4408; one
    that sends frames faster than its budget closes with 4429; a frame over `ws_max_size` is
    refused by the WebSocket layer with 1009. Each leaves a content-free `connection.closed`.
    """
    limits = services.settings.connection_limits
    budget = _FrameBudget(frame_rate, limits.socket_frame_burst)
    hello_by = asyncio.get_running_loop().time() + limits.hello_timeout_s
    while True:
        try:
            if agent.said_hello(serial):
                data = await socket.receive_data(mode="text")
            else:
                async with asyncio.timeout_at(hello_by):
                    data = await socket.receive_data(mode="text")
        except TimeoutError:
            await _close(
                socket, services, kind, CLOSE_HELLO_TIMEOUT, "hello_timeout", "no hello in time"
            )
            return
        except WebSocketDisconnect as exc:
            if exc.code == CLOSE_MESSAGE_TOO_BIG:
                services.telemetry.emit("connection.closed", kind=kind, reason="frame_too_big")
            return
        if not budget.take():
            await _close(socket, services, kind, CLOSE_FRAME_RATE, "frame_rate", "too many frames")
            return
        await agent.handle(serial, data)


async def _close(
    socket: WebSocket[Any, Any, Any],
    services: Services,
    kind: str,
    code: int,
    reason: str,
    text: str,
) -> None:
    services.telemetry.emit("connection.closed", kind=kind, reason=reason)
    with contextlib.suppress(Exception):  # the peer may be gone already
        await socket.close(code=code, reason=text)


class _Refused(Exception):
    """The upgrade is refused before it is accepted (HTTP 403): a foreign page origin."""


def _ticket(
    socket: WebSocket[Any, Any, Any],
    services: Services,
    audience: Literal["device", "session"],
    session_id: str | None = None,
) -> _security.TicketClaims | None:
    """Verify origin, signature, audience, expiry and path before any routing.

    A foreign `Origin` is refused at the handshake (403). A bad ticket gets the accepted socket
    closed with 4401, so the extension can tell "take a new ticket" from other failures.
    """
    if not services.settings.socket_origin_allowed(socket.headers.get("origin")):
        services.telemetry.emit("ticket.refused", kind=audience, reason="origin")
        raise _Refused
    token = socket.query_params.get("ticket", "")
    try:
        claims = _security.verify_ticket(
            services.keys, token, audience=audience, now=services.clock.now()
        )
    except _security.TicketError as exc:
        services.telemetry.emit("ticket.refused", kind=audience, reason=exc.reason)
        return None
    if session_id is not None and claims.session != session_id:
        services.telemetry.emit("ticket.refused", kind=audience, reason="wrong_path")
        return None
    return claims


async def _serve(
    socket: WebSocket[Any, Any, Any],
    services: Services,
    audience: Literal["device", "session"],
    session_id: str | None = None,
) -> None:
    """The one socket handler: check the upgrade, accept, attach the agent, serve its frames."""
    try:
        claims = _ticket(socket, services, audience, session_id)
    except _Refused:
        await socket.close(code=CLOSE_NOT_AUTHORITATIVE, reason="origin refused")
        return
    if claims is None:
        await socket.accept()
        await socket.close(code=CLOSE_TICKET_REFUSED, reason="ticket refused")
        return
    limits = services.settings.connection_limits
    agent: _Agent
    if session_id is None:
        agent = services.device_agent(claims.tenant, claims.device)
        rate = limits.socket_frames_per_s
    else:
        agent = services.session_agent(session_id)
        # Up to three frames per command the session quota admits (write_ready, result, a dialog).
        quota = services.settings.quota.commands_per_session_per_min
        rate = max(limits.socket_frames_per_s, 3 * quota / 60)
    await socket.accept()
    serial = await agent.accept(_WsConnection(socket, services.db), claims)
    if serial is None:
        await socket.close(code=CLOSE_TICKET_REFUSED, reason="ticket refused")
        return
    try:
        await _serve_frames(socket, services, agent, serial, audience, rate)
    finally:
        await agent.disconnected(serial)


@websocket("/v1/device/socket")
async def device_socket(socket: WebSocket[Any, Any, Any], services: ServicesDep) -> None:
    await _serve(socket, services, "device")


@websocket("/v1/sessions/{session_id:str}/socket")
async def session_socket(
    socket: WebSocket[Any, Any, Any], services: ServicesDep, session_id: FromPath[str]
) -> None:
    await _serve(socket, services, "session", session_id)
