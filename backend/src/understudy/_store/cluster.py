"""Rows that let several nodes act as one system: actor rows, the outbox and the node registry.

- `actors`: one row per actor key (`tenant:…`, `device:…`, `session:…`). A turn on PostgreSQL
  locks it (`FOR UPDATE NOWAIT`), which makes turns one at a time per key across nodes; it also
  holds who has the actor's authoritative socket (node, a serial that only grows, the epochs of
  its ticket, its accepted hello) and the actor's earliest due time, which any node may take.
- `outbox`: frames a turn decided for a socket held by another node, written in the turn's own
  transaction; that node sends them if the socket's serial still matches, in `seq` order.
- `nodes`: every serving node and its heartbeat, on the database server's clock.

SQLite gets the same tables (one process: they stay empty); every statement is portable, with
the row-lock clauses and the server clock spelled by the `Dialect`.
"""

# ruff: noqa: S608 - the only text put into statements is constants: the column list and the
# dialect's clauses (row locks, the server clock); every value is a bound parameter.
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from understudy._store._sql import Executor

_COLUMNS = (
    "actor_key, due_at, sock_node, sock_serial, browser_epoch, lease_epoch, hello, hello_serial, "
    "outbox_seq"
)


@dataclass(frozen=True)
class ActorRow:
    """An actor's row as its turn locked it (or as a plain read saw it)."""

    key: str
    due_at: float | None = None
    sock_node: str | None = None  # the node holding the authoritative socket, or None
    sock_serial: int = 0  # grows with every accepted socket, whichever node accepted it
    browser_epoch: str | None = None  # of the socket's ticket
    lease_epoch: int | None = None
    hello: str | None = None  # the accepted hello frame (JSON), for the socket `hello_serial`
    hello_serial: int = 0
    outbox_seq: int = 0  # the last outbox row written for this key

    @property
    def said_hello(self) -> bool:
        """Whether the authoritative socket's hello was accepted."""
        return (
            self.sock_node is not None
            and self.hello is not None
            and self.hello_serial == self.sock_serial
        )


def _row(found: dict[str, Any]) -> ActorRow:
    return ActorRow(
        key=found["actor_key"],
        due_at=found["due_at"],
        sock_node=found["sock_node"],
        sock_serial=int(found["sock_serial"]),
        browser_epoch=found["browser_epoch"],
        lease_epoch=found["lease_epoch"],
        hello=found["hello"],
        hello_serial=int(found["hello_serial"]),
        outbox_seq=int(found["outbox_seq"]),
    )


def actor_key(kind: str, tenant: str = "", ident: str = "") -> str:
    """The key of an actor: `tenant:<tenant>`, `device:<tenant>/<device>`, `session:<id>`."""
    if kind == "tenant":
        return f"tenant:{tenant}"
    if kind == "device":
        return f"device:{json.dumps([tenant, ident], separators=(',', ':'))}"
    return f"session:{ident}"


@dataclass(frozen=True)
class ActorRef:
    """What an actor row names, so any node can make the actor on demand."""

    key: str
    kind: str
    tenant: str
    ident: str


class SqlActors:
    """The actor rows (see the module docstring)."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def lock(self, kind: str, tenant: str, ident: str) -> ActorRow | None:
        """Lock the actor's row for this transaction, creating it on first use.

        None when another transaction holds it: PostgreSQL raises `RetryableConflictError` (the
        lock is not waited for, so a wait never holds the caller's thread); SQLite, with its one
        writer, always gets the row.
        """
        key = actor_key(kind, tenant, ident)
        sql = self._sql
        query = f"SELECT {_COLUMNS} FROM actors WHERE actor_key = :key{sql.dialect.lock_nowait}"
        found = sql.one(query, {"key": key})
        if found is None:
            # A row inserted here is this transaction's until it commits, so it is locked too.
            inserted = sql.one(
                "INSERT INTO actors (actor_key, kind, tenant, ident) "
                "VALUES (:key, :kind, :tenant, :ident) "
                f"ON CONFLICT (actor_key) DO NOTHING RETURNING {_COLUMNS}",
                {"key": key, "kind": kind, "tenant": tenant, "ident": ident},
            )
            found = inserted if inserted is not None else sql.one(query, {"key": key})
        return _row(found) if found is not None else None

    def get(self, key: str) -> ActorRow | None:
        found = self._sql.one(f"SELECT {_COLUMNS} FROM actors WHERE actor_key = :key", {"key": key})
        return _row(found) if found is not None else None

    def set_due(self, key: str, due_at: float | None) -> None:
        self._sql.run(
            "UPDATE actors SET due_at = :due WHERE actor_key = :key", {"key": key, "due": due_at}
        )

    def any_due(self, now: float) -> bool:
        """Whether some actor is due by `now` (a plain read: no lock, no transaction needed)."""
        found = self._sql.one(
            "SELECT 1 AS due FROM actors WHERE due_at IS NOT NULL AND due_at <= :now LIMIT 1",
            {"now": now},
        )
        return found is not None

    def take_due(self, now: float, hold_s: float, limit: int = 50) -> list[ActorRef]:
        """Take up to `limit` actors due by `now` whose rows no other transaction holds: their
        due time moves `hold_s` on (so no other node takes them meanwhile); the turn each gets
        then writes the real one."""
        sql = self._sql
        due = sql.rows(
            "SELECT actor_key, kind, tenant, ident FROM actors "
            f"WHERE due_at IS NOT NULL AND due_at <= :now ORDER BY due_at LIMIT :limit"
            f"{sql.dialect.skip_locked}",
            {"now": now, "limit": limit},
        )
        for row in due:
            sql.run(
                "UPDATE actors SET due_at = :later WHERE actor_key = :key",
                {"later": now + hold_s, "key": row["actor_key"]},
            )
        return [ActorRef(r["actor_key"], r["kind"], r["tenant"], r["ident"]) for r in due]

    def claim_socket(
        self, key: str, node: str, browser_epoch: str | None, lease_epoch: int | None
    ) -> int:
        """Make `node` hold the actor's socket; the socket's serial (one more than any before)."""
        found = self._sql.one(
            "UPDATE actors SET sock_node = :node, sock_serial = sock_serial + 1, "
            "browser_epoch = :browser, lease_epoch = :lease, hello = NULL "
            "WHERE actor_key = :key RETURNING sock_serial",
            {"key": key, "node": node, "browser": browser_epoch, "lease": lease_epoch},
        )
        if found is None:
            raise LookupError(f"no actor row {key}; lock it first")
        return int(found["sock_serial"])

    def said_hello(self, key: str, serial: int, hello: str) -> None:
        self._sql.run(
            "UPDATE actors SET hello = :hello, hello_serial = :serial "
            "WHERE actor_key = :key AND sock_serial = :serial",
            {"key": key, "serial": serial, "hello": hello},
        )

    def release_socket(self, key: str, serial: int, *, dead_after_s: float | None = None) -> bool:
        """The socket `serial` is gone; False when a newer one holds the actor already.

        With `dead_after_s`, only while the node holding it is still gone (a takeover decided
        by an earlier read, whose node heartbeated again meanwhile, keeps the socket).
        """
        sql = self._sql
        gone = ""
        params: dict[str, Any] = {"key": key, "serial": serial}
        if dead_after_s is not None:
            gone = (
                " AND NOT EXISTS (SELECT 1 FROM nodes AS n WHERE n.node_id = actors.sock_node "
                f"AND n.stopped_at IS NULL AND n.heartbeat_at >= {sql.dialect.epoch_now} - :dead)"
            )
            params["dead"] = dead_after_s
        changed = sql.run(
            "UPDATE actors SET sock_node = NULL, hello = NULL "
            f"WHERE actor_key = :key AND sock_serial = :serial AND sock_node IS NOT NULL{gone}",
            params,
        )
        return changed > 0

    def bump_outbox(self, key: str) -> int:
        """The next outbox sequence number of `key` (its row stays locked until commit)."""
        # Another actor's row (a coordinator writing to a device's socket) is not waited for:
        # its holder may be waiting for a row this transaction holds. The caller's turn runs
        # again instead (`RetryableConflictError`).
        found = self._sql.one(
            "UPDATE actors SET outbox_seq = outbox_seq + 1 WHERE actor_key = (SELECT actor_key "
            f"FROM actors WHERE actor_key = :key{self._sql.dialect.lock_nowait}) "
            "RETURNING outbox_seq",
            {"key": key},
        )
        if found is None:
            raise LookupError(f"no actor row {key}")
        return int(found["outbox_seq"])

    def held_by(self, node: str) -> list[tuple[ActorRef, int]]:
        """Actors whose socket row names `node` (at its start-up: sockets of its last run)."""
        rows = self._sql.rows(
            "SELECT actor_key, kind, tenant, ident, sock_serial FROM actors "
            "WHERE sock_node = :node",
            {"node": node},
        )
        return [
            (ActorRef(r["actor_key"], r["kind"], r["tenant"], r["ident"]), int(r["sock_serial"]))
            for r in rows
        ]

    def sockets_of_dead_nodes(
        self, dead_after_s: float, *, asking: str
    ) -> list[tuple[ActorRef, int]]:
        """Actors whose socket is held by a node that stopped heartbeating (or stopped), other
        than `asking`: a node late with its own heartbeat is alive, and its sockets are open."""
        sql = self._sql
        rows = sql.rows(
            "SELECT a.actor_key, a.kind, a.tenant, a.ident, a.sock_serial FROM actors AS a "
            "WHERE a.sock_node IS NOT NULL AND a.sock_node <> :asking "
            "AND NOT EXISTS (SELECT 1 FROM nodes AS n "
            "WHERE n.node_id = a.sock_node AND n.stopped_at IS NULL "
            f"AND n.heartbeat_at >= {sql.dialect.epoch_now} - :dead)",
            {"dead": dead_after_s, "asking": asking},
        )
        return [
            (ActorRef(r["actor_key"], r["kind"], r["tenant"], r["ident"]), int(r["sock_serial"]))
            for r in rows
        ]


@dataclass(frozen=True)
class OutboxRow:
    key: str
    seq: int
    serial: int
    frames: list[str]  # each frame's wire JSON
    close: tuple[int, str] | None


class SqlOutbox:
    """Frames for sockets held by other nodes, and the wake-up that tells them."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def add(
        self,
        *,
        key: str,
        seq: int,
        node: str,
        serial: int,
        frames: list[str],
        close: tuple[int, str] | None,
        now: float,
    ) -> None:
        self._sql.run(
            "INSERT INTO outbox (actor_key, seq, node_id, serial, frames, close_code, "
            "close_reason, created_at) VALUES (:key, :seq, :node, :serial, :frames, :code, "
            ":reason, :now)",
            {
                "key": key,
                "seq": seq,
                "node": node,
                "serial": serial,
                "frames": json.dumps(frames),
                "code": close[0] if close else None,
                "reason": close[1] if close else None,
                "now": now,
            },
        )

    def keys_for(self, node: str) -> list[str]:
        """The actor keys with rows waiting for `node`."""
        rows = self._sql.rows(
            "SELECT DISTINCT actor_key FROM outbox WHERE node_id = :node", {"node": node}
        )
        return [r["actor_key"] for r in rows]

    def take(self, node: str, key: str) -> list[OutboxRow]:
        """Remove and return `node`'s rows for `key`, in order."""
        rows = self._sql.rows(
            "DELETE FROM outbox WHERE node_id = :node AND actor_key = :key "
            "RETURNING actor_key, seq, serial, frames, close_code, close_reason",
            {"node": node, "key": key},
        )
        taken = [
            OutboxRow(
                key=r["actor_key"],
                seq=int(r["seq"]),
                serial=int(r["serial"]),
                frames=list(json.loads(r["frames"])),
                close=(int(r["close_code"]), r["close_reason"] or "")
                if r["close_code"] is not None
                else None,
            )
            for r in rows
        ]
        return sorted(taken, key=lambda row: row.seq)

    def drop_for_dead_nodes(self, dead_after_s: float) -> int:
        """Forget rows for nodes that are gone: their sockets went with them."""
        sql = self._sql
        return sql.run(
            "DELETE FROM outbox WHERE NOT EXISTS (SELECT 1 FROM nodes AS n "
            "WHERE n.node_id = outbox.node_id AND n.stopped_at IS NULL "
            f"AND n.heartbeat_at >= {sql.dialect.epoch_now} - :dead)",
            {"dead": dead_after_s},
        )

    def notify(self, channel: str, payload: str) -> None:
        """Wake the listeners of `channel` when this transaction commits (none on SQLite)."""
        if self._sql.dialect.notifies:
            self._sql.one(
                "SELECT pg_notify(:channel, :payload) AS sent",
                {"channel": channel, "payload": payload},
            )


class SqlNodes:
    """The node registry: heartbeats on the database server's clock."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def register(self, node: str) -> None:
        now = self._sql.dialect.epoch_now
        self._sql.run(
            "INSERT INTO nodes (node_id, started_at, heartbeat_at) "
            f"VALUES (:node, {now}, {now}) ON CONFLICT (node_id) DO UPDATE "
            f"SET started_at = {now}, heartbeat_at = {now}, stopped_at = NULL",
            {"node": node},
        )

    def heartbeat(self, node: str) -> float | None:
        """Record that `node` is alive: how old its previous heartbeat was, in seconds on the
        server's clock (what other nodes judged it by), or None when its row is gone or marked
        stopped (nothing is written then: the caller registers again)."""
        sql = self._sql
        now = sql.dialect.epoch_now
        found = sql.one(
            f"SELECT {now} - heartbeat_at AS age FROM nodes "
            "WHERE node_id = :node AND stopped_at IS NULL",
            {"node": node},
        )
        if found is None:
            return None
        sql.run(f"UPDATE nodes SET heartbeat_at = {now} WHERE node_id = :node", {"node": node})
        return float(found["age"])

    def stopped(self, node: str) -> None:
        self._sql.run(
            f"UPDATE nodes SET stopped_at = {self._sql.dialect.epoch_now} WHERE node_id = :node",
            {"node": node},
        )

    def alive(self, dead_after_s: float) -> list[str]:
        sql = self._sql
        rows = sql.rows(
            "SELECT node_id FROM nodes WHERE stopped_at IS NULL "
            f"AND heartbeat_at >= {sql.dialect.epoch_now} - :dead ORDER BY node_id",
            {"dead": dead_after_s},
        )
        return [r["node_id"] for r in rows]

    def forget_stopped(self, older_than_s: float) -> int:
        """Remove rows of nodes stopped (or silent) longer than `older_than_s`."""
        sql = self._sql
        return sql.run(
            f"DELETE FROM nodes WHERE heartbeat_at < {sql.dialect.epoch_now} - :older "
            "AND NOT EXISTS (SELECT 1 FROM actors WHERE actors.sock_node = nodes.node_id)",
            {"older": older_than_s},
        )
