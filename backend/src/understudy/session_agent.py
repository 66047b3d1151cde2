"""`SessionAgent`: one session's data socket, command journal, deadlines, dialogs, blocked
navigations and vault use.

The write protocol (at most once; pending and unknown are explicit):

    admit ─persist preparing─▶ write_prepare (metadata only) ──▶ extension persists prepared
          ◀── write_ready ── persist granted ─▶ write_grant (the command, sent once, never again)
          ◀── result ─────── persist the outcome ─▶ result_ack

Every step is one turn (`_turns.py`): one transaction, frames sent after the commit. What each
event does to a command is the decision table of `_write_protocol.py`; this agent finds the rows,
asks the table, and carries the decision out. Deadlines live in the command rows (ready 5 s,
granted work 25 s, reads 20 s); one timer sleeps until the earliest and start-up re-arms it, so a
deadline that passed while the process was down fires at once. A command admitted under an older
lease epoch than its session's is due at once too: that is how a browser-epoch change reaches
the commands (`epoch_lost`), and why it survives a crash between the coordinator's turn and this
agent's. The socket is authoritative for one (browser epoch, lease epoch); a newer ticket
supersedes it and an epoch change demotes it.

On several nodes (PostgreSQL) the socket's authority is the session's actor row: which node holds
it, its serial, its epochs and its accepted hello. A turn on any node reads it there (`submit`
needs "has the socket said hello"); frames for a socket on another node become outbox rows of the
turn (a grant's secret never does: a grant is decided only on the socket's own node); turns for a
socket are fenced by the row; waiters on other nodes are woken through the node's channel and
re-read at least every `WAIT_FALLBACK_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, assert_never

from pydantic import TypeAdapter, ValidationError

from understudy import _faults, _security
from understudy._admission import check_capabilities, take_quotas
from understudy._clock import utc, wait_until
from understudy._commands import CommandState
from understudy._connection import CLOSE_NOT_AUTHORITATIVE, CLOSE_SHUTDOWN, CLOSE_SUPERSEDED
from understudy._lifecycle import SessionState
from understudy._policy import (
    GRANT_DEADLINE_S,
    IDLE_TTL_S,
    READ_DEADLINE_S,
    READY_DEADLINE_S,
    SYNC_WAIT_S,
)
from understudy._problems import ProblemError
from understudy._store import vault
from understudy._store.cluster import actor_key
from understudy._store.commands import CommandOutcome, GrantCondition, NewCommand
from understudy._turns import WAIT_FALLBACK_S, SocketSupersededError, Timer, Turns
from understudy._turns import Outbox as TurnOutbox
from understudy._write_protocol import Decision, Effect, Event, JournalState, Kind, decide
from understudy.generated import models as m
from understudy.generated.catalog import COMMAND_KINDS

if TYPE_CHECKING:
    from understudy._config import QuotaPolicy
    from understudy._connection import Connection
    from understudy._node import SharedNode
    from understudy._ports import ActorBase
    from understudy._security import Keys, TicketClaims
    from understudy._store._ports import Repositories
    from understudy._store.cluster import ActorRow
    from understudy._store.commands import CommandRow

log = logging.getLogger(__name__)
CLIENT_FRAMES: TypeAdapter[m.SessionClientFrame] = TypeAdapter(m.SessionClientFrame)
SERVER_FRAMES: TypeAdapter[m.SessionServerFrame] = TypeAdapter(m.SessionServerFrame)
_SUPERSEDED = (CLOSE_SUPERSEDED, "superseded by a newer connection")
_DEMOTED = (CLOSE_NOT_AUTHORITATIVE, "authority moved")
_TAKEN_OVER = (CLOSE_SUPERSEDED, "another node took this socket over; reconnect")


def _carries_secret(frame: m.SessionServerFrame | _Text) -> bool:
    """A grant with a secret's plaintext: it never becomes a row (the plaintext lives only in
    memory); a grant is decided on the socket's own node anyway (its turn is fenced)."""
    return isinstance(frame, m.SessionServerWriteGrant) and frame.secret_value is not None


_S = CommandState


class _Text:
    """A frame of the write path written as JSON from values the server validated when it
    stored them: `write_prepare`, `write_grant` without a secret, `result_ack`. Building and
    dumping the model would check them again on every write; `tests/backend/unit/
    test_session_frames.py` holds each text equal to its model's."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def to_wire_json(self) -> str:
        return self.text


_Frame = m.SessionServerFrame | _Text


def _json(value: dict[str, Any]) -> _Text:
    return _Text(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _timestamp(ts: float) -> str:
    """A `Timestamp` as the models write it (pydantic: microseconds unless zero, and `Z`)."""
    return utc(ts).isoformat().replace("+00:00", "Z")


def prepare_frame(
    command_id: str, name: str, lease_epoch: int, dry_run: bool, ready_by: float
) -> _Text:
    """`write_prepare` (metadata only) for an admitted write."""
    return _json(
        {
            "type": "write_prepare",
            "commandId": command_id,
            "name": name,
            "leaseEpoch": lease_epoch,
            "dryRun": dry_run,
            "readyBy": _timestamp(ready_by),
        }
    )


def grant_frame(row: CommandRow) -> _Text:
    """`write_grant` of a granted write that needs no secret: the command as admitted (the row
    keeps the wire form of the validated request)."""
    return _json(
        {
            "type": "write_grant",
            "commandId": row.command_id,
            "leaseEpoch": row.lease_epoch,
            "command": row.request,
            "dryRun": row.dry_run,
            "deadlineAt": _timestamp(row.deadline),
        }
    )


def result_ack_frame(command_id: uuid.UUID) -> _Text:
    """`result_ack`: the result is persisted."""
    return _Text(f'{{"type":"result_ack","commandId":"{command_id}"}}')


@dataclass
class _Outbox(TurnOutbox):
    frames: list[_Frame] = field(default_factory=list)
    wake: set[str] = field(default_factory=set)
    step: str | None = None  # the persisted write step this turn took (for crash points)
    pending: list[_Frame] = field(default_factory=list)  # other nodes' rows, first
    # Command rows as this turn's own statements returned them, for the waiters it wakes.
    rows: dict[str, CommandRow] = field(default_factory=dict)


class SessionAgent:
    """One session's actor: its socket, command journal, deadlines, dialogs and vault use.

    Args:
        base: storage, clock, telemetry and the timer-error counter.
        session_id: the session it serves.
        keys: for request fingerprints and the vault.
        quota: the command quotas.
    """

    def __init__(self, base: ActorBase, session_id: str, *, keys: Keys, quota: QuotaPolicy) -> None:
        self.repos: Repositories = base.repos
        self.clock = base.clock
        self.keys = keys
        self.quota = quota
        self.session_id = session_id
        timer = Timer(
            clock=base.clock,
            due=self._next_due,
            fire=lambda: self._turns.run(self._expire_due),
            failed=base.timer_failed,
            actor="session",
        )
        self._node = base.node
        self._storage = base.db.storage
        self.key = actor_key("session", "", session_id)
        self._turns: Turns[_Outbox] = Turns(
            db=base.db,
            clock=base.clock,
            telemetry=base.telemetry,
            outbox=_Outbox,
            deliver=self._deliver,
            timer=timer,
            node=base.node,
            actor=("session", "", session_id),
            stage=self._stage,
        )
        self._delivered_seq = 0  # the last outbox row of this key sent (or dropped) here
        self._remote_hello: tuple[int, m.SessionClientHello] | None = None  # parsed, by serial
        self._changed = asyncio.Event()  # several nodes: the socket's row or an outcome changed
        self._conn: Connection | None = None
        self._serial = 0
        self._epochs: tuple[str, int] | None = None  # (browser epoch, lease epoch) of the socket
        self.hello: m.SessionClientHello | None = None
        # The waiters for a command's outcome, each with its own event, by command id: only
        # while a request waits (an entry per command for the session's whole life would grow
        # with every command it ran).
        self._events: dict[str, set[asyncio.Event]] = {}
        # The command rows the last turn delivered here wrote, as committed: a waiter it woke
        # takes its row from here instead of reading it again. Replaced by every turn (a turn
        # that wrote none empties it) and emptied when another node or actor may have changed
        # a row, so a row here is always the current one; never kept longer than that.
        self._handed: dict[str, CommandRow] = {}
        self._ready = asyncio.Event()  # set while an authoritative socket has said hello

    @property
    def available(self) -> bool:
        return self._conn is not None and self.hello is not None

    @property
    def connected(self) -> bool:
        return self._conn is not None

    async def close_current(self, code: int, reason: str) -> None:
        """Close the authoritative connection, if any, as if it had disconnected."""
        await self.disconnected(self._serial, close=(code, reason))

    def said_hello(self, serial: int) -> bool:
        """Whether connection `serial` is authoritative and its hello was accepted."""
        return serial == self._serial and self._conn is not None and self.hello is not None

    async def wait_available(self, until: float) -> bool:
        """Wait (on the injected clock) until the session socket has said hello, or `until`."""
        if self._node is not None:
            return await self._wait_available_shared(until)
        if not self.available and self.clock.now() < until:
            await wait_until(self._ready, self.clock, until)
        return self.available

    async def _wait_available_shared(self, until: float) -> bool:
        """The socket may say hello on any node: its row answers, re-read when woken."""
        while True:
            self._changed.clear()
            row = self.repos.actors.get(self.key)
            if row is not None and row.said_hello:
                return True
            if self.clock.now() >= until:
                return False
            await self._wait_changed(self._changed, until)

    async def _wait_changed(self, event: asyncio.Event, until: float) -> None:
        """Wait for `event` or `until`, and at most `WAIT_FALLBACK_S` of real time: a wake-up
        from another node may be missed, the rows never are."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(WAIT_FALLBACK_S):
                await wait_until(event, self.clock, until)

    def woken(self) -> None:
        """Another node changed this session (an outcome, its socket): waiters here re-read."""
        self._handed = {}
        self._changed.set()
        self._wake_all()

    async def fire_timer(self) -> None:
        """The timer turn, when another node's poll took this actor's due row."""
        await self._turns.run(self._expire_due)

    def _hello_of(self, row: ActorRow) -> m.SessionClientHello | None:
        """The hello the row's socket said, wherever that socket is."""
        if not row.said_hello or row.hello is None:
            return None
        cached = self._remote_hello
        if cached is None or cached[0] != row.sock_serial:
            parsed = m.SessionClientHello.model_validate_json(row.hello)
            cached = self._remote_hello = (row.sock_serial, parsed)
        return cached[1]

    def _stage(self, out: _Outbox) -> None:
        """Last in the turn's transaction: frames for a socket on another node become outbox
        rows; for this node's socket, rows other nodes wrote before go first."""
        node, row = self._node, out.actor
        if node is None or row is None:
            return
        if out.wake:
            out.wake_sessions.add(self.session_id)
        if (
            row.sock_node == node.node_id
            and self._conn is not None
            and self._serial == (row.sock_serial)
        ):
            waiting, self._delivered_seq = node.take_waiting(
                self.repos, self.key, row.outbox_seq, self._delivered_seq
            )
            for taken in waiting:
                if taken.close is None and taken.serial == self._serial:
                    out.pending += [SERVER_FRAMES.validate_json(t) for t in taken.frames]
            return
        frames = [frame for frame in out.frames if not _carries_secret(frame)]
        out.frames = []  # none leaves from here: the socket is elsewhere, or nowhere
        if row.sock_node is not None and frames:
            node.write_outbox(
                self.repos,
                key=self.key,
                node=row.sock_node,
                serial=row.sock_serial,
                frames=[frame.to_wire_json() for frame in frames],
            )

    async def deliver_outbox(self) -> None:
        """Send this node's outbox rows for the session on its socket, if it still holds it (a
        row for an older socket is dropped: its successor says hello)."""
        if self._node is not None:
            await self._node.deliver_outbox(
                self._storage,
                self._turns.lock,
                self.key,
                holds=self._holds,
                send=self._send_row,
                taken=self._taken,
                disconnect=self._disconnect_row,
            )

    def _holds(self, serial: int) -> bool:
        return self._conn is not None and serial == self._serial

    async def _send_row(self, text: str) -> None:
        await self.send(SERVER_FRAMES.validate_json(text))

    def _taken(self, seq: int) -> None:
        self._delivered_seq = max(self._delivered_seq, seq)

    async def _disconnect_row(self, serial: int, close: tuple[int, str]) -> None:
        await self.disconnected(serial, close=close)

    # -- turns ---------------------------------------------------------------------------------

    async def _deliver(self, out: _Outbox) -> None:
        self._handed = out.rows  # first: whatever follows may raise (a crash point)
        if out.step is not None:
            _faults.after(out.step)
        committed = out.committed
        for frame in out.pending:
            await self.send(frame, committed=committed)
        for frame in out.frames:
            await self.send(frame, committed=committed)
        events = self._events
        for command_id in out.wake:
            for event in events.get(command_id, ()):
                event.set()
        if out.wake_sessions:  # several nodes: this node's waiters on the socket's row too
            self._changed.set()

    # -- admission -----------------------------------------------------------------------------

    async def submit(self, tenant: str, actor: str, request: m.CommandRequest) -> CommandRow:
        """Admit one command, or return the durable row of an earlier admission of its id."""
        command = request.command.to_wire()
        name = command["name"]
        kind = COMMAND_KINDS[name]
        dry_run = bool(request.dry_run)
        command_id = str(request.command_id)
        fingerprint = _security.request_fingerprint(
            self.keys,
            tenant,
            f"command:{self.session_id}",
            {"command": command, "dryRun": dry_run},
        )

        def body(out: _Outbox, now: float) -> CommandRow:
            session = self.repos.sessions.get(self.session_id)
            if session is None or session.tenant != tenant:
                raise ProblemError(
                    404, "session_not_found", "no session with this id in your tenant"
                )
            # The earlier admission of this id and the session's open commands: one statement.
            prior, busy = self.repos.commands.admission(self.session_id, command_id)
            if prior is not None and not _security.digests_equal(prior.fingerprint, fingerprint):
                raise ProblemError(
                    409,
                    "command_id_conflict",
                    "this commandId was used for a different request; use a new "
                    "commandId for a new command",
                    command_id=command_id,
                    retry_policy="none",
                )
            admission = decide(kind, prior.state if prior is not None else None, Event.ADMIT)
            if prior is not None and admission.has(Effect.REPLAY):
                return prior
            target = admission.target
            assert target is not None  # noqa: S101 - the table admits what it does not replay
            state = SessionState(session.status)
            if state == SessionState.CLOSING or state.terminal:
                raise ProblemError(
                    410, "session_terminal", f"the session is {state.value}; create a new session"
                )
            if busy:
                raise ProblemError(
                    429,
                    "session_busy",
                    "another command owns this session's slot; retry after it finishes",
                    retry_after=1,
                    retry_policy="wait_for_slot",
                )
            hello, available = self.hello, self.available
            if out.actor is not None:  # several nodes: the socket may be on any of them
                hello, available = self._hello_of(out.actor), out.actor.said_hello
            check_capabilities(self.repos, session, hello, command, kind, dry_run, command_id)
            if not available:
                raise ProblemError(
                    503,
                    "session_unavailable",
                    "no tab is attached to this attended session yet; a person attaches one "
                    "from the extension's panel; retry after Retry-After"
                    if state == SessionState.AWAITING_ATTACH
                    else "the tab's connection is down; retry after Retry-After",
                    retry_after=2,
                )
            take_quotas(
                self.repos, self.quota, session, actor, name, now, self._turns.report_refusal
            )
            epoch = session.lease_epoch
            ready_deadline = None if kind == "read" else now + READY_DEADLINE_S
            deadline = now + (READ_DEADLINE_S if kind == "read" else GRANT_DEADLINE_S)
            row: CommandRow | None
            if prior is None:
                row = self.repos.commands.insert(
                    NewCommand(
                        session_id=self.session_id,
                        command_id=command_id,
                        tenant=tenant,
                        actor=actor,
                        name=name,
                        kind=kind,
                        dry_run=dry_run,
                        fingerprint=fingerprint,
                        request=command,
                        state=target.value,
                        lease_epoch=epoch,
                        browser_epoch=session.browser_epoch,
                        admitted_at=now,
                        ready_deadline=ready_deadline,
                        deadline=deadline,
                    )
                )
            else:  # a retry of a command that never ran
                row = self.repos.commands.readmit(
                    self.session_id,
                    command_id,
                    state=target.value,
                    attempt=prior.attempt + 1,
                    lease_epoch=epoch,
                    browser_epoch=session.browser_epoch,
                    request=command,
                    admitted_at=now,
                    ready_deadline=ready_deadline,
                    deadline=deadline,
                )
            assert row is not None  # noqa: S101 - written above
            out.rows[command_id] = row
            # Exact without asking the rows again: no other command of the session is open
            # (`busy` is empty, read in this transaction), and this one is of the session's
            # lease epoch, so the actor's earliest due time is this command's.
            out.due = _due(row) if CommandState(row.state).open else None
            # The admitted command moves the idle expiry in this same transaction (never past the
            # hard expiry). The tenant's timer may then fire early for the old deadline; its tick
            # finds nothing due and re-arms, so no coordinator turn is needed per command.
            self.repos.sessions.record_command(self.session_id, now=now, idle_ttl_s=IDLE_TTL_S)
            self._turns.report(
                "command.admitted", tenant=tenant, session=self.session_id, command=name, kind=kind
            )
            out.step = admission.step
            if admission.has(Effect.SEND_READ):
                out.frames.append(
                    m.SessionServerRead(
                        type="read",
                        command_id=request.command_id,
                        command=request.command,
                        deadline_at=utc(row.deadline),
                    )
                )
            elif admission.has(Effect.SEND_PREPARE):
                out.frames.append(
                    prepare_frame(command_id, name, epoch, dry_run, now + READY_DEADLINE_S)
                )
            return row

        return await self._turns.run(body)

    async def wait_outcome(self, command_id: str, within: float = SYNC_WAIT_S) -> CommandRow:
        """Wait (on the injected clock) until the command is no longer open, or `within` passes."""
        row = self._handed.get(command_id) or self.repos.commands.get(self.session_id, command_id)
        assert row is not None  # noqa: S101 - the caller admitted it
        until = min(row.admitted_at + within, row.deadline)
        if not CommandState(row.state).open:
            return row
        event = asyncio.Event()
        waiters = self._events.setdefault(command_id, set())
        waiters.add(event)
        try:
            return await self._wait_outcome(command_id, row, event, until)
        finally:
            waiters.discard(event)
            if not waiters and self._events.get(command_id) is waiters:
                del self._events[command_id]

    async def _wait_outcome(
        self, command_id: str, row: CommandRow, event: asyncio.Event, until: float
    ) -> CommandRow:
        while True:
            if not CommandState(row.state).open:
                return row
            if self.clock.now() >= until:
                # The deadline may be due this very moment. Shielded: if the waiting request
                # goes away (its key was revoked), the turn it started still runs to its end.
                await asyncio.shield(self._turns.run(self._expire_due))
                latest = self.repos.commands.get(self.session_id, command_id)
                assert latest is not None  # noqa: S101
                return latest
            event.clear()
            if self._node is not None:
                await self._wait_changed(event, until)
            else:
                await wait_until(event, self.clock, until)
            # The row the waking turn wrote, when it was a turn of this node's (no statement).
            found = self._handed.get(command_id) or self.repos.commands.get(
                self.session_id, command_id
            )
            assert found is not None  # noqa: S101
            row = found

    # -- frames from the extension -------------------------------------------------------------

    async def accept(self, conn: Connection, claims: TicketClaims) -> int | None:
        """Make `conn` authoritative if its ticket is fresh and its authority current."""

        def body(out: _Outbox, now: float) -> int | None:
            fresh = self.repos.tickets.consume(claims.jti, claims.exp, now)
            row = self.repos.sessions.get(self.session_id)
            device = self.repos.devices.get(claims.tenant, claims.device)
            authoritative = (
                row is not None
                # A ticket minted before its device was revoked dies with it.
                and device is not None
                and device.revoked_at is None
                and row.tenant == claims.tenant
                and row.device_id == claims.device
                and row.lease_id == claims.lease
                and row.lease_epoch == claims.lease_epoch
                and row.browser_epoch == claims.browser_epoch
                and row.status in (SessionState.CONNECTED, SessionState.RECOVERING)
            )
            if not fresh or not authoritative:
                self._turns.report(
                    "ticket.refused",
                    tenant=claims.tenant,
                    kind="session",
                    session=self.session_id,
                    reason="replayed" if not fresh else "stale",
                )
                return None
            self._turns.report(
                "ticket.consumed", tenant=claims.tenant, kind="session", session=self.session_id
            )
            return self._claim(out, claims)

        async with self._turns.lock:
            # Accepting the socket promises nothing stored; the hello's turn waits for the disk.
            serial = await self._turns.run_locked(body, durable=False)
            if serial is None:
                return None
            old, self._conn = self._conn, conn
            self._serial = serial
            self._epochs = (claims.browser_epoch, claims.lease_epoch or 0)
            self.hello = None
            self._ready.clear()
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close(*_SUPERSEDED)
        return serial

    def _claim(self, out: _Outbox, claims: TicketClaims) -> int:
        """The accepted socket's serial; on several nodes, the row says this node holds it with
        the ticket's epochs, and the node that held the one before is told to close it."""
        node, row = self._node, out.actor
        if node is None or row is None:
            return self._serial + 1
        serial = self.repos.actors.claim_socket(
            self.key, node.node_id, claims.browser_epoch, claims.lease_epoch or 0
        )
        if row.sock_node is not None and row.sock_node != node.node_id:
            node.write_outbox(
                self.repos,
                key=self.key,
                node=row.sock_node,
                serial=row.sock_serial,
                frames=[],
                close=_SUPERSEDED,
            )
        out.actor = replace(row, sock_node=node.node_id, sock_serial=serial, hello=None)
        return serial

    async def handle(self, serial: int, raw: str | bytes) -> None:
        if serial != self._serial or self._conn is None:
            return
        try:
            frame = CLIENT_FRAMES.validate_json(raw)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = "/".join(str(p) for p in first["loc"])
            await self.send(
                m.SessionServerError(
                    type="error", code="invalid_frame", message=f"{where}: {first['msg']}"[:2000]
                )
            )
            return
        if not isinstance(frame, m.SessionClientHello) and self.hello is None:
            await self.send(
                m.SessionServerError(
                    type="error", code="hello_required", message="send hello first"
                )
            )
            return
        try:
            await self._dispatch(serial, frame)
        except SocketSupersededError:  # another socket holds the session's row now
            await self.disconnected(serial, close=_SUPERSEDED)

    async def _dispatch(self, serial: int, frame: m.SessionClientFrame) -> None:
        run = self._turns.run
        match frame:
            case m.SessionClientHello():
                await self._hello(serial, frame)
            case m.SessionClientReadResult():
                await run(lambda out, now: self._read_result(out, now, frame), fence=serial)
            case m.SessionClientWriteReady():
                await run(lambda out, now: self._write_ready(out, now, frame), fence=serial)
            case m.SessionClientResult():
                await run(lambda out, now: self._result(out, now, frame), fence=serial)
            case m.SessionClientDialog():
                await run(lambda out, now: self._dialog(out, now, frame), fence=serial)
            case m.SessionClientNavigationBlocked():
                await run(lambda out, now: self._navigation_blocked(now, frame), fence=serial)
            case m.SessionClientError():
                log.info("extension reported error code=%s", frame.code)
            case _:
                assert_never(frame)

    async def _hello(self, serial: int, hello: m.SessionClientHello) -> None:
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
        journal: dict[str, JournalState] = {
            str(entry.command_id): entry.state for entry in hello.journal
        }

        def body(out: _Outbox, now: float) -> None:
            cancel: list[uuid.UUID] = []
            unknown: list[uuid.UUID] = []
            settled: list[tuple[CommandRow | None, str, Decision]] = []
            for open_row in self.repos.commands.open_commands(self.session_id):
                held = journal.get(open_row.command_id)
                decision = self._decide(open_row, Event.HELLO, held)
                settled.append((open_row, open_row.command_id, decision))
            seen = {command_id for _, command_id, _ in settled}
            for command_id, held in journal.items():  # entries we already settled, or never had
                if command_id not in seen:
                    row = self.repos.commands.get(self.session_id, command_id)
                    settled.append((row, command_id, self._decide(row, Event.HELLO, held)))
            for row, command_id, decision in settled:
                self._apply(out, row, uuid.UUID(command_id), decision, now)
                if decision.has(Effect.HELLO_CANCEL):
                    cancel.append(uuid.UUID(command_id))
                if decision.has(Effect.HELLO_UNKNOWN):
                    unknown.append(uuid.UUID(command_id))
            session = self.repos.sessions.require(self.session_id)
            if self._node is not None:  # any node's submit can now see the socket is there
                self.repos.actors.said_hello(self.key, serial, hello.to_wire_json())
                out.wake_sessions.add(self.session_id)
            out.frames.append(
                m.SessionServerHelloAck(
                    type="hello_ack",
                    session_id=hello.session_id,
                    lease_epoch=hello.lease_epoch,
                    cancel=sorted(set(cancel), key=str),
                    unknown=sorted(set(unknown), key=str),
                    writes_blocked=session.writes_blocked_reason is not None,
                )
            )

        self.hello = hello
        try:
            await self._turns.run(body, fence=serial)
        except BaseException:
            self.hello = None
            raise
        self._ready.set()

    def _read_result(self, out: _Outbox, now: float, frame: m.SessionClientReadResult) -> None:
        row = self.repos.commands.get(self.session_id, str(frame.command_id))
        succeeded = frame.outcome == "succeeded"
        event = Event.READ_SUCCEEDED if succeeded else Event.READ_FAILED
        decision = self._decide(row, event, kind="read")
        self._apply(
            out, row, frame.command_id, decision, now, result=frame.result, error=frame.error
        )

    def _write_ready(self, out: _Outbox, now: float, frame: m.SessionClientWriteReady) -> None:
        # The common case in one statement: a preparing write of the frame's lease epoch is
        # granted, the condition in its WHERE. Any other row (or a fill_secret, which needs the
        # vault first) is read and decided as the table says.
        grant = decide("write", _S.PREPARING, Event.WRITE_READY)
        assert grant.target is not None  # noqa: S101 - the table grants a preparing write
        when = GrantCondition(_S.PREPARING.value, frame.lease_epoch, "fill_secret")
        granted = self.repos.commands.grant(
            self.session_id, str(frame.command_id), state=grant.target.value, when=when
        )
        if granted is not None:
            # Exact without asking the rows again: this is the session's one open command (see
            # `_result`), and the session is of its lease epoch (the grant's condition).
            out.due = _due(granted)
            self._apply(out, granted, frame.command_id, grant, now, persisted=True)
            out.frames.append(grant_frame(granted))
            return
        row = self.repos.commands.get(self.session_id, str(frame.command_id))
        decision = self._decide(row, Event.WRITE_READY)
        if row is None or not decision.has(Effect.SEND_GRANT):
            self._apply(out, row, frame.command_id, decision, now)
            return
        if frame.lease_epoch != row.lease_epoch:
            self._apply(out, row, frame.command_id, self._decide(row, Event.READY_STALE_EPOCH), now)
            return
        command = _command_of(row)
        secret: str | None = None
        if row.name == "fill_secret":
            name = command.secret_ref.removeprefix("vault:")
            if row.dry_run:  # a dry run checks the secret exists, never decrypts it
                secret = "" if self.repos.vault.exists(row.tenant, name) else None
            else:
                secret = vault.reveal(self.repos.vault, self.keys, row.tenant, name)
            if secret is None:
                missing = m.ErrorInfo(
                    code="secret_not_found",
                    message=f"no secret named {command.secret_ref} in your tenant's vault; "
                    "add it with `understudy secrets put`",
                )
                decision = self._decide(row, Event.READY_NOT_IN_VAULT)
                self._apply(out, row, frame.command_id, decision, now, error=missing)
                return
        self._apply(out, row, frame.command_id, decision, now)
        # The plaintext exists only in this frame object, in memory, until it is sent.
        out.frames.append(_grant_frame(frame.command_id, row, secret, command))

    def _result(self, out: _Outbox, now: float, frame: m.SessionClientResult) -> None:
        event = Event.WRITE_SUCCEEDED if frame.outcome == "succeeded" else Event.WRITE_FAILED
        # The common case in one statement: a granted write settles, the state in the WHERE;
        # a result for a row in any other state (or none) is read and decided as the table says.
        settle = decide("write", _S.GRANTED, event)
        assert settle.target is not None  # noqa: S101 - the table settles a granted write
        settled = self.repos.commands.settle(
            self.session_id,
            str(frame.command_id),
            state=settle.target.value,
            completed_at=now,
            outcome=_outcome(frame.result, frame.error),
            from_state=_S.GRANTED.value,
        )
        if settled is not None:
            # Nothing of the session is open any more: a session has at most one open command
            # (admission refuses another while one is, `session_busy`), and this one just ended.
            out.due = None
            self._apply(
                out,
                settled,
                frame.command_id,
                settle,
                now,
                result=frame.result,
                error=frame.error,
                persisted=True,
            )
            return
        row = self.repos.commands.get(self.session_id, str(frame.command_id))
        decision = self._decide(row, event, kind="write")
        self._apply(
            out, row, frame.command_id, decision, now, result=frame.result, error=frame.error
        )

    def _dialog(self, out: _Outbox, now: float, frame: m.SessionClientDialog) -> None:
        record = frame.dialog.to_wire()
        if self.repos.dialogs.record(self.session_id, str(frame.dialog.dialog_id), record, now):
            self._turns.report(
                "dialog.recorded",
                session=self.session_id,
                kind=frame.dialog.dialog_type,
                status=frame.dialog.delivery,
            )
        out.frames.append(
            m.SessionServerDialogAck(type="dialog_ack", dialog_id=frame.dialog.dialog_id)
        )

    def _navigation_blocked(self, now: float, frame: m.SessionClientNavigationBlocked) -> None:
        """Keep what the page tried for the session status; the origin never reaches telemetry."""
        record = frame.blocked.to_wire()
        if self.repos.blocked.record(self.session_id, str(frame.blocked.blocked_id), record, now):
            self._turns.report(
                "navigation.blocked",
                session=self.session_id,
                kind=frame.blocked.kind,
                reason=frame.blocked.cause,
            )

    # -- outcomes ------------------------------------------------------------------------------

    def _decide(
        self,
        row: CommandRow | None,
        event: Event,
        journal: JournalState | None = None,
        *,
        kind: Kind = "write",
    ) -> Decision:
        """The table's decision for `row` (None: no such command; `kind` says what the frame
        that named it expected)."""
        if row is None:
            return decide(kind, None, event, journal)
        return decide("read" if row.kind == "read" else "write", row.state, event, journal)

    def _apply(
        self,
        out: _Outbox,
        row: CommandRow | None,
        command_id: uuid.UUID,
        decision: Decision,
        now: float,
        *,
        result: Any = None,
        error: m.ErrorInfo | None = None,
        persisted: bool = False,
    ) -> None:
        """Carry out a decision: persist the next state (unless the caller's statement already
        did: `persisted`, `row` as it wrote it), then queue its frames."""
        target = decision.target
        if row is not None and target is not None:
            if persisted:
                out.rows[row.command_id] = row
            if target.open:  # granted: the deadline of the work runs on
                if not persisted:
                    self.repos.commands.grant(self.session_id, row.command_id, state=target.value)
                # No wake-up: a waiter waits for an outcome (and its deadline, which a grant
                # keeps), so it would only read the row and wait again.
            else:
                reported = decision.has(Effect.RECORD_OUTCOME)
                self._end(row, target, now, reported, result, error, persisted=persisted)
                out.wake.add(row.command_id)
        if row is not None and decision.has(Effect.BLOCK_WRITES):
            session = self.repos.sessions.require(self.session_id)
            if session.writes_blocked_reason is None:  # the first reason stays the one reported
                self.repos.sessions.block_writes(
                    self.session_id, reason="unknown_outcome", command_id=row.command_id
                )
        if decision.step is not None:
            out.step = decision.step
        for effect in decision.effects:
            frame = _frame_of(effect, command_id)
            if frame is not None:
                out.frames.append(frame)

    def _end(
        self,
        row: CommandRow,
        target: CommandState,
        now: float,
        reported: bool,
        result: Any,
        error: m.ErrorInfo | None,
        *,
        persisted: bool = False,
    ) -> None:
        """Persist a terminal state (unless `persisted`), with the outcome's columns when the
        extension gave one, and report it."""
        if not persisted:
            # With an outcome, the request's arguments are dropped: not kept once it is.
            outcome = _outcome(result, error) if reported else None
            self.repos.commands.settle(
                self.session_id,
                row.command_id,
                state=target.value,
                completed_at=now,
                outcome=outcome,
            )
        # Latency only for outcomes the extension reported; the others ended on a deadline.
        latency = {"latency_ms": int((now - row.admitted_at) * 1000)} if reported else {}
        self._turns.report(
            "command.outcome",
            session=self.session_id,
            command=row.name,
            outcome=target.value,
            kind=row.kind,
            **latency,
        )

    def _settle_open(self, out: _Outbox, now: float, event: Event) -> None:
        """Decide `event` for every open command."""
        for row in self.repos.commands.open_commands(self.session_id):
            decision = self._decide(row, event)
            self._apply(out, row, uuid.UUID(row.command_id), decision, now)

    async def epoch_lost(self) -> None:
        """The session's lease epoch moved on (the browser restarted): every command admitted
        under an older one ends now. Safe to repeat; after a crash the timer does it."""
        await self._turns.run(self._expire_due)

    # -- the timer -----------------------------------------------------------------------------

    def _expire_due(self, out: _Outbox, now: float) -> None:
        session = self.repos.sessions.get(self.session_id)
        for row in self.repos.commands.open_commands(self.session_id):
            if session is not None and row.lease_epoch < session.lease_epoch:
                event = Event.EPOCH_LOST
            elif now >= _due(row):
                event = Event.DEADLINE
            else:
                continue
            self._apply(out, row, uuid.UUID(row.command_id), self._decide(row, event), now)

    def _next_due(self) -> float | None:
        """The earliest moment `_expire_due` has something to do."""
        # One aggregate; a command of an older lease epoch is due at once (its admission).
        return self.repos.commands.next_due(self.session_id)

    @property
    def timer_due(self) -> float | None:
        """When the session's timer fires next (None: not armed)."""
        return self._turns.timer.due  # type: ignore[union-attr]  # this actor always has a timer

    def arm(self) -> None:
        """(Re)arm the timer at the earliest deadline of an open command."""
        self._turns.timer.arm()  # type: ignore[union-attr]  # this actor always has a timer

    # -- the socket ----------------------------------------------------------------------------

    async def send(self, frame: _Frame, *, committed: bool = False) -> None:
        """Send on the authoritative socket, if any (`committed`: see `Connection.send`)."""
        conn = self._conn
        if conn is None:
            return
        try:
            await conn.send(frame, committed=committed)
        except Exception:
            log.debug("session send failed", exc_info=True)

    async def demote(self) -> None:
        """The session's authority moved (new lease epoch, closing or terminal): drop the socket
        and wake every waiter so it re-reads the durable state."""
        self._handed = {}
        if self._node is not None:
            await self._demote_shared(self._node)
        else:
            await self.disconnected(self._serial, close=_DEMOTED)
        self._wake_all()

    def _wake_all(self) -> None:
        """Every outcome waiter re-reads its row."""
        for events in self._events.values():
            for event in events:
                event.set()

    async def _demote_shared(self, node: SharedNode) -> None:
        """The socket may be on any node: its row is released in one turn, and its node told."""
        released: list[int] = []

        def body(out: _Outbox, now: float) -> None:
            released.clear()  # a turn may run again after a lost race: only its last run counts
            row = out.actor
            assert row is not None  # noqa: S101 - a turn on several nodes locks its row
            if row.sock_node is None or not self.repos.actors.release_socket(
                self.key, row.sock_serial
            ):
                return
            released.append(row.sock_serial)
            if row.sock_node != node.node_id:
                node.write_outbox(
                    self.repos,
                    key=self.key,
                    node=row.sock_node,
                    serial=row.sock_serial,
                    frames=[],
                    close=_DEMOTED,
                )
            out.actor = replace(row, sock_node=None)
            self._socket_lost(out, now)

        await self._turns.run(body)
        for serial in released:
            await self._drop_local(serial, _DEMOTED)

    async def disconnected(self, serial: int, close: tuple[int, str] | None = None) -> None:
        conn = await self._drop_local(serial, None)
        if conn is None:
            return
        if self._node is not None:
            await self._turns.run(lambda out, now: self._lost_if_current(out, now, serial))
        else:
            # Reads in flight are lost with the socket; ungranted writes can no longer be granted.
            await self._turns.run(self._socket_lost)
        if close is not None:
            with contextlib.suppress(Exception):
                await conn.close(*close)

    async def _drop_local(self, serial: int, close: tuple[int, str] | None) -> Connection | None:
        """Forget this node's socket `serial` (closing it with `close`); the socket, or None
        when it was not the current one."""
        async with self._turns.lock:
            if serial != self._serial or self._conn is None:
                return None
            conn, self._conn = self._conn, None
            self.hello = None
            self._ready.clear()
        if close is not None:
            with contextlib.suppress(Exception):
                await conn.close(*close)
        return conn

    async def socket_lost_elsewhere(
        self, serial: int, *, dead_after_s: float | None = None
    ) -> None:
        """Socket `serial` was held by a node that is gone: the disconnect it never ran (with
        `dead_after_s`, only while that node's heartbeat is still that old)."""
        await self._turns.run(
            lambda out, now: self._lost_if_current(out, now, serial, dead_after_s=dead_after_s)
        )

    def open_serial(self) -> int | None:
        """The serial of this node's open socket, or None."""
        return self._serial if self._conn is not None else None

    async def taken_over(self, serial: int) -> bool:
        """Another node ran the disconnect of this node's socket `serial` (it took this node for
        gone): close it so the extension reconnects; False when it was no longer open."""
        return await self._drop_local(serial, _TAKEN_OVER) is not None

    def _lost_if_current(
        self, out: _Outbox, now: float, serial: int, *, dead_after_s: float | None = None
    ) -> None:
        """Several nodes: socket `serial` is gone; if the row still names it, the session has no
        socket now (else a newer socket superseded it, and its hello settles the journal)."""
        if not self.repos.actors.release_socket(self.key, serial, dead_after_s=dead_after_s):
            return
        if out.actor is not None:
            out.actor = replace(out.actor, sock_node=None)
        out.wake_sessions.add(self.session_id)
        self._socket_lost(out, now)

    def _socket_lost(self, out: _Outbox, now: float) -> None:
        self._settle_open(out, now, Event.SOCKET_LOST)

    async def shutdown(self) -> None:
        await self._turns.timer.stop()  # type: ignore[union-attr]  # a turn under way ends first
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(CLOSE_SHUTDOWN, "server shutting down")


def _outcome(result: Any, error: m.ErrorInfo | None) -> CommandOutcome:
    """The columns of what the extension reported."""
    return CommandOutcome(
        result=result.to_wire() if result is not None else None,
        error_code=error.code if error is not None else None,
        error_message=error.message if error is not None else None,
    )


def _command_of(row: CommandRow) -> Any:
    """The command of a journal row as the generated model the grant frame carries."""
    return m.CommandRequest.model_validate(
        {"commandId": row.command_id, "command": row.request}
    ).command


def _grant_frame(
    command_id: uuid.UUID, row: CommandRow, secret: str | None, command: Any = None
) -> m.SessionServerWriteGrant:
    return m.SessionServerWriteGrant(
        type="write_grant",
        command_id=command_id,
        lease_epoch=row.lease_epoch,
        command=command if command is not None else _command_of(row),
        dry_run=row.dry_run,
        deadline_at=utc(row.deadline),
        secret_value=secret if not row.dry_run else None,
    )


def _due(row: CommandRow) -> float:
    """When an open command's current deadline passes: the ready deadline while preparing."""
    if row.state == _S.PREPARING and row.ready_deadline is not None:
        return row.ready_deadline
    return row.deadline


def _frame_of(effect: Effect, command_id: uuid.UUID) -> _Frame | None:
    """The frame an effect sends by itself (the read, prepare and grant frames carry more)."""
    match effect:
        case Effect.CANCEL_READY_DEADLINE:
            return m.SessionServerCancel(
                type="cancel", command_id=command_id, reason="ready_deadline"
            )
        case Effect.CANCEL_DEADLINE:
            return m.SessionServerCancel(type="cancel", command_id=command_id, reason="deadline")
        case Effect.CANCEL_SUPERSEDED:
            return m.SessionServerCancel(type="cancel", command_id=command_id, reason="superseded")
        case Effect.SEND_RESULT_ACK:
            return result_ack_frame(command_id)
        case Effect.ERROR_UNKNOWN_COMMAND:
            return _error(command_id, "unknown_command", "no write with this commandId")
        case Effect.ERROR_NOT_GRANTED:
            return _error(command_id, "not_granted", "a result for a write never granted")
        case Effect.ERROR_STALE_LEASE_EPOCH:
            return _error(command_id, "stale_lease_epoch", "write_ready for another lease epoch")
    return None


def _error(command_id: uuid.UUID, code: str, message: str) -> m.SessionServerError:
    return m.SessionServerError(type="error", code=code, message=message, command_id=command_id)
