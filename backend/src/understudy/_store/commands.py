"""The backend's command journal: one row per (session, command id), its state and outcome."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from understudy._commands import CommandState
from understudy._store._sql import RowBuilder

if TYPE_CHECKING:
    from understudy._store._sql import Executor

# The states that hold a session's admission slot, from the enum (never a literal list here).
OPEN_STATES: Final = tuple(state.value for state in CommandState if state.open)
# Only the enum's own values are interpolated into SQL; every caller value is a bound parameter.
_OPEN_SQL: Final = ", ".join(f"'{state}'" for state in OPEN_STATES)


# Two index lookups (an OR of both conditions would make SQLite scan every command the session
# ever had): the command id's row, and the open commands other than it.
_ADMISSION: Final = (
    "SELECT * FROM commands WHERE session_id = :sid AND command_id = :cid "  # noqa: S608
    "UNION ALL SELECT * FROM commands WHERE session_id = :sid "
    f"AND state IN ({_OPEN_SQL}) AND command_id <> :cid ORDER BY admitted_at, command_id"
)
_PREPARING: Final = CommandState.PREPARING.value
_NEXT_DUE: Final = f"""
    SELECT MIN(CASE
        WHEN c.lease_epoch < COALESCE(s.lease_epoch, 0) THEN c.admitted_at
        WHEN c.state = '{_PREPARING}' AND c.ready_deadline IS NOT NULL THEN c.ready_deadline
        ELSE c.deadline END) AS due
      FROM commands AS c LEFT JOIN sessions AS s ON s.session_id = c.session_id
     WHERE c.session_id = :sid AND c.state IN ({_OPEN_SQL})
"""  # noqa: S608


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


_build: Final = RowBuilder(CommandRow)


def _row(data: dict[str, Any]) -> CommandRow:
    # The executor's dict is fresh for each row, so it is decoded in place.
    data["dry_run"] = bool(data["dry_run"])
    for key in ("request", "result"):
        data[key] = json.loads(data[key]) if data[key] else None
    return _build(data)


@dataclass(frozen=True)
class NewCommand:
    """A journal row as admitted (attempt 1, no outcome yet)."""

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
    lease_epoch: int
    browser_epoch: str | None
    admitted_at: float
    ready_deadline: float | None
    deadline: float


@dataclass(frozen=True)
class GrantCondition:
    """When a grant applies: the row is in `state` under `lease_epoch`, its session is of that
    lease epoch too, and it is not a `unless_name` command (one that needs more than its row
    before it is granted)."""

    state: str
    lease_epoch: int
    unless_name: str


@dataclass(frozen=True)
class CommandOutcome:
    """What the extension reported for a command: a result, or an error's code and message."""

    result: dict[str, Any] | None = None
    error_code: str | None = None
    error_message: str | None = None


class SqlCommands:
    """`understudy._store._ports.CommandRepository` in portable SQL.

    Changes return the row as it is afterwards (`RETURNING`), or None when there is none. The
    open-state queries take their state list from the enum (`OPEN_STATES`).
    """

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def insert(self, new: NewCommand) -> CommandRow:
        """Journal a new command and return its row. Raises `ConflictError` when (session,
        command id) exists."""
        # Shallow: `asdict` would deep-copy the request only for it to be serialised here.
        values = dict(vars(new))
        values["request"] = json.dumps(new.request)
        values["dry_run"] = int(new.dry_run)
        columns = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        row = self._sql.one(
            f"INSERT INTO commands ({columns}) VALUES ({marks}) RETURNING *",  # noqa: S608
            values,
        )
        assert row is not None  # noqa: S101 - an INSERT that did not raise returns its row
        return _row(row)

    def get(self, session_id: str, command_id: str) -> CommandRow | None:
        row = self._sql.one(
            "SELECT * FROM commands WHERE session_id = :sid AND command_id = :cid",
            {"sid": session_id, "cid": command_id},
        )
        return _row(row) if row is not None else None

    def open_commands(self, session_id: str) -> list[CommandRow]:
        """The session's commands not yet settled, oldest admission first."""
        rows = self._sql.rows(
            f"SELECT * FROM commands WHERE session_id = :sid AND state IN ({_OPEN_SQL}) "  # noqa: S608
            "ORDER BY admitted_at, command_id",
            {"sid": session_id},
        )
        return [_row(r) for r in rows]

    def admission(
        self, session_id: str, command_id: str
    ) -> tuple[CommandRow | None, list[CommandRow]]:
        """What admitting `command_id` decides on, in one statement: its earlier admission (or
        None), and the session's open commands other than it, oldest admission first."""
        rows = self._sql.rows(
            _ADMISSION,
            {"sid": session_id, "cid": command_id},
        )
        prior = None
        others = []
        for data in rows:
            row = _row(data)
            if row.command_id == command_id:
                prior = row
            else:
                others.append(row)
        return prior, others

    def next_due(self, session_id: str) -> float | None:
        """The earliest moment an open command of the session is due (None: none is open).

        A command admitted under an older lease epoch than its session's is due at its admission
        (at once); a preparing write at its ready deadline; any other at its deadline.
        """
        row = self._sql.one(_NEXT_DUE, {"sid": session_id})
        due = None if row is None else row["due"]
        return None if due is None else float(due)

    def sessions_with_open_commands(self) -> list[str]:
        rows = self._sql.rows(
            f"SELECT DISTINCT session_id FROM commands WHERE state IN ({_OPEN_SQL}) "  # noqa: S608
            "ORDER BY session_id"
        )
        return [r["session_id"] for r in rows]

    def _change(
        self,
        session_id: str,
        command_id: str,
        assignments: str,
        condition: str = "",
        **params: Any,
    ) -> CommandRow | None:
        row = self._sql.one(
            f"UPDATE commands SET {assignments} "  # noqa: S608
            f"WHERE session_id = :sid AND command_id = :cid{condition} RETURNING *",
            {**params, "sid": session_id, "cid": command_id},
        )
        return _row(row) if row is not None else None

    def readmit(
        self,
        session_id: str,
        command_id: str,
        *,
        state: str,
        attempt: int,
        lease_epoch: int,
        browser_epoch: str | None,
        request: dict[str, Any] | None,
        admitted_at: float,
        ready_deadline: float | None,
        deadline: float,
    ) -> CommandRow | None:
        """A retry of a command that never ran: a new attempt, its errors and end cleared."""
        return self._change(
            session_id,
            command_id,
            "state = :state, attempt = :attempt, lease_epoch = :lease_epoch, "
            "browser_epoch = :epoch, request = :request, admitted_at = :admitted, "
            "ready_deadline = :ready, deadline = :deadline, error_code = NULL, "
            "error_message = NULL, completed_at = NULL",
            state=state,
            attempt=attempt,
            lease_epoch=lease_epoch,
            epoch=browser_epoch,
            request=json.dumps(request) if request is not None else None,
            admitted=admitted_at,
            ready=ready_deadline,
            deadline=deadline,
        )

    def grant(
        self,
        session_id: str,
        command_id: str,
        *,
        state: str,
        when: GrantCondition | None = None,
    ) -> CommandRow | None:
        """The write is granted: its ready deadline is over. With `when`, only if the row is
        as it says (None otherwise, and nothing changes)."""
        condition, params = "", {}
        if when is not None:
            # The session still of that lease epoch too (one statement): a granted row then says
            # exactly when the session's timer is due, without asking again.
            condition = (
                " AND state = :from_state AND lease_epoch = :epoch AND name <> :unless_name"
                " AND lease_epoch = (SELECT sessions.lease_epoch FROM sessions"
                " WHERE sessions.session_id = :sid)"
            )
            params = {
                "from_state": when.state,
                "epoch": when.lease_epoch,
                "unless_name": when.unless_name,
            }
        return self._change(
            session_id,
            command_id,
            "state = :state, ready_deadline = NULL",
            condition,
            state=state,
            **params,
        )

    def settle(
        self,
        session_id: str,
        command_id: str,
        *,
        state: str,
        completed_at: float,
        outcome: CommandOutcome | None = None,
        from_state: str | None = None,
    ) -> CommandRow | None:
        """Persist a terminal state. With the extension's `outcome`, its columns are stored and
        the request's arguments dropped (they are not kept once the outcome is). With
        `from_state`, only a row in that state changes (None otherwise)."""
        condition = " AND state = :from_state" if from_state is not None else ""
        if outcome is None:
            return self._change(
                session_id,
                command_id,
                "state = :state, completed_at = :done, ready_deadline = NULL",
                condition,
                state=state,
                done=completed_at,
                from_state=from_state,
            )
        return self._change(
            session_id,
            command_id,
            "state = :state, completed_at = :done, ready_deadline = NULL, result = :result, "
            "error_code = :code, error_message = :message, request = NULL",
            condition,
            from_state=from_state,
            state=state,
            done=completed_at,
            result=json.dumps(outcome.result) if outcome.result is not None else None,
            code=outcome.error_code,
            message=outcome.error_message,
        )
