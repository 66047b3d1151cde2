"""Reports for people: what the Markdown and the self-contained HTML show, and never do."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

import pytest

from synthetic_users._reports import (
    render_aggregate_html,
    render_aggregate_markdown,
    render_session_html,
    render_session_markdown,
    synthesize_aggregate,
    synthesize_session,
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

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SCRIPT = "<script>alert('x')</script>"
DATA_URI = "data:image/png;base64," + base64.b64encode(PNG).decode()


class Page(HTMLParser):
    """The parts of an HTML page the tests look at."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.headings: list[int] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if len(tag) == 2 and tag[0] == "h" and tag[1].isdigit():
            self.headings.append(int(tag[1]))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for t, attrs in self.tags if t == tag]

    @property
    def visible(self) -> str:
        return " ".join(" ".join(self.text).split())


def source() -> dict[str, Any]:
    turns = [
        turn(1, "click", path="/", result="clicked link 'Delivery info'", reason="Find delivery"),
        turn(2, "navigate", path="/delivery", title="404 Not Found"),
        react(3, "confused", f"This field has no label {SCRIPT}", path="/checkout"),
        turn(4, "click", path="/checkout", elapsed_ms=4200.0, result="clicked button 'Pay'"),
        react(5, "frustrated", "It took forever to load.", path="/pay", screenshot=False),
        turn(6, "finish", path="/pay", success=False, summary="Could not pay."),
    ]
    value = transcript(turns)
    value["persona"]["background"] = f"Background {SCRIPT}"
    return value


def session_report() -> dict[str, Any]:
    return synthesize_session(source(), status="completed", generated_at=NOW)


def aggregate_and_reports() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    first = session_report()
    second = synthesize_session(
        transcript([react(1, "angry", "No label again.", path="/checkout")], sid=2, name="Dev"),
        status="completed",
        finish={"success": True, "summary": "Paid in the end."},
        generated_at=NOW,
    )
    run = {"run_id": RUN_ID, "task": "Buy a kettle", "target_url": SITE, "status": "completed"}
    aggregate = synthesize_aggregate(run, [first, second], generated_at=NOW)
    return aggregate, {r["session_id"]: r for r in (first, second)}


def assert_accessible(page: Page) -> None:
    html = page.all("html")
    assert html and html[0].get("lang") == "en"
    assert page.headings.count(1) == 1 and page.headings[0] == 1
    # Headings never skip a level on the way down.
    assert all(b - a <= 1 for a, b in zip(page.headings, page.headings[1:], strict=False))
    for img in page.all("img"):
        assert img.get("alt"), img
    assert any(m.get("name") == "viewport" for m in page.all("meta"))


def assert_self_contained(page: Page) -> None:
    assert page.all("script") == []
    assert page.all("link") == []
    for img in page.all("img"):
        assert str(img.get("src", "")).startswith("data:image/png;base64,")
    # Even a mistake in escaping could run nothing: the page allows only inline CSS and data images.
    policies = [m for m in page.all("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    assert [m["content"] for m in policies] == [
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
    ]


# --- session ---------------------------------------------------------------------------------


def test_the_session_markdown_shows_the_persona_outcome_and_every_friction_point() -> None:
    report = session_report()
    md = render_session_markdown(report)
    assert md.startswith("# Margaret: Buy a kettle\n")
    assert "**Task not completed**: Could not pay." in md
    for point in report["friction_points"]:
        assert f"### {point['title']}" in md
    assert "(screenshots/step-003.png)" in md
    assert "| Time on task | 52.0 s |" in md


def test_the_session_markdown_neutralises_markup_from_the_page() -> None:
    md = render_session_markdown(session_report())
    assert SCRIPT not in md
    assert "\\<script\\>" in md


def test_the_session_html_shows_the_persona_outcome_and_every_friction_point() -> None:
    report = session_report()
    html = render_session_html(report, {"step-003.png": PNG}, transcript=source())
    page = Page(html)
    text = page.visible
    assert "Margaret: Buy a kettle" in text
    assert "Task not completed</strong>: Could not pay." in html
    for point in report["friction_points"]:
        assert point["title"] in text
    assert {p["kind"] for p in report["friction_points"]} >= {"dead_link", "slow_load"}
    assert "Time on task 52.0 s" in text


def test_the_session_html_embeds_screenshots_with_the_reaction_note_as_alt_text() -> None:
    html = render_session_html(session_report(), {"step-003.png": PNG}, transcript=source())
    page = Page(html)
    images = page.all("img")
    assert images and all(img["src"] == DATA_URI for img in images)
    assert {img["alt"] for img in images} >= {f"This field has no label {SCRIPT}"}
    assert_self_contained(page)


def test_the_session_html_escapes_text_from_the_page_and_the_model() -> None:
    html = render_session_html(session_report(), {"step-003.png": PNG}, transcript=source())
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert Page(html).all("script") == []


def test_the_session_html_is_accessible() -> None:
    html = render_session_html(session_report(), {"step-003.png": PNG}, transcript=source())
    assert_accessible(Page(html))


def test_the_session_html_timeline_shows_each_step_with_its_reason_and_ease() -> None:
    html = render_session_html(session_report(), {}, transcript=source())
    page = Page(html)
    ids = {attrs.get("id") for _, attrs in page.tags}
    assert {f"step-{n}" for n in range(1, 7)} <= ids
    assert "Reason given: Find delivery" in page.visible
    assert "ease 6 / 7" in page.visible
    # Friction steps link to the timeline.
    assert any(a.get("href") == "#step-2" for a in page.all("a"))


def test_a_missing_screenshot_is_named_instead_of_shown() -> None:
    html = render_session_html(session_report(), lambda name: None, transcript=source())
    page = Page(html)
    assert page.all("img") == []
    assert "Screenshot step-003.png is not available." in page.visible


def test_without_a_transcript_the_session_html_lists_the_reactions() -> None:
    html = render_session_html(session_report(), {"step-003.png": PNG})
    page = Page(html)
    assert "Reactions (2)" in page.visible
    assert "It took forever to load." in page.visible
    assert_accessible(page)


def test_the_ease_chart_is_an_inline_svg_with_a_text_equivalent() -> None:
    html = render_session_html(session_report(), {})
    page = Page(html)
    (svg,) = page.all("svg")
    assert svg.get("role") == "img"
    assert len(page.all("rect")) == 6
    assert "step 3: 3" in page.visible


def test_the_session_html_is_the_same_for_the_same_report() -> None:
    report = session_report()
    assert render_session_html(report, {"step-003.png": PNG}) == render_session_html(
        report, {"step-003.png": PNG}
    )


# --- aggregate -------------------------------------------------------------------------------


def test_the_aggregate_markdown_ranks_the_issues_and_links_the_sessions() -> None:
    aggregate, _ = aggregate_and_reports()
    md = render_aggregate_markdown(aggregate)
    assert "**Task success: 1 of 2 personas (50%)**" in md
    assert md.index("A control without a label on /checkout") < md.index("Slow to respond")
    assert f"(sessions/{session_id(1)}/report.md)" in md
    assert f"(sessions/{session_id(2)}/screenshots/step-001.png)" in md


def test_the_aggregate_html_shows_success_per_persona_issues_and_links() -> None:
    aggregate, reports = aggregate_and_reports()
    html = render_aggregate_html(aggregate, reports, lambda sid, name: PNG)
    page = Page(html)
    text = page.visible
    assert "Task success: 1 of 2 personas (50%)" in text
    assert "Paid in the end." in text and "Could not pay." in text
    for issue in aggregate["issues"]:
        assert issue["title"] in text
    assert "Met by 2 of 2: Margaret, Dev" in text
    hrefs = {a.get("href") for a in page.all("a")}
    assert f"sessions/{session_id(1)}/report.html" in hrefs
    assert f"sessions/{session_id(2)}/report.html#step-1" in hrefs
    assert len(page.all("svg")) == 2  # one ease chart per persona


def test_the_aggregate_html_embeds_one_screenshot_per_persona_of_an_issue() -> None:
    aggregate, reports = aggregate_and_reports()
    html = render_aggregate_html(aggregate, reports, lambda sid, name: PNG)
    page = Page(html)
    alts = [img["alt"] for img in page.all("img")]
    assert alts == [
        f"Margaret, step 3: This field has no label {SCRIPT}",
        "Dev, step 1: No label again.",
    ]
    assert_self_contained(page)
    assert_accessible(page)
    assert SCRIPT not in html


def test_the_aggregate_html_without_screenshots_names_them() -> None:
    aggregate, reports = aggregate_and_reports()
    page = Page(render_aggregate_html(aggregate, reports))
    assert page.all("img") == []
    assert "Screenshot step-003.png is not available." in page.visible


@pytest.mark.parametrize("name", ["<b>Eve</b>", "Eve & Co"])
def test_persona_names_are_escaped_everywhere(name: str) -> None:
    report = synthesize_session(
        transcript([turn(1)], name=name), status="completed", generated_at=NOW
    )
    run = {"run_id": RUN_ID, "task": "T", "target_url": SITE, "status": "completed"}
    aggregate = synthesize_aggregate(run, [report], generated_at=NOW)
    for html in (render_session_html(report), render_aggregate_html(aggregate)):
        assert name not in html
        assert Page(html).all("b") == []
        assert name in Page(html).visible


def test_the_timeline_says_what_each_action_was_given() -> None:
    turns = [
        turn(1, "navigate", url=SITE + "/shop"),
        turn(2, "type", ref="g2e3", text="rain jacket", submit=True),
        turn(3, "select_option", ref="g3e4", values=["Large"]),
        turn(4, "finish", success=True, summary="Ordered."),
    ]
    source = transcript(turns)
    report = synthesize_session(source, status="completed", generated_at=NOW)
    text = Page(render_session_html(report, transcript=source)).visible
    assert "Step 1: navigate https://shop.test/shop" in text
    assert "Step 2: type 'rain jacket', then Enter" in text
    assert "Step 3: select_option 'Large'" in text
    assert "Step 4: finish task done: Ordered." in text
