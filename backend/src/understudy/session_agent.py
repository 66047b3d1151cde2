"""`SessionAgent`: owns one session's data socket (one authoritative connection per session and
browser epoch). The command plane builds on this agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from pydantic import TypeAdapter, ValidationError

from understudy._connection import CLOSE_NOT_AUTHORITATIVE, CLOSE_SHUTDOWN, CLOSE_SUPERSEDED
from understudy._lifecycle import SessionState
from understudy._store import sessions as store
from understudy._store import tickets
from understudy.generated import models as m

if TYPE_CHECKING:
    from understudy._connection import Connection
    from understudy._security import TicketClaims
    from understudy._services import Services

log = logging.getLogger(__name__)
CLIENT_FRAMES: TypeAdapter[m.SessionClientFrame] = TypeAdapter(m.SessionClientFrame)


class SessionAgent:
    def __init__(self, services: Services, session_id: str) -> None:
        self.s = services
        self.session_id = session_id
        self._lock = asyncio.Lock()
        self._conn: Connection | None = None
        self._serial = 0
        self._epochs: tuple[str, int] | None = None  # (browser epoch, lease epoch) of the socket
        self.hello: m.SessionClientHello | None = None

    @property
    def available(self) -> bool:
        return self._conn is not None and self.hello is not None

    async def accept(self, conn: Connection, claims: TicketClaims) -> int | None:
        async with self._lock:
            now = self.s.clock.now()
            with self.s.db.transaction():
                fresh = tickets.consume_jti(self.s.db, claims.jti, claims.exp, now)
                row = store.get(self.s.db, self.session_id)
            authoritative = (
                row is not None
                and row.tenant == claims.tenant
                and row.device_id == claims.device
                and row.lease_id == claims.lease
                and row.lease_epoch == claims.lease_epoch
                and row.browser_epoch == claims.browser_epoch
                and row.status in (SessionState.CONNECTED, SessionState.RECOVERING)
            )
            if not fresh or not authoritative:
                self.s.telemetry.emit(
                    "ticket.refused",
                    tenant=claims.tenant,
                    kind="session",
                    session=self.session_id,
                    reason="replayed" if not fresh else "stale",
                )
                return None
            self.s.telemetry.emit(
                "ticket.consumed", tenant=claims.tenant, kind="session", session=self.session_id
            )
            old, self._conn = self._conn, conn
            self._serial += 1
            self._epochs = (claims.browser_epoch, claims.lease_epoch or 0)
            self.hello = None
            serial = self._serial
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close(CLOSE_SUPERSEDED, "superseded by a newer connection")
        return serial

    async def handle(self, serial: int, raw: str | bytes) -> None:
        if serial != self._serial or self._conn is None:
            return
        try:
            frame = CLIENT_FRAMES.validate_json(raw)
        except ValidationError as exc:
            await self.send(
                m.SessionServerError(
                    type="error", code="invalid_frame", message=str(exc.errors()[0]["msg"])[:2000]
                )
            )
            return
        if isinstance(frame, m.SessionClientHello):
            await self._hello(frame)
            return
        if self.hello is None:
            await self.send(
                m.SessionServerError(
                    type="error", code="hello_required", message="send hello first"
                )
            )
            return
        await self.on_frame(frame)

    async def _hello(self, hello: m.SessionClientHello) -> None:
        if self._epochs != (str(hello.browser_epoch), hello.lease_epoch):
            await self.send(
                m.SessionServerError(
                    type="error",
                    code="not_authoritative",
                    message="hello epochs differ from the ticket's",
                )
            )
            await self.disconnected(self._serial, close=(CLOSE_NOT_AUTHORITATIVE, "stale epoch"))
            return
        self.hello = hello
        row = store.get(self.s.db, self.session_id)
        blocked = row is not None and row.writes_blocked_reason is not None
        await self.send(
            m.SessionServerHelloAck(
                type="hello_ack",
                session_id=hello.session_id,
                lease_epoch=hello.lease_epoch,
                cancel=[],
                unknown=[],
                writes_blocked=blocked,
            )
        )

    async def on_frame(self, frame: m.SessionClientFrame) -> None:
        """Frames after hello; the command plane handles them."""
        log.debug("session frame %s not handled yet", frame.type)

    async def send(self, frame: m.SessionServerFrame) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            await conn.send(frame)
        except Exception:
            log.debug("session send failed", exc_info=True)

    async def demote(self) -> None:
        """The session's authority moved (new lease epoch, closing or terminal): drop the socket."""
        await self.disconnected(self._serial, close=(CLOSE_NOT_AUTHORITATIVE, "authority moved"))

    async def disconnected(self, serial: int, close: tuple[int, str] | None = None) -> None:
        async with self._lock:
            if serial != self._serial or self._conn is None:
                return
            conn, self._conn = self._conn, None
            self.hello = None
        if close is not None:
            with contextlib.suppress(Exception):
                await conn.close(*close)

    async def shutdown(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(CLOSE_SHUTDOWN, "server shutting down")
