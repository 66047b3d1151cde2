"""A persona session with turns of two generations, ended through the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from synthetic_users._store import SessionState
from synthetic_users._usage import UsageStore

from ..webhooks._helpers import new_run

if TYPE_CHECKING:
    from synthetic_users._store import Store

# (turn, generation, started, ended, tokens in, tokens out); times are seconds after 09:00:00.
TURNS = [
    (1, 1, 0, 30, 1000, 50),
    (2, 1, 30, 90, 1200, 60),  # generation 1: 90 s of browser
    (3, 2, 300, 330, 900, 40),  # the crash and the new profile took 210 s: not browser time
    (4, 2, 330, 360, None, None),  # a turn without model usage (the model reported none)
]
BROWSER_SECONDS = 90 + 60


def _at(seconds: int) -> str:
    return f"2026-12-01T09:{seconds // 60:02d}:{seconds % 60:02d}Z"


def turn(n: int, generation: int, start: int, end: int, tin: int | None, tout: int | None) -> Any:
    body: dict[str, Any] = {
        "turn": n,
        "generation": generation,
        "started_at": _at(start),
        "ended_at": _at(end),
        "observation": {"url": "https://shop.example.com/", "title": "Shop"},
        "action": {"name": "scroll", "arguments": {"direction": "down", "ease": 6}},
        "outcome": {"ok": True, "summary": "scrolled", "elapsed_ms": 5.0},
        "reactions": [],
    }
    if tin is not None:
        body["usage"] = {"input_tokens": tin, "output_tokens": tout}
    return body


def ended_session(store: Store, customer: str = "acme", run_id: str | None = None) -> str:
    """A run's session that ran TURNS and completed; its session id."""
    run_id = run_id or new_run(store, customer)
    session = store.sessions(run_id)[0]
    store.start_session(session.session_id)
    for args in TURNS:
        store.record_turn(session.session_id, turn(*args))
    store.set_session_state(session.session_id, SessionState.COMPLETED)
    return session.session_id


def installed(store: Store) -> UsageStore:
    usage = UsageStore(store)
    usage.install()
    return usage
