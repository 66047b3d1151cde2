"""PII masking where it is wired in: every text the store writes, and the service's logs."""

from __future__ import annotations

import gzip
import json
import logging
from typing import TYPE_CHECKING, Any

import pytest

from synthetic_users._artifacts import DirectoryStore
from synthetic_users._publish import Publisher
from synthetic_users._safety._masking import PiiLogFilter, configure_service_logging
from synthetic_users._store import NewRun, SessionState, Store

if TYPE_CHECKING:
    from pathlib import Path

OTHER = "jane.doe@customer-mail.example.com"
OTHER_ENCODED = "jane.doe%40customer-mail.example.com"
PHONE = "+44 20 7946 0958"
US_PHONE = "(415) 555-0132"
OWN = "ada-lovelace@example.test"  # the heuristic persona's address for "Ada Lovelace"
LEAKS = (OTHER, OTHER_ENCODED, "7946 0958", "555-0132", OWN, "jane.doe")
PERSONA = {
    "name": "Ada Lovelace",
    "background": "Shops online every week.",
    "goals": [],
    "digital_literacy": "medium",
    "patience": "medium",
    "device": "desktop",
    "locale": "en-US",
}


def pii(field: str) -> str:
    return f"{field}: write {OTHER} or call {PHONE} / {US_PHONE}; I am {OWN}"


def every_field_turn(n: int) -> dict[str, Any]:
    reaction = {
        "step": n,
        "generation": 1,
        "sentiment": "confused",
        "note": pii("note"),
        "url": f"https://shop.example/confirm?email={OTHER_ENCODED}",
        "ref": "g1e3",
        "element": f"textbox {OTHER!r}",
        "screenshot": f"step-{n:04d}.png",
        "created_at": "2026-12-01T09:00:01Z",
    }
    return {
        "turn": n,
        "generation": 1,
        "started_at": "2026-12-01T09:00:00Z",
        "ended_at": "2026-12-01T09:00:01Z",
        "observation": {
            "url": f"https://shop.example/account?user={OTHER_ENCODED}",
            "title": pii("title"),
        },
        "action": {"name": "type", "arguments": {"ref": "g1e3", "text": pii("text"), "ease": 4}},
        "reason": pii("reason"),
        "outcome": {"ok": True, "summary": pii("summary"), "elapsed_ms": 3.0},
        "reactions": [reaction],
    }


def assert_masked(text: str) -> None:
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} in {text[:200]!r}"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(tmp_path / "su.db")


def session_of(store: Store) -> tuple[str, str]:
    run, _ = store.create_run(
        "acme",
        NewRun(
            target_url="https://shop.example/",
            task="sign up",
            turn_budget=5,
            model="scripted",
            personas=[PERSONA],
            request_hash="h",
        ),
    )
    return run.run_id, store.sessions(run.run_id)[0].session_id


def test_a_turn_with_pii_in_every_field_is_stored_masked(store: Store) -> None:
    _, sid = session_of(store)
    assert store.record_turn(sid, every_field_turn(1))
    (stored,) = store.turns(sid)
    assert_masked(json.dumps(stored))
    assert stored["observation"]["title"] == (
        "title: write [email] or call [phone] / [phone]; I am [persona inbox]"
    )
    assert stored["observation"]["url"] == "https://shop.example/account?user=[email]"
    assert stored["action"]["arguments"]["text"].startswith("text: write [email]")
    assert stored["reason"].endswith("I am [persona inbox]")
    assert "[phone]" in stored["outcome"]["summary"]
    (reaction,) = stored["reactions"]
    assert reaction["element"] == "textbox '[email]'"
    # What the code needs is untouched: refs, names, dates.
    assert stored["action"]["arguments"]["ref"] == "g1e3"
    assert stored["started_at"] == "2026-12-01T09:00:00Z"
    (row,) = store.reactions(session_id=sid)
    assert_masked(row.note + row.url)
    # Recording the same turn again is still a no-op, not a conflict.
    assert store.record_turn(sid, every_field_turn(1)) is False
    assert_masked(b"".join(p.read_bytes() for p in store_files(store)).decode("latin-1"))


def store_files(store: Store) -> list[Path]:
    from pathlib import Path

    (row,) = store.db.query("PRAGMA database_list")[:1]
    main = Path(row["file"])
    return sorted(main.parent.glob(main.name + "*"))


def test_live_reactions_and_session_reasons_are_masked(store: Store) -> None:
    run_id, sid = session_of(store)
    store.record_reaction(
        sid,
        generation=1,
        step=2,
        sentiment="angry",
        note=pii("note"),
        url=f"https://shop.example/?to={OTHER_ENCODED}",
    )
    store.start_session(sid)
    store.set_session_state(sid, SessionState.COMPLETED, reason=pii("finish"))
    (reaction,) = store.reactions(run_id=run_id)
    assert_masked(reaction.note + reaction.url)
    reason = store.get_session(sid).failure_reason
    assert reason is not None and "[email]" in reason
    assert_masked(reason)
    store.set_run_state(run_id, "failed", reason=f"internal error: no user {OTHER}")
    assert store.get_run(run_id).failure_reason == "internal error: no user [email]"


def test_transcripts_and_reports_are_built_from_the_masked_turns(
    store: Store, tmp_path: Path
) -> None:
    run_id, sid = session_of(store)
    store.start_session(sid)
    store.record_turn(sid, every_field_turn(1))
    finish = every_field_turn(2)
    finish["action"] = {
        "name": "finish",
        "arguments": {"success": False, "summary": pii("finish"), "ease": 2},
    }
    finish["reactions"] = []
    store.record_turn(sid, finish)
    store.set_session_state(sid, SessionState.COMPLETED, reason=pii("finish"))
    artifacts = DirectoryStore(tmp_path / "artifacts")
    publisher = Publisher(store, artifacts)
    publisher.session_ended(run_id, sid, "scripted")
    store.set_run_state(run_id, "completed")
    publisher.run_ended(run_id)
    files = [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"transcript.json.gz", "report.html", "report.md"}
    for path in files:
        data = path.read_bytes()
        text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8", "replace")
        assert_masked(text)
    transcript = gzip.decompress(next(p for p in files if p.suffix == ".gz").read_bytes())
    assert b"[persona inbox]" in transcript and b"[email]" in transcript


def test_the_log_filter_masks_messages_arguments_and_tracebacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logger = logging.getLogger("synthetic_users.test_masking")
    handler = logging.StreamHandler()
    handler.addFilter(PiiLogFilter())
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("sign-up mail to %s bounced", OTHER)
        logger.warning(f"call {PHONE}")
        try:
            raise ValueError(f"no account for {OTHER}")
        except ValueError:
            logger.exception("lookup failed")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    err = capsys.readouterr().err
    assert "sign-up mail to [email] bounced" in err and "call [phone]" in err
    assert "ValueError: no account for [email]" in err
    assert_masked(err)


def test_the_services_logging_masks_on_every_handler() -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    extra = logging.StreamHandler()
    uvicorn_logger = logging.getLogger("uvicorn.error")
    uvicorn_logger.addHandler(extra)
    try:
        log_filter = configure_service_logging("uvicorn.error")
        assert root.handlers and all(log_filter in h.filters for h in root.handlers)
        assert log_filter in extra.filters
    finally:
        uvicorn_logger.removeHandler(extra)
        for handler in root.handlers:
            handler.removeFilter(log_filter)
            if handler not in before:
                root.removeHandler(handler)


def test_the_sessions_own_inbox_address_is_the_persona_inbox(store: Store) -> None:
    _, sid = session_of(store)
    address = "k3x9q2@inbox.syntheticusers.test"
    store.db.execute(
        "UPDATE persona_sessions SET inbox_address = ? WHERE session_id = ?", (address, sid)
    )
    turn = every_field_turn(1)
    turn["action"]["arguments"]["text"] = f"my address is {address}, not {OTHER}"
    store.record_turn(sid, turn)
    (stored,) = store.turns(sid)
    assert stored["action"]["arguments"]["text"] == "my address is [persona inbox], not [email]"
