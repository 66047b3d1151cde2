"""The live view, the report pages (the HTML of report.html in the dashboard's frame), the
screenshots behind sign-in, and the palette's contrast."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import pytest

from synthetic_users._artifacts import run_prefix, session_prefix
from synthetic_users._reports import (
    synthesize_aggregate,
    synthesize_session,
    write_aggregate_artifacts,
    write_session_artifacts,
)
from synthetic_users._store import NewRun, RunState, SessionState
from tests.synthetic_users.dashboard.conftest import sign_in
from tests.synthetic_users.reports._build import PNG, react, transcript, turn

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.testing import TestClient

    from synthetic_users._store import RunRecord
    from tests.synthetic_users.dashboard.conftest import Dashboard

Signed = tuple["TestClient[Litestar]", str]


def _run(dash: Dashboard, *names: str, customer: str = "acme") -> RunRecord:
    new = NewRun(
        target_url="https://shop.test/",
        task="Buy a kettle",
        turn_budget=20,
        model="heuristic",
        personas=[{"name": n} for n in names],
        request_hash=f"h-{'-'.join(names)}-{customer}",
    )
    run, _ = dash.store.create_run(customer, new)
    return run


class _Main(HTMLParser):
    """The visible text inside <main>, and the images' alt texts."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.text: list[str] = []
        self.alts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "main":
            self.depth += 1
        if self.depth and tag == "img":
            self.alts.append(dict(attrs).get("alt") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "main":
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.text.append(data)

    @classmethod
    def of(cls, html: str) -> tuple[str, list[str]]:
        parser = cls()
        parser.feed(html)
        return " ".join(" ".join(parser.text).split()), parser.alts


def test_the_live_view_shows_turn_generation_after_a_crash_screenshot_and_reactions(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, _token = signed_in
    run = _run(dash, "Rosa", "Sam")
    rosa, sam = dash.store.sessions(run.run_id)
    dash.store.start_session(rosa.session_id)
    dash.store.record_reaction(
        rosa.session_id,
        generation=1,
        step=3,
        sentiment="confused",
        note="Where is the <basket>?",
        url="https://shop.test/",
        screenshot="step-0003.png",
    )
    dash.store.bump_generation(rosa.session_id)  # the browser crashed
    prefix = session_prefix("acme", run.run_id, rosa.session_id)
    dash.artifacts.put(f"{prefix}/screenshots/step-0003.png", PNG)
    page = client.get(f"/dashboard/runs/{run.run_id}")
    assert '<meta http-equiv="refresh" content="2">' in page.text  # inside <noscript>
    assert "live.js" in page.text
    live = client.get(f"/dashboard/runs/{run.run_id}/live").text
    text, alts = _Main.of(f"<main>{live}</main>")
    assert "Run running" in text
    assert "browser generation 2" in text
    assert "restarted 1 time after a crash" in text
    assert "confused at step 3: “Where is the <basket>?”" in text
    assert "Where is the &lt;basket&gt;?" in live  # escaped on the way
    assert alts == ["Rosa at step 3: Where is the <basket>?"]
    shot = f"/dashboard/runs/{run.run_id}/sessions/{rosa.session_id}/screenshots/step-0003.png"
    assert f'src="{shot}"' in live
    assert client.get(shot).content == PNG
    assert "No screenshot yet." in text  # Sam has none
    assert 'data-done="false"' in live
    dash.store.cancel_run(run.run_id)
    for s in (rosa, sam):
        if dash.store.get_session(s.session_id).status is SessionState.RUNNING:
            dash.store.set_session_state(s.session_id, SessionState.CANCELLED)
    done = client.get(f"/dashboard/runs/{run.run_id}")
    assert "http-equiv" not in done.text and "live.js" not in done.text
    assert 'data-done="true"' in done.text


def test_runs_list_status_progress_per_persona_and_pages(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, _token = signed_in
    runs = [_run(dash, f"P{i}", "Q") for i in range(23)]
    first = client.get("/dashboard/runs").text
    assert first.count('data-label="Task"') == 20
    assert 'P22: <span class="status status-queued">queued</span> turn 0 of 20' in first
    older = re.search(r'href="(/dashboard/runs\?cursor=[^"]+)" rel="next"', first)
    assert older
    second = client.get(older[1].replace("&amp;", "&")).text
    assert second.count('data-label="Task"') == 3
    assert runs[0].run_id in second and runs[0].run_id not in first
    assert 'rel="next"' not in second
    bad = client.get("/dashboard/runs?cursor=not-one-of-ours")
    assert bad.status_code == 400 and "Bad page link" in bad.text


def test_another_customers_run_and_screenshots_are_not_found(dash: Dashboard) -> None:
    theirs = _run(dash, "Other", customer="globex")
    (session,) = dash.store.sessions(theirs.run_id)
    prefix = session_prefix("globex", theirs.run_id, session.session_id)
    dash.artifacts.put(f"{prefix}/screenshots/step-0001.png", PNG)
    with dash.client() as client:
        sign_in(client, dash.key)
        base = f"/dashboard/runs/{theirs.run_id}"
        for path in (
            base,
            f"{base}/live",
            f"{base}/report",
            f"{base}/sessions/{session.session_id}",
            f"{base}/sessions/{session.session_id}/screenshots/step-0001.png",
        ):
            page = client.get(path)
            assert page.status_code == 404, path
            assert "Run not found" in page.text


def test_a_screenshot_needs_a_sign_in(dash: Dashboard) -> None:
    run = _run(dash, "Rosa")
    (session,) = dash.store.sessions(run.run_id)
    with dash.client() as client:
        path = (
            f"/dashboard/runs/{run.run_id}/sessions/{session.session_id}/screenshots/step-0001.png"
        )
        assert client.get(path, follow_redirects=False).status_code == 302


def _finished_run(dash: Dashboard) -> tuple[RunRecord, list[str]]:
    run = _run(dash, "Margaret", "Dev")
    sessions = dash.store.sessions(run.run_id)
    reports: list[dict[str, Any]] = []
    for n, (session, name) in enumerate(zip(sessions, ("Margaret", "Dev"), strict=True), 1):
        turns = [
            turn(1, "click", path="/", result="clicked link 'Delivery'", reason="Find delivery"),
            react(2, "confused", f"No label here, says {name}", path="/checkout"),
            turn(3, "finish", path="/checkout", success=n == 2, summary=f"{name} stopped."),
        ]
        value = transcript(turns, sid=n, name=name)
        value["run_id"], value["session_id"] = run.run_id, session.session_id
        report = synthesize_session(value, status="completed")
        prefix = session_prefix("acme", run.run_id, session.session_id)
        dash.artifacts.put(f"{prefix}/screenshots/step-002.png", PNG)
        write_session_artifacts(
            dash.artifacts, "acme", run.run_id, session.session_id, value, report
        )
        reports.append(report)
    summary = {
        "run_id": run.run_id,
        "task": run.task,
        "target_url": run.target_url,
        "status": "completed",
    }
    aggregate = synthesize_aggregate(summary, reports)
    write_aggregate_artifacts(dash.artifacts, "acme", run.run_id, aggregate)
    return run, [s.session_id for s in sessions]


def test_the_report_pages_show_what_report_html_shows_inside_the_dashboard(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, _token = signed_in
    run, (first, _second) = _finished_run(dash)
    for page_path, file_key in (
        (f"/dashboard/runs/{run.run_id}/report", f"{run_prefix('acme', run.run_id)}/report.html"),
        (
            f"/dashboard/runs/{run.run_id}/sessions/{first}",
            f"{session_prefix('acme', run.run_id, first)}/report.html",
        ),
    ):
        page = client.get(page_path)
        assert page.status_code == 200, page.text
        standalone = dash.artifacts.get(file_key).decode()
        # The same words and the same pictures (by their alt text); only the frame differs.
        assert _Main.of(page.text) == _Main.of(standalone)
        assert 'aria-label="Main"' in page.text and 'aria-label="Main"' not in standalone
        assert "data:image/png;base64" in standalone and "data:image" not in page.text
        assert "<style>" in standalone and "<style>" not in page.text
    aggregate = client.get(f"/dashboard/runs/{run.run_id}/report").text
    assert f'href="/dashboard/runs/{run.run_id}/sessions/{first}#step-2"' in aggregate
    timeline = client.get(f"/dashboard/runs/{run.run_id}/sessions/{first}").text
    assert "Reason given: Find delivery" in timeline
    shot = f'src="/dashboard/runs/{run.run_id}/sessions/{first}/screenshots/step-002.png"'
    assert shot in timeline
    assert "<title>Usability report: Margaret — Buy a kettle · Persona timeline" in timeline


def test_a_report_page_before_the_report_is_written_says_when_it_will_be(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, _token = signed_in
    run = _run(dash, "Rosa")
    (session,) = dash.store.sessions(run.run_id)
    page = client.get(f"/dashboard/runs/{run.run_id}/report")
    assert page.status_code == 404 and "written when the run ends" in page.text
    page = client.get(f"/dashboard/runs/{run.run_id}/sessions/{session.session_id}")
    assert (
        page.status_code == 404 and "timeline of Rosa is written when the session ends" in page.text
    )
    assert dash.store.get_run(run.run_id).status is RunState.QUEUED


# -- contrast of the palette ---------------------------------------------------------------------

CSS = (files("synthetic_users._dashboard") / "static" / "dashboard.css").read_text()
REPORT_CSS = (files("synthetic_users._reports") / "templates" / "_style.css").read_text()
COLOURS = dict(re.findall(r"--([a-z-]+):\s*(#[0-9a-f]{6})", REPORT_CSS + CSS))


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize(
    ("ink", "background"),
    [
        ("header-ink", "header"),  # the site header and its navigation
        ("ink", "notice"),
        ("ink", "good-bg"),
        ("ink", "error-bg"),
        ("warn", "warn-bg"),
        ("bad", "error-bg"),
        ("accent", "notice"),
        ("muted", "panel"),
    ],
)
def test_every_text_colour_of_the_dashboard_meets_wcag_aa(ink: str, background: str) -> None:
    assert contrast(COLOURS[ink], COLOURS[background]) >= 4.5


def test_the_focus_outline_stands_out_from_white_and_from_the_header() -> None:
    # WCAG 1.4.11: a focus indicator needs 3:1 against what is next to it.
    assert contrast(COLOURS["focus"], "#ffffff") >= 3
    assert contrast("#ffffff", COLOURS["header"]) >= 3
