"""`Store`: every read and write of the service's durable state, one method each.

The API calls the customer-facing half (keys, personas, runs); the orchestrator calls the rest
(claim, start, record, transition). Each method is one transaction, so a crash between two calls
leaves the state of the last one that returned, never half of one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
import sqlite3
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from synthetic_users._safety._masking import mask_turn, session_masker
from synthetic_users._safety._pii import PiiMasker
from synthetic_users._store._db import Database
from synthetic_users._store._errors import (
    BadCursor,
    IdempotencyConflict,
    IllegalTransition,
    PersonaNotFound,
    RunNotFound,
    SessionNotFound,
    TurnConflict,
)
from synthetic_users._store._migrations import migrate
from synthetic_users._store._records import (
    NewRun,
    Page,
    PersonaRecord,
    ReactionRecord,
    ResumableRun,
    RunRecord,
    SessionProgress,
    SessionRecord,
)
from synthetic_users._store._states import (
    RunState,
    SessionState,
    run_transition,
    session_transition,
)
from synthetic_users.generated import models

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

KEY_PREFIX: Final = "suk_"
# A run's reason belongs to no one persona: international formats and the US ones.
_RUN_MASKER: Final = PiiMasker.for_persona("en-US")
MAX_PAGE: Final = 100


def key_digest(key: str) -> str:
    """The SHA-256 digest (hex) under which an API key is stored; the key itself never is."""
    return hashlib.sha256(key.encode()).hexdigest()


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class Store:
    """The SQLite store. Open it with `Store.open(path)`, which migrates the schema."""

    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock
        self._keys: dict[str, str] = {}  # digest -> customer: the auth hot path
        self._keys_version = -1
        # Called inside the transaction that moves a run (a session) to a terminal state, with
        # the ended record: the webhook outbox and the usage meter write there, so their rows
        # exist exactly when the state change does. A hook that raises rolls the change back.
        self.run_ended_hooks: list[Callable[[RunRecord], object]] = []
        self.session_ended_hooks: list[Callable[[SessionRecord], object]] = []
        self._maskers: dict[tuple[str, str | None], PiiMasker] = {}  # (session, inbox) -> masker

    @classmethod
    def open(
        cls, path: Path | str, *, clock: Callable[[], float] = time.time, **db_options: Any
    ) -> Store:
        """Open (creating when absent) the database file at `path` and migrate it."""
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        db = Database(path, **db_options)
        migrate(db)
        return cls(db, clock=clock)

    def close(self) -> None:
        self.db.close()

    def ping(self) -> None:
        """Raise unless the database answers (for `/healthz`)."""
        self.db.one("SELECT 1")

    # -- customers and API keys ---------------------------------------------------------------

    def create_key(self, customer_id: str) -> str:
        """A new API key for `customer_id` (created when new); returned once, stored as a digest."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        now = self.clock()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO customers (customer_id, created_at) VALUES (?, ?)",
                (customer_id, now),
            )
            conn.execute(
                "INSERT INTO api_keys (digest, key_id, customer_id, created_at) VALUES (?,?,?,?)",
                (key_digest(key), new_id("key"), customer_id, now),
            )
        return key

    def revoke_key(self, key: str) -> bool:
        """Revoke `key`; False when it was unknown or already revoked."""
        changed = self.db.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE digest = ? AND revoked_at IS NULL",
            (self.clock(), key_digest(key)),
        )
        self._keys.clear()
        return changed > 0

    def authenticate(self, key: str) -> str | None:
        """The customer an API key belongs to, or None when it is unknown or revoked.

        Known keys are cached in memory; the cache is dropped whenever another connection (the
        CLI revoking a key in another process) committed, which SQLite tells for free.
        """
        version = self.db.data_version()
        if version != self._keys_version:
            self._keys.clear()
            self._keys_version = version
        digest = key_digest(key)
        customer = self._keys.get(digest)
        if customer is not None:
            return customer
        row = self.db.one(
            "SELECT customer_id FROM api_keys WHERE digest = ? AND revoked_at IS NULL", (digest,)
        )
        if row is None:
            return None
        self._keys[digest] = row["customer_id"]
        return str(row["customer_id"])

    # -- personas -----------------------------------------------------------------------------

    def create_persona(self, customer_id: str, persona: Mapping[str, Any]) -> PersonaRecord:
        """Save a persona (the `Persona` fields, without `persona_id`)."""
        record = PersonaRecord(new_id("per"), customer_id, dict(persona), self.clock())
        with self.db.transaction() as conn:
            self._ensure_customer(conn, customer_id)
            conn.execute(
                "INSERT INTO personas (persona_id, customer_id, body, created_at) "
                "VALUES (?, ?, ?, ?)",
                (record.persona_id, customer_id, _canonical(record.persona), record.created_at),
            )
        return record

    def get_persona(self, customer_id: str, persona_id: str) -> PersonaRecord:
        row = self.db.one(
            "SELECT * FROM personas WHERE persona_id = ? AND customer_id = ?",
            (persona_id, customer_id),
        )
        if row is None:
            raise PersonaNotFound(persona_id)
        return _persona(row)

    def list_personas(
        self, customer_id: str, *, limit: int = 20, cursor: str | None = None
    ) -> Page:
        """Saved personas, newest first."""
        rows = self._page("personas", "persona_id", customer_id, limit, cursor)
        return _paged(rows, limit, "persona_id", _persona)

    def delete_persona(self, customer_id: str, persona_id: str) -> None:
        changed = self.db.execute(
            "DELETE FROM personas WHERE persona_id = ? AND customer_id = ?",
            (persona_id, customer_id),
        )
        if not changed:
            raise PersonaNotFound(persona_id)

    # -- runs ---------------------------------------------------------------------------------

    def create_run(
        self, customer_id: str, new: NewRun, *, idempotency_key: str | None = None
    ) -> tuple[RunRecord, bool]:
        """Write a `queued` run and one `queued` persona session per persona.

        Returns the run and whether it was created now; with an `idempotency_key` the customer
        used before for the same request, the existing run and False.

        Raises:
            IdempotencyConflict: the key was used before for a different request.
        """
        if idempotency_key is not None:
            existing = self._by_idempotency_key(customer_id, idempotency_key, new.request_hash)
            if existing is not None:
                return existing, False
        run_id, now = new_id("run"), self.clock()
        try:
            with self.db.transaction() as conn:
                self._ensure_customer(conn, customer_id)
                conn.execute(
                    "INSERT INTO runs (run_id, customer_id, status, target_url, task, "
                    "turn_budget, model, credential_id, idempotency_key, request_hash, "
                    "created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        run_id,
                        customer_id,
                        RunState.QUEUED,
                        new.target_url,
                        new.task,
                        new.turn_budget,
                        new.model,
                        new.credential_id,
                        idempotency_key,
                        new.request_hash,
                        now,
                    ),
                )
                conn.executemany(
                    "INSERT INTO persona_sessions (session_id, run_id, position, persona, "
                    "status) VALUES (?, ?, ?, ?, ?)",
                    [
                        (new_id("ses"), run_id, i, _canonical(p), SessionState.QUEUED)
                        for i, p in enumerate(new.personas)
                    ],
                )
        except sqlite3.IntegrityError:
            # Another writer (another process on the same file) won the key meanwhile.
            if idempotency_key is None:
                raise
            existing = self._by_idempotency_key(customer_id, idempotency_key, new.request_hash)
            if existing is None:
                raise
            return existing, False
        return self.get_run(run_id), True

    def replay(self, customer_id: str, key: str, request_hash: str) -> RunRecord | None:
        """The run `key` already created for this request, or None when the key is new.

        Raises:
            IdempotencyConflict: the key was used before for a different request.
        """
        return self._by_idempotency_key(customer_id, key, request_hash)

    def count_active_runs(self, customer_id: str) -> int:
        """How many of the customer's runs are `queued` or `running`."""
        row = self.db.one(
            "SELECT COUNT(*) FROM runs WHERE customer_id = ? AND status IN (?, ?)",
            (customer_id, RunState.QUEUED, RunState.RUNNING),
        )
        return int(row[0]) if row else 0

    def _by_idempotency_key(
        self, customer_id: str, key: str, request_hash: str
    ) -> RunRecord | None:
        row = self.db.one(
            "SELECT * FROM runs WHERE customer_id = ? AND idempotency_key = ?", (customer_id, key)
        )
        if row is None:
            return None
        if row["request_hash"] != request_hash:
            raise IdempotencyConflict(row["run_id"])
        return RunRecord.from_row(row)

    def get_run(self, run_id: str, customer_id: str | None = None) -> RunRecord:
        """The run; with `customer_id`, only if it is that customer's.

        Raises:
            RunNotFound: no such run (for that customer).
        """
        row = self.db.one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        if row is None or (customer_id is not None and row["customer_id"] != customer_id):
            raise RunNotFound(run_id)
        return RunRecord.from_row(row)

    def list_runs(self, customer_id: str, *, limit: int = 20, cursor: str | None = None) -> Page:
        """The customer's runs, newest first; items are `(RunRecord, persona_count)`."""
        rows = self._page("runs", "run_id", customer_id, limit, cursor)
        counts = self._persona_counts([row["run_id"] for row in rows])
        return _paged(
            rows, limit, "run_id", lambda row: (RunRecord.from_row(row), counts[row["run_id"]])
        )

    def sessions(self, run_id: str) -> list[SessionRecord]:
        """The run's persona sessions, in the request's order."""
        rows = self.db.query(
            "SELECT * FROM persona_sessions WHERE run_id = ? ORDER BY position", (run_id,)
        )
        return [SessionRecord.from_row(row) for row in rows]

    def get_session(self, session_id: str, run_id: str | None = None) -> SessionRecord:
        """One persona session; with `run_id`, only if it belongs to that run.

        Raises:
            SessionNotFound: no such session (in that run).
        """
        row = self.db.one("SELECT * FROM persona_sessions WHERE session_id = ?", (session_id,))
        if row is None or (run_id is not None and row["run_id"] != run_id):
            raise SessionNotFound(session_id)
        return SessionRecord.from_row(row)

    def cancel_run(self, run_id: str, customer_id: str | None = None) -> tuple[RunRecord, bool]:
        """Cancel a `queued` or `running` run; returns it and whether this call cancelled it.

        The run becomes `cancelled` at once, with its cancel flag set for the orchestrator's
        loops (`is_cancelled`); its `queued` sessions become `cancelled` too. Its `running`
        sessions are left to the orchestrator, which closes their browsers, keeps what they
        wrote and moves them to `cancelled`. A run that already ended is returned unchanged.
        """
        with self.db.transaction() as conn:
            run = self.get_run(run_id, customer_id)
            if run.status.terminal:
                return run, False
            now = self.clock()
            status = run_transition(run.status, RunState.CANCELLED)
            conn.execute(
                "UPDATE runs SET status = ?, cancel_requested = 1, ended_at = ? WHERE run_id = ?",
                (status, now, run_id),
            )
            conn.execute(
                "UPDATE persona_sessions SET status = ?, ended_at = ? "
                "WHERE run_id = ? AND status = ?",
                (SessionState.CANCELLED, now, run_id, SessionState.QUEUED),
            )
            self._ended_run(run_id)
        return self.get_run(run_id), True

    def is_cancelled(self, run_id: str) -> bool:
        """Whether the run was cancelled: the loops check it between turns and stop."""
        row = self.db.one("SELECT cancel_requested FROM runs WHERE run_id = ?", (run_id,))
        if row is None:
            raise RunNotFound(run_id)
        return bool(row["cancel_requested"])

    # -- orchestration ------------------------------------------------------------------------

    def claim_resumable_runs(self) -> list[ResumableRun]:
        """Every `queued` or `running` run, oldest first, with all its sessions.

        Called once at start-up by the orchestrator, which must be the only one working on this
        database: it resumes each of these runs (sessions still `running` lost their browser
        with the previous process; `bump_generation` them before going on).
        """
        rows = self.db.query(
            "SELECT * FROM runs WHERE status IN (?, ?) ORDER BY created_at, run_id",
            (RunState.QUEUED, RunState.RUNNING),
        )
        return [ResumableRun(RunRecord.from_row(row), self.sessions(row["run_id"])) for row in rows]

    def start_session(
        self,
        session_id: str,
        *,
        understudy_session_id: str | None = None,
        device_id: str | None = None,
    ) -> SessionRecord:
        """Mark a session `running` on its Understudy session and device (its run too).

        Also valid on a session already `running` (a resumed one, or a new generation's fresh
        Understudy session): the ids are replaced, `started_at` stays the first start.

        Raises:
            IllegalTransition: the session already ended.
        """
        with self.db.transaction() as conn:
            session = self.get_session(session_id)
            if session.status is not SessionState.RUNNING:
                session_transition(session.status, SessionState.RUNNING)
            now = self.clock()
            conn.execute(
                "UPDATE persona_sessions SET status = ?, understudy_session_id = ?, "
                "device_id = ?, started_at = COALESCE(started_at, ?) WHERE session_id = ?",
                (SessionState.RUNNING, understudy_session_id, device_id, now, session_id),
            )
            run = self.get_run(session.run_id)
            if run.status is RunState.QUEUED:
                self.set_run_state(run.run_id, RunState.RUNNING)
        return self.get_session(session_id)

    def set_session_state(
        self, session_id: str, status: SessionState | str, reason: str | None = None
    ) -> SessionRecord:
        """Move a session along its lifecycle (`_states.py`); a terminal state stamps `ended_at`.

        `reason` is kept as the session's `failure_reason` (why it failed or stopped early).

        Raises:
            IllegalTransition: the move is not allowed from the session's current state.
        """
        with self.db.transaction() as conn:
            session = self.get_session(session_id)
            if reason is not None:
                reason = self._masker(session).mask(reason)  # a finish summary, an error text
            target = session_transition(session.status, status)
            conn.execute(
                "UPDATE persona_sessions SET status = ?, "
                "failure_reason = COALESCE(?, failure_reason), "
                "ended_at = CASE WHEN ? THEN ? ELSE ended_at END WHERE session_id = ?",
                (target, reason, target.terminal, self.clock(), session_id),
            )
            if target.terminal:
                ended = self.get_session(session_id)
                for hook in self.session_ended_hooks:
                    hook(ended)
        return self.get_session(session_id)

    def set_run_state(
        self, run_id: str, status: RunState | str, reason: str | None = None
    ) -> RunRecord:
        """Move a run along its lifecycle; a terminal state stamps `ended_at`.

        Raises:
            IllegalTransition: the move is not allowed from the run's current state.
        """
        if reason is not None:
            reason = _RUN_MASKER.mask(reason)  # error texts can quote a page
        with self.db.transaction() as conn:
            run = self.get_run(run_id)
            target = run_transition(run.status, status)
            now = self.clock()
            conn.execute(
                "UPDATE runs SET status = ?, failure_reason = COALESCE(?, failure_reason), "
                "started_at = CASE WHEN ? THEN COALESCE(started_at, ?) ELSE started_at END, "
                "ended_at = CASE WHEN ? THEN ? ELSE ended_at END WHERE run_id = ?",
                (
                    target,
                    reason,
                    target is RunState.RUNNING,
                    now,
                    target.terminal,
                    now,
                    run_id,
                ),
            )
            if target.terminal:
                self._ended_run(run_id)
        return self.get_run(run_id)

    def _ended_run(self, run_id: str) -> None:
        ended = self.get_run(run_id)
        for hook in self.run_ended_hooks:
            hook(ended)

    def bump_generation(self, session_id: str) -> int:
        """Start the session's next browser generation; returns its number.

        The Understudy session and device of the crashed generation are forgotten until
        `start_session` records the new ones; reactions and turns of every generation stay.

        Raises:
            IllegalTransition: the session is not `running`.
        """
        with self.db.transaction() as conn:
            session = self.get_session(session_id)
            if session.status is not SessionState.RUNNING:
                raise IllegalTransition("persona session", session.status, "a new generation")
            conn.execute(
                "UPDATE persona_sessions SET generation = generation + 1, "
                "understudy_session_id = NULL, device_id = NULL WHERE session_id = ?",
                (session_id,),
            )
        return self.get_session(session_id).generation

    def record_turn(self, session_id: str, turn: Mapping[str, Any] | models.Turn) -> bool:
        """Persist one turn (the spec's `Turn`) and the reactions in it, before the next turn.

        Idempotent on (session, turn number): recording the same turn again is a no-op that
        returns False. Its reactions are recorded as by `record_reaction` (once each).

        Raises:
            pydantic.ValidationError: `turn` is not a valid `Turn`.
            TurnConflict: that turn number was recorded before with another body.
            SessionNotFound: no such session.
        """
        parsed = turn if isinstance(turn, models.Turn) else models.Turn.model_validate(turn)
        session = self.get_session(session_id)
        # The PII choke point for turns: what is stored (and so every transcript and report built
        # from it) has emails and phone numbers masked (`_safety/_masking.py`).
        parsed = models.Turn.model_validate(mask_turn(self._masker(session), parsed.to_wire()))
        body = _canonical(parsed.to_wire())
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT body FROM turns WHERE session_id = ? AND turn = ?",
                (session_id, parsed.turn),
            ).fetchone()
            if row is not None:
                if row["body"] != body:
                    raise TurnConflict(
                        f"turn {parsed.turn} of {session_id} was recorded with another body"
                    )
                return False
            conn.execute(
                "INSERT INTO turns (session_id, turn, generation, body, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (session_id, parsed.turn, parsed.generation, body, self.clock()),
            )
            conn.execute(
                "UPDATE persona_sessions SET turn = MAX(turn, ?) WHERE session_id = ?",
                (parsed.turn, session_id),
            )
            for reaction in parsed.reactions:
                self._insert_reaction(
                    conn,
                    session,
                    generation=reaction.generation,
                    step=reaction.step,
                    sentiment=reaction.sentiment,
                    note=reaction.note,
                    url=reaction.url,
                    ref=reaction.ref,
                    screenshot=reaction.screenshot,
                    created_at=reaction.created_at.timestamp(),
                    kind=reaction.kind,
                    element=reaction.element,
                )
        return True

    def record_reaction(
        self,
        session_id: str,
        *,
        generation: int,
        step: int,
        sentiment: str,
        note: str,
        url: str,
        ref: str | None = None,
        screenshot: str | None = None,
        created_at: float | None = None,
        kind: str | None = None,
        element: str | None = None,
    ) -> bool:
        """Record a reaction as it happens (live progress); False when already recorded.

        One reaction is (session, generation, step, sentiment, note): the same one recorded
        again, live and then inside its turn, is kept once.

        Raises:
            pydantic.ValidationError: the fields do not make a valid `Reaction`.
            SessionNotFound: no such session.
        """
        created_at = self.clock() if created_at is None else created_at
        masker = self._masker(self.get_session(session_id))
        note, url = masker.mask(note), masker.mask(url)
        element = masker.mask(element) if element is not None else None
        models.Reaction.model_validate(
            {
                "step": step,
                "generation": generation,
                "sentiment": sentiment,
                "note": note,
                "url": url,
                "ref": ref,
                "screenshot": screenshot,
                "created_at": created_at,
                "kind": kind,
                "element": element,
            }
        )
        with self.db.transaction() as conn:
            session = self.get_session(session_id)
            return self._insert_reaction(
                conn,
                session,
                generation=generation,
                step=step,
                sentiment=sentiment,
                note=note,
                url=url,
                ref=ref,
                screenshot=screenshot,
                created_at=created_at,
                kind=kind,
                element=element,
            )

    def _insert_reaction(
        self, conn: sqlite3.Connection, session: SessionRecord, **fields: Any
    ) -> bool:
        cursor = conn.execute(
            "INSERT OR IGNORE INTO reactions (session_id, run_id, generation, step, sentiment, "
            "note, url, ref, screenshot, created_at, kind, element) VALUES (:session_id, "
            ":run_id, :generation, :step, :sentiment, :note, :url, :ref, :screenshot, "
            ":created_at, :kind, :element)",
            {"session_id": session.session_id, "run_id": session.run_id, **fields},
        )
        return cursor.rowcount > 0

    def turns(self, session_id: str, *, generation: int | None = None) -> list[dict[str, Any]]:
        """The session's recorded turns (the spec's `Turn`, as JSON), oldest first."""
        sql = "SELECT body FROM turns WHERE session_id = ?"
        params: tuple[Any, ...] = (session_id,)
        if generation is not None:
            sql, params = sql + " AND generation = ?", (*params, generation)
        rows = self.db.query(sql + " ORDER BY turn", params)
        return [json.loads(row["body"]) for row in rows]

    def reactions(
        self, *, run_id: str | None = None, session_id: str | None = None
    ) -> list[ReactionRecord]:
        """Every reaction of a run or of one session, of every generation, oldest first."""
        if (run_id is None) == (session_id is None):
            raise TypeError("pass exactly one of run_id and session_id")
        column, value = ("run_id", run_id) if run_id is not None else ("session_id", session_id)
        rows = self.db.query(
            f"SELECT * FROM reactions WHERE {column} = ? ORDER BY reaction_id",  # noqa: S608
            (value,),
        )
        return [ReactionRecord.from_row(row) for row in rows]

    def session_progress(self, run_id: str) -> list[SessionProgress]:
        """Turn, generation and reaction count of each session of the run, in request order."""
        rows = self.db.query(
            "SELECT s.*, (SELECT COUNT(*) FROM reactions r WHERE r.session_id = s.session_id) "
            "AS reaction_count FROM persona_sessions s WHERE s.run_id = ? ORDER BY s.position",
            (run_id,),
        )
        return [
            SessionProgress(
                session_id=row["session_id"],
                persona_name=str(json.loads(row["persona"])["name"]),
                status=SessionState(row["status"]),
                turn=row["turn"],
                generation=row["generation"],
                reactions=row["reaction_count"],
            )
            for row in rows
        ]

    # -- helpers ------------------------------------------------------------------------------

    def _masker(self, session: SessionRecord) -> PiiMasker:
        # Keyed by the inbox address too: the inbox assigns it when the session first starts.
        key = (session.session_id, session.inbox_address)
        masker = self._maskers.get(key)
        if masker is None:
            own = [session.inbox_address] if session.inbox_address else []
            masker = self._maskers[key] = session_masker(session.persona, own)
        return masker

    def _ensure_customer(self, conn: sqlite3.Connection, customer_id: str) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO customers (customer_id, created_at) VALUES (?, ?)",
            (customer_id, self.clock()),
        )

    def _persona_counts(self, run_ids: list[str]) -> dict[str, int]:
        if not run_ids:
            return {}
        marks = ",".join("?" * len(run_ids))
        rows = self.db.query(
            f"SELECT run_id, COUNT(*) AS n FROM persona_sessions WHERE run_id IN ({marks}) "  # noqa: S608
            "GROUP BY run_id",
            tuple(run_ids),
        )
        return {row["run_id"]: row["n"] for row in rows}

    def _page(
        self, table: str, id_column: str, customer_id: str, limit: int, cursor: str | None
    ) -> list[sqlite3.Row]:
        limit = max(1, min(limit, MAX_PAGE))
        sql = f"SELECT * FROM {table} WHERE customer_id = ?"  # noqa: S608 (fixed names)
        params: tuple[Any, ...] = (customer_id,)
        if cursor is not None:
            created_at, last_id = _decode_cursor(cursor)
            sql += f" AND (created_at < ? OR (created_at = ? AND {id_column} < ?))"
            params = (*params, created_at, created_at, last_id)
        sql += f" ORDER BY created_at DESC, {id_column} DESC LIMIT ?"
        return self.db.query(sql, (*params, limit + 1))


def _paged(
    rows: list[sqlite3.Row], limit: int, id_column: str, convert: Callable[[sqlite3.Row], Any]
) -> Page:
    limit = max(1, min(limit, MAX_PAGE))
    more = len(rows) > limit
    rows = rows[:limit]
    cursor = _encode_cursor(rows[-1]["created_at"], rows[-1][id_column]) if more else None
    return Page([convert(row) for row in rows], cursor)


def _encode_cursor(created_at: float, last_id: str) -> str:
    raw = json.dumps([created_at, last_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, last_id = json.loads(raw)
    except (ValueError, TypeError, binascii.Error):
        raise BadCursor("not a cursor this service wrote; pass next_cursor as it came") from None
    if not isinstance(created_at, int | float) or not isinstance(last_id, str):
        raise BadCursor("not a cursor this service wrote; pass next_cursor as it came")
    return float(created_at), last_id


def _persona(row: sqlite3.Row) -> PersonaRecord:
    return PersonaRecord(
        row["persona_id"], row["customer_id"], json.loads(row["body"]), row["created_at"]
    )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
