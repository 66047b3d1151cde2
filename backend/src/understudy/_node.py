"""This process as one node of several on one PostgreSQL database.

PostgreSQL is the source of truth and the lock manager; nothing here votes or elects:

- **Registry.** The node's row in `nodes` is written at start-up and heartbeated once a second
  (`ClaimWatch` → `PostgresStorage.keep_claim`, on the server's clock, on a connection of its own
  so a busy pool does not delay it). A node whose heartbeat is older than `NODE_DEAD_AFTER_S`, or
  that stopped, is gone.
- **Delivery.** A turn that decides frames for a socket another node holds writes them as outbox
  rows in its own transaction and notifies `o:<node>` on this deployment's channel (delivered on
  commit). Each node LISTENs on one connection of its own, in a thread that hands notifications
  to the event loop, and drains its rows (under the actor's local lock, in `seq` order); it also
  polls every `POLL_S` in case a notification was missed, so a notification is never the only
  copy. A row whose socket serial no longer matches is dropped: the device resends on hello.
- **Wake-ups.** A turn that changed what a waiter waits for (a command outcome, a session
  leaving provisioning, a session socket's hello) notifies `w:<node>:<session>`; every other
  node's waiters for that session re-read. Waiters also re-read every `_turns.WAIT_FALLBACK_S`.
- **Timers.** An actor's earliest due time is a column of its row, written by its turns. Each
  node keeps its local timer (exact), and every `POLL_S` takes rows due for `TAKE_MARGIN_S`
  already (`FOR UPDATE SKIP LOCKED`): those of a node that is gone, or of an actor whose last
  turn ran elsewhere. Turn bodies for deadlines are state-based, so a second firing does nothing.
- **Losing a node.** Every `REAP_S`, each node whose own heartbeat has worked for
  `NODE_DEAD_AFTER_S` looks for actors whose socket a gone node held and runs, for each, the turn a
  disconnect runs (the row lock makes two nodes doing so harmless; the turn releases the socket
  only if its node is still gone by then), then drops the gone nodes' outbox rows. A node never
  counts itself among the gone, however late its own heartbeat: it is running, and its sockets
  are open.
- **Coming back.** A node that was taken for gone while it still ran (paused, starved or cut off
  past `NODE_DEAD_AFTER_S`) learns it from its next heartbeat (its previous one was older than
  `LATE_HEARTBEAT_S`, or its row was stopped or forgotten; it registers again). For
  `AUTHORITY_CHECK_S` after that, every poll compares its open sockets with their actors' rows
  and closes each socket the row no longer names (`CLOSE_SUPERSEDED`): the extension reconnects
  with a fresh ticket and its hello settles the journal, as after any reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

import psycopg

from understudy._periodic import Periodic
from understudy._store._postgres import NODE_DEAD_AFTER_S

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from understudy._clock import Clock
    from understudy._store._ports import Repositories, Storage
    from understudy._store._postgres import PostgresStorage
    from understudy._store.cluster import ActorRef, OutboxRow

log = logging.getLogger(__name__)
T = TypeVar("T")

POLL_S: Final = 0.5  # outbox and timer poll, in case a notification was missed
REAP_S: Final = 1.0  # looking for sockets of gone nodes
TAKE_MARGIN_S: Final = 1.0  # a due row is taken by any node once it is this late
TAKE_HOLD_S: Final = 5.0  # a taken row is left alone this long while its turn runs
LISTEN_RETRY_S: Final = 1.0
# After a late heartbeat, this long of checking this node's sockets against their rows: the
# other nodes' takeover turns may trail their decision by a few seconds on a loaded machine.
AUTHORITY_CHECK_S: Final = 2 * NODE_DEAD_AFTER_S


class NodeHost(Protocol):
    """What the node asks of the process's actors (the `Services` registry)."""

    async def deliver_outbox(self, key: str) -> None:
        """Drain this node's outbox rows for actor `key` onto its local socket."""
        ...

    def wake_session(self, session_id: str) -> None:
        """Waiters for `session_id` on this node re-read."""
        ...

    async def fire_timer(self, ref: ActorRef) -> None:
        """Run the actor's timer turn (making the actor if needed)."""
        ...

    async def socket_lost(
        self, ref: ActorRef, serial: int, *, dead_after_s: float | None = None
    ) -> None:
        """The socket `serial` of the actor was held by a gone node: run its disconnect turn
        (with `dead_after_s`, only if that node's heartbeat is still that old when it runs)."""
        ...

    def open_sockets(self) -> dict[str, int]:
        """This node's open authoritative sockets: actor key → socket serial."""
        ...

    async def taken_over(self, key: str, serial: int) -> bool:
        """Close this node's socket `serial` of `key`, which another node took over (no turn:
        the other node ran the disconnect); False when it is no longer open here."""
        ...


def channel_for(storage: PostgresStorage) -> str:
    """The notification channel of one deployment: channels are per database, so the schema
    (two deployments, or two tests, in one database) is part of the name."""
    with storage.read():
        found = storage.sql.one("SELECT current_schema() AS schema")
    schema = str(found["schema"]) if found is not None else "public"
    return "understudy_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


class SharedNode:
    """The node's side of delivery, wake-ups, timers and takeover (see the module docstring).

    Args:
        storage: the PostgreSQL storage (its `node_id` is this node's).
        clock: the actors' clock, for due times.
    """

    def __init__(self, storage: PostgresStorage, clock: Clock) -> None:
        self._storage = storage
        self._clock = clock
        self.node_id = storage.node_id
        self.channel = channel_for(storage)
        self._host: NodeHost | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_wanted = asyncio.Event()
        self._periodic = (
            Periodic(
                self._poll,
                every_s=POLL_S,
                wake=self._drain_wanted,
                log=log,
                failed=f"node {self.node_id}: the outbox or timer poll failed",
            ),
            Periodic(
                self._reap_round,
                every_s=REAP_S,
                log=log,
                failed=f"node {self.node_id}: taking over gone nodes failed",
            ),
        )
        self.listening = False  # the LISTEN connection is up
        self._healthy_since: float | None = None  # monotonic time the heartbeat last came back
        self._late_seen = storage.late_heartbeats
        self._check_until = 0.0  # monotonic time the checks after a late heartbeat end
        # Counters for `/metrics`.
        self.lock_busy = 0  # turns that found their actor's row held by another node
        self.outbox_written = 0
        self.outbox_delivered = 0
        self.outbox_dropped = 0
        self.timers_taken = 0
        self.sockets_taken_over = 0
        self.sockets_closed_taken = 0  # this node's sockets closed because another took them

    @property
    def heartbeat_ok(self) -> bool:
        """The last heartbeat reached the database."""
        return self._storage.heartbeat_ok

    @property
    def late_heartbeats(self) -> int:
        """Heartbeats that found this node's previous one late, or its row stopped or gone."""
        return self._storage.late_heartbeats

    @property
    def healthy(self) -> bool:
        return self.listening and self._storage.heartbeat_ok

    # -- in a turn's transaction -----------------------------------------------------------------

    def notify_wake(self, repos: Repositories, session_id: str) -> None:
        repos.outbox.notify(self.channel, f"w:{self.node_id}:{session_id}")

    def write_outbox(
        self,
        repos: Repositories,
        *,
        key: str,
        node: str,
        serial: int,
        frames: list[str],
        close: tuple[int, str] | None = None,
    ) -> None:
        """Frames (and a close) for socket `serial` of `key`, held by `node`; sent after commit."""
        seq = repos.actors.bump_outbox(key)
        repos.outbox.add(
            key=key,
            seq=seq,
            node=node,
            serial=serial,
            frames=frames,
            close=close,
            now=self._clock.now(),
        )
        repos.outbox.notify(self.channel, f"o:{node}")
        self.outbox_written += 1

    def take_outbox(self, repos: Repositories, key: str) -> list[OutboxRow]:
        """This node's rows for `key`, removed (the caller holds the actor's local lock)."""
        return repos.outbox.take(self.node_id, key)

    def take_waiting(
        self, repos: Repositories, key: str, outbox_seq: int, delivered_seq: int
    ) -> tuple[list[OutboxRow], int]:
        """Inside a turn of actor `key` for its socket on this node: the rows other nodes left
        for it, and the delivered mark the actor keeps in memory afterwards.

        `outbox_seq` is the actor's row as the turn read it; `delivered_seq` the mark so far. No
        query while the row says nothing was written since. The mark moves only when no row was
        waiting, a fact a rollback cannot undo (writers hold the actor's row): rows taken here
        come back if the turn runs again after a conflict, and must then be taken again, before
        the turn's own frames. After a delivered batch the next turn finds none and catches up.
        """
        if outbox_seq <= delivered_seq:
            return [], delivered_seq
        rows = self.take_outbox(repos, key)
        return rows, delivered_seq if rows else outbox_seq

    async def deliver_outbox(
        self,
        storage: Storage,
        lock: asyncio.Lock,
        key: str,
        *,
        holds: Callable[[int], bool],
        send: Callable[[str], Awaitable[None]],
        taken: Callable[[int], None],
        disconnect: Callable[[int, tuple[int, str]], Awaitable[None]],
    ) -> None:
        """Send this node's outbox rows for actor `key` on its socket, under the actor's `lock`.

        A row for a socket that is no longer the one `holds` names is dropped (its successor says
        hello and learns the state from it); `taken` hears each row's sequence number, `send`
        gets each frame's text, and a row's close runs (`disconnect`) once the lock is released.
        """
        closes: list[tuple[int, tuple[int, str]]] = []
        async with lock:
            with storage.transaction() as repos:
                rows = self.take_outbox(repos, key)
            for row in rows:
                taken(row.seq)
                if not holds(row.serial):
                    self.outbox_dropped += 1
                    continue
                for text in row.frames:
                    await send(text)
                self.outbox_delivered += 1
                if row.close is not None:
                    closes.append((row.serial, row.close))
        for serial, close in closes:
            await disconnect(serial, close)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, host: NodeHost) -> None:
        self._host = host
        self._loop = asyncio.get_running_loop()
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._listen, name=f"understudy-listen-{self.node_id}", daemon=True
        )
        self._thread.start()
        for periodic in self._periodic:
            periodic.start()

    async def stop(self) -> None:
        self._stopping.set()
        await asyncio.gather(*(periodic.stop() for periodic in self._periodic))
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)
            self._thread = None
        self.listening = False

    # -- the LISTEN connection (a thread) --------------------------------------------------------

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._storage.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {self.channel}")
                    self.listening = True
                    self._handoff("o:" + self.node_id)  # rows written while it was down
                    while not self._stopping.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._handoff(note.payload)
                        conn.execute("SELECT 1")  # a dead connection shows here, not silently
            except psycopg.Error:
                if self.listening:
                    log.warning("node %s: the LISTEN connection was lost", self.node_id)
                self.listening = False
                self._stopping.wait(LISTEN_RETRY_S)
        self.listening = False

    def _handoff(self, payload: str) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._notified, payload)

    def _notified(self, payload: str) -> None:
        kind, _, rest = payload.partition(":")
        if kind == "o":
            if rest == self.node_id:
                self._drain_wanted.set()
        elif kind == "w":
            origin, _, session_id = rest.partition(":")
            if origin != self.node_id and self._host is not None:
                self._host.wake_session(session_id)

    # -- polling ---------------------------------------------------------------------------------

    async def _poll(self) -> None:
        """Every `POLL_S`, or at once when a notification wants a drain."""
        if not self._storage.heartbeat_ok:
            return  # the database does not answer: the heartbeat says when it does again
        await self._check_if_late()
        await self.drain()
        await self.take_timers()

    async def _check_if_late(self) -> None:
        late = self._storage.late_heartbeats
        now = time.monotonic()
        if late != self._late_seen:
            self._late_seen = late
            self._check_until = now + AUTHORITY_CHECK_S
        if now < self._check_until:
            await self.check_authority()

    async def check_authority(self) -> int:
        """Close this node's sockets whose actor row names another socket now (another node
        took them over while this one was taken for gone); how many were closed."""
        host = self._host
        if host is None:
            return 0
        opened = host.open_sockets()
        if not opened:
            return 0
        held = dict(
            (ref.key, serial)
            for ref, serial in await asyncio.to_thread(
                self._read, lambda repos: repos.actors.held_by(self.node_id)
            )
        )
        doubtful = [key for key, serial in opened.items() if held.get(key) != serial]
        if not doubtful:
            return 0
        rows = await asyncio.to_thread(
            self._read, lambda repos: {key: repos.actors.get(key) for key in doubtful}
        )
        closed = 0
        for key in doubtful:
            serial, row = opened[key], rows[key]
            # A serial only grows: a row behind this node's socket was read before that socket
            # was claimed, and says nothing about it.
            if row is None or row.sock_serial < serial:
                continue
            if (
                row.sock_serial > serial or row.sock_node != self.node_id
            ) and await host.taken_over(key, serial):
                closed += 1
        if closed:
            self.sockets_closed_taken += closed
            log.warning(
                "node %s: closed %d sockets other nodes took over while this node was taken "
                "for gone; their devices reconnect",
                self.node_id,
                closed,
            )
        return closed

    async def drain(self) -> None:
        """Deliver every outbox row waiting for this node."""
        host = self._host
        if host is None:
            return
        keys = await asyncio.to_thread(
            self._read, lambda repos: repos.outbox.keys_for(self.node_id)
        )
        for key in keys:
            await host.deliver_outbox(key)

    async def take_timers(self) -> None:
        """Run the timer turns of actors due for `TAKE_MARGIN_S` that no other node holds."""
        host = self._host
        if host is None:
            return
        late = self._clock.now() - TAKE_MARGIN_S
        # The usual answer is "nothing": a plain read, in a thread, no transaction.
        if not await asyncio.to_thread(self._read, lambda repos: repos.actors.any_due(late)):
            return
        with self._storage.transaction() as repos:
            taken = repos.actors.take_due(late, TAKE_HOLD_S)
        for ref in taken:
            self.timers_taken += 1
            try:
                await host.fire_timer(ref)
            except Exception:
                log.exception("node %s: a taken timer's turn failed", self.node_id)

    async def _reap_round(self) -> None:
        """Every `REAP_S`."""
        now = time.monotonic()
        if not self._storage.heartbeat_ok:
            self._healthy_since = None
            return
        if self._healthy_since is None:
            self._healthy_since = now
        # Only a node whose own heartbeat has worked for as long as others get to be taken
        # for gone: after the database was away, every node's heartbeat is old for a moment,
        # and nobody's sockets are taken over for that.
        if now - self._healthy_since < NODE_DEAD_AFTER_S:
            return
        await self.reap()

    async def take_back(self) -> None:
        """At start-up: sockets this node id held in an earlier run are gone with that run."""
        host = self._host
        if host is None:
            return
        held = await asyncio.to_thread(self._read, lambda repos: repos.actors.held_by(self.node_id))
        for ref, serial in held:
            await host.socket_lost(ref, serial)

    async def reap(self) -> None:
        """Take over the sockets of gone nodes (their timers are rows any node takes anyway)."""
        host = self._host
        if host is None or not self._storage.heartbeat_ok:
            return  # a node that cannot heartbeat may be the one cut off: it takes nothing
        lost = await asyncio.to_thread(
            self._read,
            lambda repos: repos.actors.sockets_of_dead_nodes(
                NODE_DEAD_AFTER_S, asking=self.node_id
            ),
        )
        for ref, serial in lost:
            self.sockets_taken_over += 1
            # Decided on a read that may be seconds old by the time the turn runs: the turn
            # releases the socket only if its node is still gone then.
            await host.socket_lost(ref, serial, dead_after_s=NODE_DEAD_AFTER_S)
        self.outbox_dropped += await asyncio.to_thread(self._forget_gone)

    # Periodic reads and clean-ups run in a thread: while PostgreSQL does not answer, a pooled
    # connection is waited for up to the pool's timeout, and the event loop must not wait too.

    def _read(self, read: Callable[[Repositories], T]) -> T:
        with self._storage.read() as repos:
            return read(repos)

    def _forget_gone(self) -> int:
        with self._storage.transaction() as repos:
            dropped = repos.outbox.drop_for_dead_nodes(NODE_DEAD_AFTER_S)
            repos.nodes.forget_stopped(3600.0)
        return dropped
