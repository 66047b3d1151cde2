"""Report files in the artifact store: the seed's layout, round-trips, byte-for-byte repeatable."""

from __future__ import annotations

import base64
import gzip
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from synthetic_users._artifacts import DirectoryStore, run_prefix, session_prefix
from synthetic_users._reports import (
    read_transcript,
    synthesize_aggregate,
    synthesize_session,
    write_aggregate_artifacts,
    write_session_artifacts,
)
from tests.synthetic_users.reports._build import (
    PNG,
    RUN_ID,
    SITE,
    react,
    session_id,
    transcript,
    turn,
)

if TYPE_CHECKING:
    from pathlib import Path

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
CUSTOMER = "cus_test"
DATA_URI = "data:image/png;base64," + base64.b64encode(PNG).decode()


def persona_session(store: DirectoryStore, n: int, name: str) -> tuple[dict[str, Any], Any]:
    source = transcript(
        [turn(1), react(2, "confused", "No label here.", path="/checkout"), turn(3, "finish")],
        sid=n,
        name=name,
    )
    # The loop stores screenshots before the report is written.
    store.put(f"{session_prefix(CUSTOMER, RUN_ID, session_id(n))}/screenshots/step-002.png", PNG)
    return source, synthesize_session(source, status="completed", generated_at=NOW)


def test_a_session_s_files_land_beside_its_screenshots(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    source, report = persona_session(store, 1, "Margaret")
    keys = write_session_artifacts(store, CUSTOMER, RUN_ID, session_id(1), source, report)

    prefix = f"customers/{CUSTOMER}/runs/{RUN_ID}/sessions/{session_id(1)}"
    expected = [f"{prefix}/{n}" for n in ("transcript.json.gz", "report.json", "report.md")]
    assert keys == [*expected, f"{prefix}/report.html"]
    assert store.list(prefix) == sorted([*keys, f"{prefix}/screenshots/step-002.png"])
    assert (tmp_path / prefix / "report.html").is_file()


def test_the_transcript_round_trips_through_gzip(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    source, report = persona_session(store, 1, "Margaret")
    write_session_artifacts(store, CUSTOMER, RUN_ID, session_id(1), source, report)
    prefix = session_prefix(CUSTOMER, RUN_ID, session_id(1))
    data = store.get(f"{prefix}/transcript.json.gz")
    assert data[:2] == b"\x1f\x8b"
    assert read_transcript(data) == source
    assert json.loads(gzip.decompress(data)) == source


def test_the_stored_report_json_is_the_report_and_the_html_embeds_its_screenshot(
    tmp_path: Path,
) -> None:
    store = DirectoryStore(tmp_path)
    source, report = persona_session(store, 1, "Margaret")
    write_session_artifacts(store, CUSTOMER, RUN_ID, session_id(1), source, report)
    prefix = session_prefix(CUSTOMER, RUN_ID, session_id(1))
    raw = store.get(f"{prefix}/report.json").decode()
    assert json.loads(raw) == report
    assert raw == json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    html = store.get(f"{prefix}/report.html").decode()
    assert DATA_URI in html
    assert 'id="step-3"' in html  # the timeline, from the transcript
    assert "# Margaret: Buy a kettle" in store.get(f"{prefix}/report.md").decode()


def test_writing_the_same_session_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    first, second = DirectoryStore(tmp_path / "a"), DirectoryStore(tmp_path / "b")
    source, report = persona_session(first, 1, "Margaret")
    persona_session(second, 1, "Margaret")
    keys = write_session_artifacts(first, CUSTOMER, RUN_ID, session_id(1), source, report)
    write_session_artifacts(second, CUSTOMER, RUN_ID, session_id(1), source, report)
    for key in keys:
        assert first.get(key) == second.get(key), key


def test_the_aggregate_lands_under_the_run_and_reads_the_sessions_back(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    reports = []
    for n, name in ((1, "Margaret"), (2, "Dev")):
        source, report = persona_session(store, n, name)
        write_session_artifacts(store, CUSTOMER, RUN_ID, session_id(n), source, report)
        reports.append(report)
    run = {"run_id": RUN_ID, "task": "Buy a kettle", "target_url": SITE, "status": "completed"}
    aggregate = synthesize_aggregate(run, reports, generated_at=NOW)

    keys = write_aggregate_artifacts(store, CUSTOMER, RUN_ID, aggregate)

    prefix = run_prefix(CUSTOMER, RUN_ID)
    assert keys == [f"{prefix}/report.json", f"{prefix}/report.md", f"{prefix}/report.html"]
    assert json.loads(store.get(f"{prefix}/report.json")) == aggregate
    html = store.get(f"{prefix}/report.html").decode()
    assert html.count(DATA_URI) == 2  # one screenshot per persona of the one issue
    assert html.count("<svg") == 2  # each persona's ease chart, from its stored report.json
    for n in (1, 2):
        link = f"sessions/{session_id(n)}/report.html"
        assert f'href="{link}"' in html
        assert (tmp_path / prefix / link).is_file()  # the relative link resolves on disk
    assert f"sessions/{session_id(1)}/report.md" in store.get(f"{prefix}/report.md").decode()


def test_the_aggregate_of_sessions_without_stored_files_is_still_written(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    source = transcript([react(1, "angry", "No label!", path="/x")], sid=3, name="Ana")
    report = synthesize_session(source, status="cancelled", generated_at=NOW)
    run = {"run_id": RUN_ID, "task": "Buy a kettle", "target_url": SITE, "status": "cancelled"}
    aggregate = synthesize_aggregate(run, [report], generated_at=NOW)
    write_aggregate_artifacts(store, CUSTOMER, RUN_ID, aggregate)
    html = store.get(f"{run_prefix(CUSTOMER, RUN_ID)}/report.html").decode()
    assert "Ana" in html
    assert "Screenshot step-001.png is not available." in html
