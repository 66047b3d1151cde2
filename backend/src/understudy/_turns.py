"""The turn: how every actor changes state (the actor rules of the architecture, in one place).

A turn runs a synchronous body under the actor's lock, inside one transaction. What the body
decided to send (frames, wake-ups, telemetry) goes into the turn's outbox and leaves only after
the transaction is durable: persist, then send. A body that raises rolls back and sends nothing,
and its telemetry is dropped with it, so a rolled-back turn reports nothing. The one exception is
a refusal (`ProblemError`): the turn's answer is the refusal, and the records the body marked as
describing it (`report_refusal`) are reported.

Each actor also has at most one timer, armed after every turn at the actor's earliest due time:
the one the body put in its outbox (`Outbox.due`) when it knows it exactly from the rows it read
and wrote, else the rows' answer to one more query.
An error in the timer's turn is logged and counted (`understudy_timer_errors_total`), never
swallowed; the next turn re-arms the timer.

**Several nodes (PostgreSQL).** A turn of an actor that has a `SharedNode` also locks the actor's
row (`actors`, `FOR UPDATE NOWAIT`) first in its transaction, so turns stay one at a time per key
across nodes. When another node holds the row, the transaction rolls back and the turn tries
again after a short jittered backoff, awaited (a lock wait never holds the event loop), up to
`LOCK_WAIT_S`; then it is refused with `503 database_unavailable`. A body may therefore run
more than once (a `RetryableConflictError` anywhere in the transaction runs it again too): it
must change nothing but the transaction and its outbox. A turn acting for a socket
(`fence=serial`) is refused with `SocketSupersededError` when the row names another socket. The
actor's `stage` hook runs last in the transaction (frames for sockets of other nodes become outbox
rows there), then the actor's earliest due time is written to its row, where any node's timer
poll can take it, and the wake-ups for waiters on other nodes are notified, on commit. On SQLite
(`node` None) none of this runs.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from understudy._clock import SystemClock
from understudy._problems import ProblemError
from understudy._store._errors import RetryableConflictError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from understudy._clock import Clock
    from understudy._node import SharedNode
    from understudy._store import Database
    from understudy._store.cluster import ActorRow
    from understudy._telemetry import FieldValue, Telemetry

log = logging.getLogger(__name__)
T = TypeVar("T")

LOCK_WAIT_S: Final = 3.0  # how long a turn keeps trying for its actor's row before a 503
FIRST_BACKOFF_S: Final = 0.002
MAX_BACKOFF_S: Final = 0.05
# At shutdown, how long a timer turn already running may take before it is cancelled (it may be
# waiting for its actor's lock behind another turn's frames).
STOP_WAIT_S: Final = 5.0
# Several nodes: a waiter (a create, a command) re-reads its rows at least this often, in case
# the wake-up from the node that changed them was missed.
WAIT_FALLBACK_S: Final = 0.5
_UNSET: Final = object()


@dataclass
class Outbox:
    """What a turn decided to send; an actor's outbox adds its own frames and wake-ups."""

    # (event, fields, describes the refusal), in the order the body reported them
    reports: list[tuple[str, dict[str, FieldValue], bool]] = field(default_factory=list)
    # Several nodes only: the actor's row as this turn locked it, and the sessions whose waiters
    # on other nodes should re-read once this turn commits.
    actor: ActorRow | None = None
    wake_sessions: set[str] = field(default_factory=set)
    # The actor's earliest due time after this turn, when the body knows it exactly from the
    # rows it read and wrote in this transaction; unset, the timer asks the rows (a statement).
    due: float | object | None = _UNSET
    # Set once the turn is durable (a `durable=False` turn's never is): its frames need not wait
    # for the turns other actors took since.
    committed: bool = False


class SocketSupersededError(RuntimeError):
    """The turn acted for a socket that is no longer the actor's authoritative one in the
    database (another node, or a newer socket, holds it); nothing of the turn was kept."""


class _RowBusy(Exception):
    """Another node's transaction holds the actor's row."""


OutboxT = TypeVar("OutboxT", bound=Outbox)


class NoTurnError(RuntimeError):
    """Telemetry was reported outside a turn (a programming error)."""


class Turns(Generic[OutboxT]):
    """One actor's turns: its lock, its outbox per turn, and its timer.

    Args:
        db: the database whose transaction a turn runs in.
        clock: the injected clock; a body gets its `now`.
        telemetry: where the outbox's records go after the commit.
        outbox: makes the empty outbox of a turn.
        deliver: sends a committed turn's outbox (frames, wake-ups), still under the lock.
        timer: the actor's timer, re-armed after every turn; None for an actor without one.
    """

    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        telemetry: Telemetry,
        outbox: Callable[[], OutboxT],
        deliver: Callable[[OutboxT], Awaitable[None]],
        timer: Timer | None = None,
        node: SharedNode | None = None,
        actor: tuple[str, str, str] = ("", "", ""),
        stage: Callable[[OutboxT], None] | None = None,
    ) -> None:
        self.lock = asyncio.Lock()
        self._node = node
        self._actor = actor  # (kind, tenant, ident) of the actor's row
        self._stage = stage
        self._db = db
        self._clock = clock
        self._telemetry = telemetry
        self._outbox = outbox
        self._deliver = deliver
        self.timer = timer
        self._current: OutboxT | None = None

    async def run(
        self,
        body: Callable[[OutboxT, float], T],
        *,
        durable: bool = True,
        fence: int | None = None,
    ) -> T:
        """Run `body(outbox, now)` as one turn.

        Args:
            body: the turn's decisions, inside its transaction.
            durable: wait until the transaction is on disk before anything leaves. False only for
                a turn whose frames promise nothing a lost commit could contradict (a heartbeat's
                acknowledgement, a socket's acceptance): they leave once the transaction ended,
                and the group commit of this loop iteration makes it durable right after.
            fence: the serial of the socket the turn acts for: on several nodes, the turn is
                refused (`SocketSupersededError`) unless that socket, on this node, is still the
                actor's authoritative one in the database.
        """
        async with self.lock:
            return await self.run_locked(body, durable=durable, fence=fence)

    async def run_locked(
        self,
        body: Callable[[OutboxT, float], T],
        *,
        durable: bool = True,
        fence: int | None = None,
    ) -> T:
        """Run a turn while the caller already holds `lock` (to change memory in the same
        critical section, after the commit)."""
        if self._node is not None:
            return await self._run_shared(body, durable, fence, self._node)
        out = self._outbox()
        self._current = out
        try:
            with self._db.transaction():
                result = body(out, self._clock.now())
        except ProblemError:
            self._emit(out, refused=True)
            raise
        finally:
            self._current = None
        if durable:
            await self._db.durable()  # group commit: nothing leaves before the turn is durable
            out.committed = True
        self._emit(out, refused=False)
        await self._deliver(out)
        if self.timer is not None:
            self.timer.arm(out.due)
        return result

    async def _run_shared(
        self,
        body: Callable[[OutboxT, float], T],
        durable: bool,
        fence: int | None,
        node: SharedNode,
    ) -> T:
        """The turn on several nodes: the actor's row locked first, in the same transaction."""
        give_up = time.monotonic() + LOCK_WAIT_S
        delay = FIRST_BACKOFF_S
        due: float | object | None = _UNSET
        repos = self._db.storage.repos
        while True:
            out = self._outbox()
            self._current = out
            try:
                with self._db.transaction():
                    try:
                        row = repos.actors.lock(*self._actor)
                    except RetryableConflictError:
                        row = None
                    if row is None:
                        raise _RowBusy
                    out.actor = row
                    if fence is not None and (
                        row.sock_node != node.node_id or row.sock_serial != fence
                    ):
                        raise SocketSupersededError(row.key)
                    result = body(out, self._clock.now())
                    if self._stage is not None:
                        self._stage(out)
                    if self.timer is not None:
                        # The body's exact due time when it gave one: it is what this actor's row
                        # tells every node's timer poll, so it must be the rows' own answer.
                        known = out.due
                        due = self.timer.due_now() if known is _UNSET else known
                        assert due is None or isinstance(due, float | int)  # noqa: S101
                        if due != row.due_at:
                            repos.actors.set_due(row.key, due)
                    for session_id in sorted(out.wake_sessions):
                        node.notify_wake(repos, session_id)
                break
            except (_RowBusy, RetryableConflictError):
                # The actor's row, another row it needed without waiting, or a deadlock the
                # server broke: nothing of this run was kept, and the body runs again whole.
                node.lock_busy += 1
                if time.monotonic() >= give_up:
                    raise ProblemError(
                        503,
                        "database_unavailable",
                        "another node kept this resource's turn for too long; retry after "
                        "Retry-After",
                        retry_after=1,
                    ) from None
                await asyncio.sleep(delay * (0.5 + random.random()))  # noqa: S311 - jitter
                delay = min(delay * 2, MAX_BACKOFF_S)
            except ProblemError:
                self._emit(out, refused=True)
                raise
            finally:
                self._current = None
        if durable:
            await self._db.durable()
            out.committed = True
        self._emit(out, refused=False)
        await self._deliver(out)
        if self.timer is not None:
            self.timer.arm(due)
        return result

    def report(self, event: str, **fields: FieldValue) -> None:
        """Report a telemetry record once this turn commits."""
        self._require().reports.append((event, fields, False))

    def report_refusal(self, event: str, **fields: FieldValue) -> None:
        """Report a record that describes the refusal this turn may answer with: it is reported
        whether the turn commits or is refused."""
        self._require().reports.append((event, fields, True))

    def _require(self) -> OutboxT:
        if self._current is None:
            raise NoTurnError("telemetry reported outside a turn")
        return self._current

    def _emit(self, out: OutboxT, *, refused: bool) -> None:
        for event, fields, refusal in out.reports:
            if refusal or not refused:
                self._telemetry.emit(event, **fields)


class Timer:
    """One actor's timer: sleeps (on the injected clock) until `due()`, then runs `fire()`.

    Args:
        clock: the injected clock.
        due: the actor's earliest due time, or None when nothing is due.
        fire: the turn to run when it is due.
        failed: counts a failed `fire` (the `/metrics` counter).
        actor: what kind of actor, for the log and the counter.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        due: Callable[[], float | None],
        fire: Callable[[], Awaitable[None]],
        failed: Callable[[str], None],
        actor: str,
    ) -> None:
        self._clock = clock
        self._due_of = due
        self._fire = fire
        self._failed = failed
        self._actor = actor
        self._task: asyncio.Task[None] | None = None
        # On wall-clock time the timer waits as a loop timer and becomes a task only when due.
        # It is re-armed after every turn, mostly to a later time (a write's ready deadline,
        # then its work deadline, then nothing): the loop timer stays where it is when the new
        # due time is later, and when it goes off early it sleeps again until the due time it
        # finds (`_start`). Only an earlier due time takes a new loop timer.
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = 0.0  # the clock time the loop timer goes off at
        self._due: float | None = None
        # The timer's turns running now (`_task` is cleared before one runs, so a re-arm from
        # within it is a new timer): `stop` waits for them before the database closes.
        self._running: set[asyncio.Task[None]] = set()
        self._stopped = False

    @property
    def due(self) -> float | None:
        """When the armed timer fires (None: not armed)."""
        return self._due

    def due_now(self) -> float | None:
        """The actor's earliest due time as its rows say now (inside a turn: its own changes)."""
        return self._due_of()

    def arm(self, due: float | object | None = _UNSET) -> None:
        """(Re)arm at the earliest due time (`due`, when the turn computed it already); a timer
        already armed for it is left alone."""
        if self._stopped:
            return  # shutting down: a turn that ends now must not start another
        if due is _UNSET:
            due = self._due_of()
        assert due is None or isinstance(due, float | int)  # noqa: S101 - _UNSET replaced
        if isinstance(self._clock, SystemClock):
            self._arm_wall(due)
            return
        armed = self._task is not None and not self._task.done()
        if due == self._due and armed:
            return
        self.disarm()
        if due is not None:
            self._due = due
            self._task = asyncio.get_running_loop().create_task(self._fire_at(due))

    def _arm_wall(self, due: float | None) -> None:
        if self._task is not None and not self._task.done():
            if due == self._due:
                return
            self.disarm()  # a due turn is about to run for the old time: that one is off
        self._due = due
        if due is None:
            return  # a loop timer still set goes off, finds nothing due, and stops
        if self._handle is not None and self._handle_at <= due:
            return  # it goes off first and sleeps again until `due`
        if self._handle is not None:
            self._handle.cancel()
        self._handle_at = due
        delay = max(0.0, due - self._clock.now())
        self._handle = asyncio.get_running_loop().call_later(delay, self._start)

    def _start(self) -> None:
        self._handle = None
        due = self._due
        if due is None:
            return
        if due > self._handle_at:  # re-armed for later since: wait on
            self._handle_at = due
            delay = max(0.0, due - self._clock.now())
            self._handle = asyncio.get_running_loop().call_later(delay, self._start)
            return
        self._task = asyncio.get_running_loop().create_task(self._fire_at(due))

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        self._task = None
        self._due = None

    async def stop(self) -> None:
        """Disarm for good, and return once no turn of this timer is running: a turn already
        under way finishes (after `STOP_WAIT_S` it is cancelled), so the database it uses can
        be closed after this."""
        self._stopped = True
        self.disarm()
        current = asyncio.current_task()
        running = [task for task in self._running if task is not current]
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=STOP_WAIT_S)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)

    async def _fire_at(self, due: float) -> None:
        await self._clock.sleep_until(due)
        self._task = None
        self._due = None
        task = asyncio.current_task()
        assert task is not None  # noqa: S101 - a timer runs as a task
        self._running.add(task)
        try:
            await self._fire()
        except Exception:
            log.exception("%s timer turn failed", self._actor)
            self._failed(self._actor)
        finally:
            self._running.discard(task)
