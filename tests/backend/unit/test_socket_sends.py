"""A socket frame leaves once what it depends on is durable, and no later than that."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, cast

from understudy._store._db import Database
from understudy.http._sockets import _WsConnection

if TYPE_CHECKING:
    from pathlib import Path


class _Frame:
    def __init__(self, text: str) -> None:
        self.text = text

    def to_wire_json(self) -> str:
        return self.text


class _Socket:
    """Records what was sent, with what another process saw on disk at that moment."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.sent: list[tuple[str, int]] = []

    async def send_text(self, text: str) -> None:
        other = sqlite3.connect(self.db.path)
        try:
            (rows,) = other.execute("SELECT count(*) FROM t").fetchone()
        finally:
            other.close()
        self.sent.append((text, rows))


async def test_a_committed_turns_frame_does_not_wait_for_a_group_opened_since(
    tmp_path: Path,
) -> None:
    db = Database(tmp_path / "s.db")
    db.execute("CREATE TABLE t (n INTEGER)")
    socket = _Socket(db)
    conn = _WsConnection(cast("Any", socket), db)
    with db.transaction():  # another actor's turn, after the sender's own commit
        db.execute("INSERT INTO t VALUES (1)")
    await conn.send(_Frame("own"), committed=True)
    assert socket.sent == [("own", 0)]  # at once: the other group is not durable yet
    await conn.send(_Frame("other"))  # not a committed turn's: waits for every turn so far
    assert socket.sent == [("own", 0), ("other", 1)]
    db.close()
