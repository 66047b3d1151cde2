"""Usage events: one per ended session, written once with a stable id, measured from its turns."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from synthetic_users._store import RunState, SessionState
from synthetic_users._usage import usage_id

from ..webhooks._helpers import new_run, open_store
from ._helpers import BROWSER_SECONDS, ended_session, installed

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from synthetic_users._store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path / "su.db")
    yield s
    s.close()


def test_an_ended_session_writes_its_usage_summed_over_generations(store: Store) -> None:
    usage = installed(store)
    session_id = ended_session(store)
    (record,) = usage.list_usage("acme").items
    assert record.usage_id == usage_id(session_id)
    assert record.session_id == session_id
    assert record.browser_seconds == BROWSER_SECONDS
    assert (record.turns, record.input_tokens, record.output_tokens) == (4, 3100, 150)
    assert record.quantity("browser_minutes") == 3  # 2.5 minutes, rounded up for billing
    assert record.quantity("model_tokens") == 3250


def test_the_usage_event_is_written_once(store: Store) -> None:
    usage = installed(store)
    session_id = ended_session(store)
    assert usage.record_session(store.get_session(session_id)) is False
    assert store.db.one("SELECT COUNT(*) FROM usage_events")[0] == 1  # type: ignore[index]


def test_a_session_without_turns_counts_its_wall_time(store: Store) -> None:
    usage = installed(store)
    run_id = new_run(store)
    session = store.sessions(run_id)[0]
    store.start_session(session.session_id)
    store.set_session_state(session.session_id, SessionState.FAILED, "no browser")
    ended = store.get_session(session.session_id)
    (record,) = usage.list_usage("acme").items
    assert ended.started_at is not None and ended.ended_at is not None
    assert record.browser_seconds == ended.ended_at - ended.started_at > 0
    assert record.turns == 0


def test_a_session_cancelled_before_it_started_uses_nothing(store: Store) -> None:
    usage = installed(store)
    run_id = new_run(store)
    store.cancel_run(run_id, "acme")
    assert store.get_run(run_id).status is RunState.CANCELLED
    assert usage.list_usage("acme").items == []


def test_totals_cover_every_page_and_filters_apply(store: Store) -> None:
    usage = installed(store)
    first_run = new_run(store)
    ended_session(store, run_id=first_run)
    for _ in range(2):
        ended_session(store)
    ended_session(store, customer="globex")
    page = usage.list_usage("acme", limit=2)
    assert len(page.items) == 2 and page.next_cursor is not None
    rest = usage.list_usage("acme", limit=2, cursor=page.next_cursor)
    assert len(rest.items) == 1 and rest.next_cursor is None
    totals = usage.totals("acme")
    assert (totals.sessions, totals.turns, totals.input_tokens) == (3, 12, 9300)
    assert totals.browser_seconds == 3 * BROWSER_SECONDS
    assert usage.totals("acme", run_id=first_run).sessions == 1
    newest = page.items[0].created_at
    assert usage.totals("acme", since=newest).sessions == 1
    assert usage.totals("acme", until=newest).sessions == 2
