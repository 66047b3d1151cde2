"""The backend's command journal: one row per (session, command id), its state and outcome."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from understudy._commands import CommandState

if TYPE_CHECKING:
    from understudy._store._db import Database, Row

# The states that hold a session's admission slot, from the enum (never a literal list here).
OPEN_STATES: Final = tuple(state.value for state in CommandState if state.open)
_OPEN_MARKS: Final = ", ".join("?" for _ in OPEN_STATES)

_MUTABLE = frozenset(
    {
        "state",
        "attempt",
        "lease_epoch",
        "browser_epoch",
        "admitted_at",
        "ready_deadline",
        "deadline",
        "result",
        "error_code",
        "error_message",
        "completed_at",
        "request",
    }
)


@dataclass(frozen=True)
class CommandRow:
    session_id: str
    command_id: str
    tenant: str
    actor: str
    name: str
    kind: str
    dry_run: bool
    fingerprint: str
    request: dict[str, Any] | None
    state: str
    attempt: int
    lease_epoch: int
    browser_epoch: str | None
    admitted_at: float
    ready_deadline: float | None
    deadline: float
    result: dict[str, Any] | None
    error_code: str | None
    error_message: str | None
    completed_at: float | None


def insert(db: Database, **values: Any) -> None:
    values = {**values, "request": json.dumps(values["request"]), "dry_run": int(values["dry_run"])}
    columns = ", ".join(values)
    marks = ", ".join(f":{k}" for k in values)
    db.execute(f"INSERT INTO commands ({columns}) VALUES ({marks})", values)  # noqa: S608


def update(db: Database, session_id: str, command_id: str, **values: Any) -> None:
    unknown = set(values) - _MUTABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    for key in ("result", "request"):
        if key in values and values[key] is not None:
            values[key] = json.dumps(values[key])
    assignments = ", ".join(f"{k} = :{k}" for k in values)
    db.execute(
        f"UPDATE commands SET {assignments} WHERE session_id = :sid AND command_id = :cid",  # noqa: S608
        {**values, "sid": session_id, "cid": command_id},
    )


def get(db: Database, session_id: str, command_id: str) -> CommandRow | None:
    row = db.one(
        "SELECT * FROM commands WHERE session_id = ? AND command_id = ?", (session_id, command_id)
    )
    return _row(row) if row is not None else None


def open_commands(db: Database, session_id: str) -> list[CommandRow]:
    rows = db.query(
        f"SELECT * FROM commands WHERE session_id = ? AND state IN ({_OPEN_MARKS}) "  # noqa: S608
        "ORDER BY admitted_at",
        (session_id, *OPEN_STATES),
    )
    return [_row(r) for r in rows]


def sessions_with_open_commands(db: Database) -> list[str]:
    rows = db.query(
        f"SELECT DISTINCT session_id FROM commands WHERE state IN ({_OPEN_MARKS})",  # noqa: S608
        OPEN_STATES,
    )
    return [r["session_id"] for r in rows]


def _row(row: Row) -> CommandRow:
    data = dict(row)
    data["dry_run"] = bool(data["dry_run"])
    for key in ("request", "result"):
        data[key] = json.loads(data[key]) if data[key] else None
    return CommandRow(**data)
