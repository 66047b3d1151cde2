"""The store: migrations, lifecycles, idempotent writes, and data that survives reopening."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from pydantic import ValidationError

from synthetic_users._store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    BadCursor,
    Database,
    IdempotencyConflict,
    IllegalTransition,
    NewRun,
    PersonaNotFound,
    RunNotFound,
    RunState,
    SchemaTooNewError,
    SessionNotFound,
    SessionState,
    Store,
    TurnConflict,
    key_digest,
    migrate,
    run_transition,
    schema_version,
    session_transition,
)
from synthetic_users._store._migrations import _statements

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PERSONA = {
    "name": "Margaret",
    "background": "",
    "goals": [],
    "digital_literacy": "low",
    "patience": "medium",
    "device": "desktop",
    "locale": "en-GB",
}


class Clock:
    def __init__(self) -> None:
        self.now = 1_780_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "su.db", clock=Clock())
    yield s
    s.close()


def new_run(personas: int = 2, request_hash: str = "h1") -> NewRun:
    return NewRun(
        target_url="https://shop.example/",
        task="Buy a kettle",
        turn_budget=30,
        model="heuristic",
        personas=[{**PERSONA, "name": f"P{i}"} for i in range(personas)],
        request_hash=request_hash,
    )


def turn(
    n: int, generation: int = 1, reactions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "turn": n,
        "generation": generation,
        "started_at": "2026-12-01T09:00:00Z",
        "ended_at": "2026-12-01T09:00:01Z",
        "observation": {"url": "https://shop.example/", "title": "Shop"},
        "action": {"name": "click", "arguments": {"ref": "g1e3", "ease": 6}},
        "outcome": {"ok": True, "summary": "clicked", "elapsed_ms": 12.0},
        "reactions": reactions or [],
    }


def reaction(step: int, note: str = "No label here", generation: int = 1) -> dict[str, Any]:
    return {
        "step": step,
        "generation": generation,
        "sentiment": "confused",
        "note": note,
        "url": "https://shop.example/checkout",
        "ref": "g1e9",
        "kind": "unlabeled_control",
        "element": "an unnamed textbox",
        "screenshot": f"step-{step:04d}.png",
        "created_at": "2026-12-01T09:00:01Z",
    }


# -- migrations --------------------------------------------------------------------------------


def test_migrations_create_every_table_on_an_empty_database(tmp_path: Path) -> None:
    db = Database(tmp_path / "empty.db")
    assert schema_version(db) == 0
    assert migrate(db) == [version for version, _, _ in MIGRATIONS]
    tables = {r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"customers", "api_keys", "personas", "runs", "persona_sessions"} <= tables
    assert {"turns", "reactions"} <= tables
    assert db.one("PRAGMA journal_mode")[0] == "wal"  # type: ignore[index]


def test_migrating_again_changes_nothing(tmp_path: Path) -> None:
    db = Database(tmp_path / "again.db")
    migrate(db)
    assert migrate(db) == []
    assert schema_version(db) == SCHEMA_VERSION


def test_a_database_of_the_first_release_keeps_its_rows_and_gains_reaction_kinds(
    tmp_path: Path,
) -> None:
    db = Database(tmp_path / "v1.db")
    first_only = MIGRATIONS[:1]
    for statement in _statements(first_only[0][2]):
        db.execute(statement)
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO customers VALUES ('acme', 1.0)")
    assert migrate(db) == [v for v, _, _ in MIGRATIONS[1:]]
    assert db.one("SELECT customer_id FROM customers")[0] == "acme"  # type: ignore[index]
    columns = {r["name"] for r in db.query("PRAGMA table_info(reactions)")}
    assert {"kind", "element"} <= columns


def test_a_database_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    db = Database(tmp_path / "newer.db")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(SchemaTooNewError, match="upgrade synthetic-users"):
        migrate(db)


# -- keys --------------------------------------------------------------------------------------


def test_a_key_is_stored_only_as_its_digest_and_authenticates_its_customer(store: Store) -> None:
    key = store.create_key("acme")
    assert key.startswith("suk_")
    rows = store.db.query("SELECT * FROM api_keys")
    assert [r["digest"] for r in rows] == [key_digest(key)]
    assert all(key not in str(tuple(r)) for r in rows)
    assert store.authenticate(key) == "acme"
    assert store.authenticate(key) == "acme"  # from the cache
    assert store.authenticate("suk_nope") is None


def test_a_key_revoked_by_another_process_stops_working_at_once(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    service = Store.open(path)
    key = service.create_key("acme")
    assert service.authenticate(key) == "acme"  # now cached
    cli = Store.open(path)
    assert cli.revoke_key(key)
    cli.close()
    assert service.authenticate(key) is None
    service.close()


# -- state machines ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "target"),
    [
        ("completed", "running"),
        ("failed", "completed"),
        ("cancelled", "queued"),
        ("running", "queued"),
        ("queued", "completed"),
        ("queued", "queued"),
    ],
)
def test_the_session_lifecycle_refuses_moves_it_does_not_draw(current: str, target: str) -> None:
    with pytest.raises(IllegalTransition, match=f"from {current} to {target}"):
        session_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [("completed", "cancelled"), ("cancelled", "running"), ("queued", "completed")],
)
def test_the_run_lifecycle_refuses_moves_it_does_not_draw(current: str, target: str) -> None:
    with pytest.raises(IllegalTransition):
        run_transition(current, target)


def test_the_lifecycles_allow_the_moves_they_draw() -> None:
    assert session_transition("queued", "running") is SessionState.RUNNING
    assert session_transition("running", "completed") is SessionState.COMPLETED
    assert session_transition("queued", "cancelled") is SessionState.CANCELLED
    assert run_transition("running", "completed") is RunState.COMPLETED
    with pytest.raises(ValueError, match="paused"):
        session_transition("running", "paused")


def test_a_finished_session_cannot_be_restarted_through_the_store(store: Store) -> None:
    run, _ = store.create_run("acme", new_run(1))
    session = store.sessions(run.run_id)[0]
    store.start_session(session.session_id, understudy_session_id="u1", device_id="d1")
    done = store.set_session_state(session.session_id, "completed")
    assert done.status is SessionState.COMPLETED and done.ended_at is not None
    with pytest.raises(IllegalTransition):
        store.set_session_state(session.session_id, SessionState.RUNNING)
    with pytest.raises(IllegalTransition):
        store.start_session(session.session_id)
    with pytest.raises(IllegalTransition):
        store.bump_generation(session.session_id)


def test_starting_the_first_session_starts_the_run(store: Store) -> None:
    run, _ = store.create_run("acme", new_run(2))
    assert run.status is RunState.QUEUED
    first = store.sessions(run.run_id)[0]
    started = store.start_session(first.session_id, understudy_session_id="u1", device_id="d1")
    assert started.status is SessionState.RUNNING
    assert (started.understudy_session_id, started.device_id) == ("u1", "d1")
    again = store.get_run(run.run_id)
    assert again.status is RunState.RUNNING and again.started_at is not None


def test_a_failure_reason_is_kept(store: Store) -> None:
    run, _ = store.create_run("acme", new_run(1))
    sid = store.sessions(run.run_id)[0].session_id
    store.start_session(sid)
    failed = store.set_session_state(sid, "failed", reason="browser crashed 3 times")
    assert failed.failure_reason == "browser crashed 3 times"


# -- runs --------------------------------------------------------------------------------------


def test_the_same_idempotency_key_and_request_give_the_same_run(store: Store) -> None:
    first, created = store.create_run("acme", new_run(), idempotency_key="k1")
    again, created_again = store.create_run("acme", new_run(), idempotency_key="k1")
    assert created and not created_again
    assert again.run_id == first.run_id
    assert store.db.one("SELECT COUNT(*) FROM runs")[0] == 1  # type: ignore[index]


def test_the_same_idempotency_key_with_another_request_conflicts(store: Store) -> None:
    first, _ = store.create_run("acme", new_run(), idempotency_key="k1")
    with pytest.raises(IdempotencyConflict) as info:
        store.create_run("acme", new_run(request_hash="h2"), idempotency_key="k1")
    assert info.value.run_id == first.run_id


def test_idempotency_keys_are_scoped_to_the_customer(store: Store) -> None:
    a, _ = store.create_run("acme", new_run(), idempotency_key="k1")
    b, created = store.create_run("globex", new_run(request_hash="h2"), idempotency_key="k1")
    assert created and a.run_id != b.run_id
    with pytest.raises(RunNotFound):
        store.get_run(a.run_id, "globex")


def test_runs_are_listed_newest_first_across_pages(store: Store) -> None:
    ids = [store.create_run("acme", new_run(1))[0].run_id for _ in range(5)]
    store.create_run("globex", new_run(1))
    first = store.list_runs("acme", limit=2)
    assert [r.run_id for r, _ in first.items] == ids[::-1][:2]
    assert first.next_cursor is not None
    second = store.list_runs("acme", limit=2, cursor=first.next_cursor)
    third = store.list_runs("acme", limit=2, cursor=second.next_cursor)
    seen = [r.run_id for page in (first, second, third) for r, _ in page.items]
    assert seen == ids[::-1]
    assert third.next_cursor is None
    assert first.items[0][1] == 1  # persona count


def test_a_cursor_this_store_did_not_write_is_refused(store: Store) -> None:
    with pytest.raises(BadCursor):
        store.list_runs("acme", cursor="not-a-cursor")


def test_cancelling_cancels_queued_sessions_and_sets_the_flag(store: Store) -> None:
    run, _ = store.create_run("acme", new_run(2))
    running, queued = store.sessions(run.run_id)
    store.start_session(running.session_id)
    assert not store.is_cancelled(run.run_id)
    cancelled, changed = store.cancel_run(run.run_id, "acme")
    assert changed and cancelled.status is RunState.CANCELLED
    assert store.is_cancelled(run.run_id)
    by_id = {s.session_id: s.status for s in store.sessions(run.run_id)}
    assert by_id[queued.session_id] is SessionState.CANCELLED
    assert by_id[running.session_id] is SessionState.RUNNING  # the orchestrator closes it
    store.set_session_state(running.session_id, "cancelled")
    again, changed_again = store.cancel_run(run.run_id, "acme")
    assert not changed_again and again.status is RunState.CANCELLED


def test_resumable_runs_are_the_queued_and_running_ones_with_their_sessions(store: Store) -> None:
    queued, _ = store.create_run("acme", new_run(1))
    running, _ = store.create_run("acme", new_run(2))
    done, _ = store.create_run("acme", new_run(1))
    store.start_session(store.sessions(running.run_id)[0].session_id)
    store.start_session(store.sessions(done.run_id)[0].session_id)
    store.set_session_state(store.sessions(done.run_id)[0].session_id, "completed")
    store.set_run_state(done.run_id, "completed")
    resumable = store.claim_resumable_runs()
    assert [r.run.run_id for r in resumable] == [queued.run_id, running.run_id]
    assert [len(r.sessions) for r in resumable] == [1, 2]


# -- turns and reactions -----------------------------------------------------------------------


def test_recording_a_turn_twice_is_a_no_op(store: Store) -> None:
    run, _ = store.create_run("acme", new_run(1))
    sid = store.sessions(run.run_id)[0].session_id
    assert store.record_turn(sid, turn(1, reactions=[reaction(1)]))
    assert not store.record_turn(sid, turn(1, reactions=[reaction(1)]))
    assert len(store.turns(sid)) == 1
    [kept] = store.reactions(session_id=sid)
    # Every field of the turn's reaction is kept, kind and element included.
    assert {**kept.to_wire(), "created_at": "-"} == {**reaction(1), "created_at": "-"}
    assert kept.to_wire()["created_at"] == "2026-12-01T09:00:01.000Z"
    assert store.get_session(sid).turn == 1


def test_a_turn_number_recorded_with_another_body_conflicts(store: Store) -> None:
    run, _ = store.create_run("acme", new_run(1))
    sid = store.sessions(run.run_id)[0].session_id
    store.record_turn(sid, turn(1))
    other = turn(1)
    other["outcome"]["summary"] = "something else"
    with pytest.raises(TurnConflict):
        store.record_turn(sid, other)


def test_an_invalid_turn_is_refused_before_it_is_stored(store: Store) -> None:
    run, _ = store.create_run("acme", new_run(1))
    sid = store.sessions(run.run_id)[0].session_id
    bad = turn(1)
    bad["action"] = {"name": "click", "arguments": {"ref": "g1e3"}}  # no ease
    with pytest.raises(ValidationError):
        store.record_turn(sid, bad)
    assert store.turns(sid) == []


def test_a_live_reaction_recorded_again_in_its_turn_is_kept_once(store: Store) -> None:
    run, _ = store.create_run("acme", new_run(1))
    sid = store.sessions(run.run_id)[0].session_id
    r = reaction(3)
    assert store.record_reaction(
        sid,
        generation=1,
        step=3,
        sentiment="confused",
        note=r["note"],
        url=r["url"],
        screenshot=r["screenshot"],
    )
    store.record_turn(sid, turn(3, reactions=[r]))
    assert [x.step for x in store.reactions(run_id=run.run_id)] == [3]
    with pytest.raises(ValidationError):
        store.record_reaction(sid, generation=1, step=4, sentiment="meh", note="x", url="u")
    with pytest.raises(SessionNotFound):
        store.record_reaction("ses_x", generation=1, step=1, sentiment="angry", note="x", url="u")


def test_reactions_of_every_generation_survive_a_new_generation(store: Store) -> None:
    run, _ = store.create_run("acme", new_run(1))
    sid = store.sessions(run.run_id)[0].session_id
    store.start_session(sid, understudy_session_id="u1", device_id="d1")
    store.record_turn(sid, turn(1, reactions=[reaction(1)]))
    assert store.bump_generation(sid) == 2
    session = store.get_session(sid)
    assert (session.understudy_session_id, session.device_id) == (None, None)
    store.start_session(sid, understudy_session_id="u2", device_id="d2")
    store.record_turn(sid, turn(2, generation=2, reactions=[reaction(2, generation=2)]))
    assert [(r.generation, r.step) for r in store.reactions(session_id=sid)] == [(1, 1), (2, 2)]
    assert [t["turn"] for t in store.turns(sid, generation=2)] == [2]
    progress = store.session_progress(run.run_id)
    assert (progress[0].generation, progress[0].turn, progress[0].reactions) == (2, 2, 2)


def test_everything_survives_closing_and_reopening(tmp_path: Path) -> None:
    path = tmp_path / "durable.db"
    first = Store.open(path)
    key = first.create_key("acme")
    persona = first.create_persona("acme", PERSONA)
    run, _ = first.create_run("acme", new_run(1), idempotency_key="k")
    sid = first.sessions(run.run_id)[0].session_id
    first.start_session(sid, understudy_session_id="u1", device_id="d1")
    first.record_turn(sid, turn(1, reactions=[reaction(1)]))
    first.close()

    second = Store.open(path)
    assert second.authenticate(key) == "acme"
    assert second.get_persona("acme", persona.persona_id).persona == PERSONA
    assert second.create_run("acme", new_run(1), idempotency_key="k")[0].run_id == run.run_id
    assert second.get_session(sid).status is SessionState.RUNNING
    assert [t["turn"] for t in second.turns(sid)] == [1]
    assert len(second.reactions(run_id=run.run_id)) == 1
    assert [r.run.run_id for r in second.claim_resumable_runs()] == [run.run_id]
    second.close()


def test_personas_are_scoped_to_their_customer_and_deleted_for_good(store: Store) -> None:
    saved = store.create_persona("acme", PERSONA)
    with pytest.raises(PersonaNotFound):
        store.get_persona("globex", saved.persona_id)
    assert [p.persona_id for p in store.list_personas("acme").items] == [saved.persona_id]
    store.delete_persona("acme", saved.persona_id)
    with pytest.raises(PersonaNotFound):
        store.delete_persona("acme", saved.persona_id)


def test_a_turn_for_an_unknown_session_is_refused(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        store.record_turn("ses_0", turn(1))
    with pytest.raises(SessionNotFound):
        store.start_session("ses_0")
