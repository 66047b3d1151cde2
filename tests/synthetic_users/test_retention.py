"""Retention: runs that ended longer ago than their customer keeps them are deleted, and say 410."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from synthetic_users import cli
from synthetic_users._artifacts import DirectoryStore, run_prefix, session_prefix
from synthetic_users._retention import (
    DAY_S,
    RetentionSweeper,
    expired,
    retention_days,
    set_retention,
)
from synthetic_users._store import NewRun, RunState, SessionState, Store
from tests.synthetic_users.api.conftest import problem, running_api
from tests.synthetic_users.api.test_runs import TURN

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def ended_run(
    store: Store,
    artifacts: DirectoryStore,
    customer: str,
    *,
    status: RunState = RunState.COMPLETED,
    session_status: SessionState = SessionState.COMPLETED,
) -> tuple[str, str]:
    """A run with one session that took a turn, reacted, wrote artifacts and ended now."""
    run, _ = store.create_run(
        customer,
        NewRun("https://shop.example/", "Buy", 10, "heuristic", [{"name": "Ada"}], "h"),
    )
    sid = store.sessions(run.run_id)[0].session_id
    store.start_session(sid, understudy_session_id="u", device_id="d")
    store.record_turn(sid, TURN)
    store.record_reaction(
        sid, generation=1, step=1, sentiment="confused", note="hm", url="https://shop.example/"
    )
    artifacts.put(f"{session_prefix(customer, run.run_id, sid)}/report.json", b"{}")
    artifacts.put(f"{session_prefix(customer, run.run_id, sid)}/screenshots/step-0001.png", b"p")
    artifacts.put(f"{run_prefix(customer, run.run_id)}/report.html", b"<html>")
    if session_status is not SessionState.RUNNING:
        store.set_session_state(sid, session_status)
    if status is RunState.CANCELLED:
        store.cancel_run(run.run_id)
    elif status.terminal:
        store.set_run_state(run.run_id, status)
    return run.run_id, sid


def rows(store: Store, run_id: str) -> dict[str, int]:
    counts = {}
    for table in ("runs", "persona_sessions", "reactions"):
        row = store.db.one(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,))  # noqa: S608
        counts[table] = int(row[0]) if row else 0
    row = store.db.one(
        "SELECT COUNT(*) FROM turns t JOIN persona_sessions s USING (session_id) "
        "WHERE s.run_id = ?",
        (run_id,),
    )
    counts["turns"] = int(row[0]) if row else 0
    return counts


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Iterator[Store]:
    opened = Store.open(tmp_path / "su.db", clock=clock)
    yield opened
    opened.close()


async def test_a_run_past_30_days_is_deleted_with_everything_and_leaves_a_tombstone(
    tmp_path: Path, store: Store, clock: Clock
) -> None:
    artifacts = DirectoryStore(tmp_path / "artifacts")
    old, _ = ended_run(store, artifacts, "acme")
    clock.now += 2 * DAY_S
    recent, _ = ended_run(store, artifacts, "acme")
    sweeper = RetentionSweeper(store, artifacts)
    clock.now += 29 * DAY_S  # old ended 31 days ago, recent 29
    assert sweeper.sweep() == [old]
    assert rows(store, old) == {"runs": 0, "persona_sessions": 0, "reactions": 0, "turns": 0}
    assert artifacts.list(run_prefix("acme", old)) == []
    tombstone = expired(store, old, "acme")
    assert tombstone is not None and tombstone.expired_at == clock.now
    assert expired(store, old, "globex") is None  # a tombstone is the customer's own
    # The recent run is untouched, rows and files.
    assert rows(store, recent) == {"runs": 1, "persona_sessions": 1, "reactions": 1, "turns": 1}
    assert len(artifacts.list(run_prefix("acme", recent))) == 3
    assert sweeper.sweep() == []
    clock.now += 2 * DAY_S
    assert sweeper.sweep() == [recent]


async def test_a_run_still_running_is_never_swept_however_old(
    tmp_path: Path, store: Store, clock: Clock
) -> None:
    artifacts = DirectoryStore(tmp_path / "artifacts")
    running, _ = ended_run(
        store, artifacts, "acme", status=RunState.RUNNING, session_status=SessionState.RUNNING
    )
    # Cancelled, but its browser is still closing: its session is still running.
    closing, _ = ended_run(
        store, artifacts, "acme", status=RunState.CANCELLED, session_status=SessionState.RUNNING
    )
    clock.now += 400 * DAY_S
    assert RetentionSweeper(store, artifacts).sweep() == []
    assert rows(store, running)["runs"] == rows(store, closing)["runs"] == 1


async def test_a_customers_own_retention_replaces_the_default(
    tmp_path: Path, store: Store, clock: Clock
) -> None:
    artifacts = DirectoryStore(tmp_path / "artifacts")
    acme, _ = ended_run(store, artifacts, "acme")
    globex, _ = ended_run(store, artifacts, "globex")
    set_retention(store, "globex", 7)
    set_retention(store, "acme", 90)
    assert retention_days(store, "globex") == 7
    clock.now += 8 * DAY_S
    sweeper = RetentionSweeper(store, artifacts, default_days=30)
    assert sweeper.sweep() == [globex]
    clock.now += 30 * DAY_S
    assert sweeper.sweep() == []  # acme keeps 90 days
    set_retention(store, "acme", None)  # back to the default
    assert sweeper.sweep() == [acme]


async def test_the_api_answers_410_for_an_expired_run_its_sessions_and_artifacts(
    tmp_path: Path, clock: Clock
) -> None:
    async with running_api(tmp_path, store_options={"clock": clock}) as api:
        run_id, sid = ended_run(api.store, api.artifacts, "acme")
        clock.now += 31 * DAY_S
        assert RetentionSweeper(api.store, api.artifacts).sweep() == [run_id]
        base = f"/runs/{run_id}"
        for path in (
            base,
            f"{base}/report.json",
            f"{base}/report.md",
            f"{base}/report.html",
            f"{base}/sessions/{sid}",
            f"{base}/sessions/{sid}/report.json",
            f"{base}/sessions/{sid}/transcript.json.gz",
            f"{base}/sessions/{sid}/screenshots/step-0001.png",
        ):
            response = await api.client.get(path, headers=api.auth())
            problem(response, 410, "run_expired")
        problem(await api.client.delete(base, headers=api.auth()), 410, "run_expired")
        # Another customer learns nothing: for it, the run never existed.
        other = await api.client.get(base, headers=api.auth(api.other_key))
        problem(other, 404, "run_not_found")
        listed = (await api.client.get("/runs", headers=api.auth())).json()
        assert listed["runs"] == []


async def test_the_sweeper_runs_on_its_own_once_started(tmp_path: Path, store: Store) -> None:
    artifacts = DirectoryStore(tmp_path / "artifacts")
    ended, _ = ended_run(store, artifacts, "acme")
    later = Clock()
    later.now = store.clock() + 31 * DAY_S
    sweeper = RetentionSweeper(store, artifacts, interval_s=0.01, clock=later)
    await sweeper.start()
    try:
        async with asyncio.timeout(5):
            while expired(store, ended, "acme") is None:  # noqa: ASYNC110 (polls the database)
                await asyncio.sleep(0.01)
    finally:
        await sweeper.stop()


def test_the_cli_sets_a_customers_retention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--data-dir", str(tmp_path), "customers", "set-retention", "--customer", "acme"]
    assert cli.main([*args, "--days", "7"]) == 0
    assert "kept 7 days" in capsys.readouterr().out
    store = Store.open(tmp_path / "synthetic-users.db")
    assert retention_days(store, "acme") == 7
    store.close()
    assert cli.main([*args, "--days", "0"]) == 2
    assert "between 1 and 3650" in capsys.readouterr().err
    assert cli.main([*args, "--default"]) == 0
    store = Store.open(tmp_path / "synthetic-users.db")
    assert retention_days(store, "acme") is None
    store.close()


def _usage_and_mail(store: Store, run_id: str, sid: str, *, posting: str) -> None:
    with store.db.transaction() as conn:
        conn.execute(
            "INSERT INTO usage_events (usage_id, customer_id, run_id, session_id, "
            "browser_seconds, turns, input_tokens, output_tokens, created_at) "
            "VALUES ('use_1', 'acme', ?, ?, 60, 1, 0, 0, ?)",
            (run_id, sid, store.clock()),
        )
        conn.execute(
            "INSERT INTO stripe_meter_events (identifier, usage_id, event_name, value, status, "
            "next_attempt_at) VALUES ('use_1:m', 'use_1', 'm', 1, ?, 0)",
            (posting,),
        )
        conn.execute(
            "INSERT INTO inbox_messages (session_id, received_at, mail_from, subject, body, "
            "links, size) VALUES (?, 0, 'shop@example.com', 'Your code', '123456', '[]', 6)",
            (sid,),
        )


def _count(store: Store, table: str) -> int:
    row = store.db.one(f"SELECT COUNT(*) FROM {table}")  # noqa: S608 (fixed names)
    return int(row[0]) if row else 0


async def test_a_runs_mail_and_posted_usage_go_with_it_but_usage_being_posted_waits(
    tmp_path: Path, store: Store, clock: Clock
) -> None:
    artifacts = DirectoryStore(tmp_path / "artifacts")
    run_id, sid = ended_run(store, artifacts, "acme")
    _usage_and_mail(store, run_id, sid, posting="pending")
    clock.now += 31 * DAY_S
    sweeper = RetentionSweeper(store, artifacts)
    assert sweeper.sweep() == []  # Stripe has not got it yet: billing must not lose it
    store.db.execute("UPDATE stripe_meter_events SET status = 'posted'")
    assert sweeper.sweep() == [run_id]
    for table in ("usage_events", "stripe_meter_events", "inbox_messages"):
        assert _count(store, table) == 0, table
