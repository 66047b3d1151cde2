"""The outbox: an event is written in the transaction that ends a run or session, exactly once."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from synthetic_users._store import RunState, SessionState
from synthetic_users._webhooks import WebhookStore

from ._helpers import end_run, new_run, open_store

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from synthetic_users._store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path / "su.db")
    yield s
    s.close()


def events(store: Store) -> list[tuple[str, str, dict[str, object]]]:
    rows = store.db.query("SELECT type, subject_id, payload FROM webhook_events ORDER BY rowid")
    return [(r["type"], r["subject_id"], json.loads(r["payload"])) for r in rows]


def deliveries(store: Store) -> list[tuple[str, str]]:
    rows = store.db.query(
        "SELECT e.type, d.webhook_id FROM webhook_deliveries d JOIN webhook_events e "
        "USING (event_id) ORDER BY d.rowid"
    )
    return [(r["type"], r["webhook_id"]) for r in rows]


def test_a_run_ending_writes_one_event_and_one_delivery_per_subscribed_endpoint(
    store: Store,
) -> None:
    hooks = WebhookStore(store)
    hooks.install()
    runs_only, _ = hooks.create("acme", "https://a.example/h", ["run.completed"])
    sessions_only, _ = hooks.create("acme", "https://b.example/h", ["session.completed"])
    both, _ = hooks.create("acme", "https://c.example/h", ["run.completed", "session.completed"])
    hooks.create("globex", "https://d.example/h", ["run.completed"])  # another customer's
    run_id = new_run(store)
    session = store.sessions(run_id)[0]
    store.start_session(session.session_id)
    store.set_session_state(session.session_id, SessionState.COMPLETED)
    store.set_run_state(run_id, RunState.COMPLETED)
    kinds = [(kind, subject) for kind, subject, _ in events(store)]
    assert kinds == [("session.completed", session.session_id), ("run.completed", run_id)]
    assert sorted(deliveries(store)) == sorted(
        [
            ("session.completed", sessions_only.webhook_id),
            ("session.completed", both.webhook_id),
            ("run.completed", runs_only.webhook_id),
            ("run.completed", both.webhook_id),
        ]
    )
    payload = events(store)[1][2]
    assert payload["type"] == "run.completed"
    assert payload["data"] == {
        "run_id": run_id,
        "status": "completed",
        "ended_at": payload["data"]["ended_at"],  # type: ignore[index]
        "links": {
            "self": f"/runs/{run_id}",
            "report_json": f"/runs/{run_id}/report.json",
            "report_html": f"/runs/{run_id}/report.html",
        },
    }


def test_a_cancelled_run_reports_its_status_and_an_event_is_never_written_twice(
    store: Store,
) -> None:
    hooks = WebhookStore(store)
    hooks.install()
    hooks.install()  # installing twice adds nothing
    hooks.create("acme", "https://a.example/h", ["run.completed"])
    run_id = new_run(store)
    store.cancel_run(run_id, "acme")
    # The orchestrator's own attempt to end it afterwards is refused and writes nothing.
    store.cancel_run(run_id, "acme")
    hooks.on_run_ended(store.get_run(run_id))  # a replayed hook is a no-op
    assert [(e[0], e[2]["data"]["status"]) for e in events(store)] == [  # type: ignore[index]
        ("run.completed", "cancelled")
    ]
    assert len(deliveries(store)) == 1


def test_the_event_shares_the_transaction_of_the_state_change(store: Store) -> None:
    hooks = WebhookStore(store)
    hooks.install()

    def broken(_: object) -> None:
        raise RuntimeError("the disk filled up")

    store.run_ended_hooks.append(broken)
    run_id = new_run(store)
    store.set_run_state(run_id, RunState.RUNNING)
    with pytest.raises(RuntimeError):
        store.set_run_state(run_id, RunState.COMPLETED)
    # Rolled back together: the run is still running and no event was left behind.
    assert store.get_run(run_id).status is RunState.RUNNING
    assert events(store) == []
    store.run_ended_hooks.remove(broken)
    store.set_run_state(run_id, RunState.COMPLETED)
    assert len(events(store)) == 1


def test_an_endpoint_created_after_the_event_gets_no_delivery_of_it(store: Store) -> None:
    hooks = WebhookStore(store)
    hooks.install()
    end_run(store, new_run(store))
    hooks.create("acme", "https://late.example/h", ["run.completed"])
    assert len(events(store)) == 1
    assert deliveries(store) == []
