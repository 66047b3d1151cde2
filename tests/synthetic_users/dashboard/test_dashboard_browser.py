"""The dashboard driven as a person would, in Debian's Chromium (Playwright), on a real stack.

Understudy, the demo shop and Synthetic Users run as processes (`study/_stack.py`); the
heuristic persona shops in its own fleet browser while this test's browser watches through the
dashboard: sign in, start a run (after a validation error), watch it progress, read the
aggregate report and one timeline, save a persona, store a credential (its password never comes
back), add a webhook endpoint (after the API's error beside its URL; its secret is shown once),
open its delivery log, and read the usage.
A forged cross-site form and a signed-out visit are refused. Every page passes axe-core (WCAG
2.1 AA rules) at 1280 and 390 px wide, the skip link works from the keyboard, and a screenshot
of each page at both widths is written to `$DASHBOARD_SCREENSHOTS_DIR` (default: a folder
under the test's tmp_path; the path is printed).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from demo.build import ROOT, build_extension
from study._stack import StudyStack
from tests.e2e._skip import require_chromium

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser, Page, ViewportSize

require_chromium()
playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/lib/chromium/chromium"
CREDENTIAL_PASSWORD = "correct-horse-battery-9"  # noqa: S105 - typed into the form, checked absent

AXE = ROOT / "synthetic-users" / "a11y" / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS: dict[str, ViewportSize] = {
    "wide": {"width": 1280, "height": 900},
    "narrow": {"width": 390, "height": 844},
}
TASK = "Buy a rain jacket and have it delivered to your home."
PERSONA = "Rosa Lindqvist"
TURN_BUDGET = 12
RUN_TIMEOUT_MS = 100_000


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StudyStack]:
    build_extension()
    running = StudyStack(tmp_path_factory.mktemp("dashboard"), slow_step_s=0.3, max_browsers=1)
    try:
        yield running.start()
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("DASHBOARD_SCREENSHOTS_DIR") or tmp_path / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\ndashboard screenshots: {folder}")
    return folder


def axe_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's WCAG 2.x A/AA violations of the page as it is now."""
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: scripts/bootstrap installs it (pnpm workspace package)")
    # Evaluated over the DevTools protocol, which the page's CSP (script-src 'self') allows.
    page.evaluate(AXE.read_text())
    result: dict[str, Any] = page.evaluate(
        "() => axe.run(document, {runOnly: {type: 'tag', values: "
        "['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}})"
    )
    # A check that ran: axe tried its rules on this page (a page it never saw passes nothing).
    assert len(result["passes"]) > 10, result["passes"]
    return [
        {"id": v["id"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"][:3]]}
        for v in result["violations"]
    ]


def tab_order(page: Page, until: str, limit: int = 80) -> list[str]:
    """What Tab focuses, from the top of the page, until the control named `until`."""
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); }")
    seen: list[str] = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        name: str = page.evaluate(
            "() => { const e = document.activeElement;"
            " return e.id || (e.textContent || '').trim(); }"
        )
        seen.append(name)
        if name == until:
            return seen
    raise AssertionError(f"Tab never reached {until!r}: {seen}")


def check_page(page: Page, shots: Path, name: str, problems: dict[str, Any]) -> None:
    """Screenshot the page at both widths and run axe at each."""
    for size in WIDTHS.values():
        page.set_viewport_size(size)
        page.screenshot(path=str(shots / f"{name}-{size['width']}.png"), full_page=True)
        found = axe_violations(page)
        if found:
            problems[f"{name} at {size['width']} px"] = found
        # Nothing is cut off sideways: the page never scrolls horizontally.
        overflow = page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        if overflow > 0:
            problems[f"{name} at {size['width']} px"] = f"scrolls sideways by {overflow} px"
    page.set_viewport_size(WIDTHS["wide"])


def test_a_person_signs_in_starts_a_run_watches_it_and_reads_the_reports(
    stack: StudyStack, browser: Browser, shots: Path
) -> None:
    expect = playwright_api.expect
    assert stack.shop is not None
    base = stack.url
    problems: dict[str, Any] = {}
    context = browser.new_context(base_url=base, viewport=WIDTHS["wide"])
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    # Signed out: any page sends the person to sign in, and back afterwards.
    page.goto("/dashboard/runs")
    assert re.search(r"/dashboard/sign-in\?next=/dashboard/runs$", page.url)
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    check_page(page, shots, "sign-in", problems)
    page.get_by_label("API key").fill("suk_wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#api_key-error")).to_contain_text("unknown or has been revoked")
    page.get_by_label("API key").fill(stack.api_key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")
    expect(page.get_by_text("No runs yet.")).to_be_visible()

    # The keyboard: the first Tab reaches the skip link, which moves focus to the content.
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Skip to main content")
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"

    # Start a run: first with the task forgotten, then as meant.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Start a run").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Start a run")
    # Every control is reachable by Tab, in reading order, before the button that sends them.
    fields = ["target_url", "task", "turn_budget"]
    fields += [f"inline-0-{n}" for n in ("name", "background", "goals", "digital_literacy")]
    fields += [f"inline-0-{n}" for n in ("patience", "device", "locale")]
    order = tab_order(page, "Start the run")
    assert order[0] == "Skip to main content"
    assert [name for name in order if name in fields] == fields
    page.get_by_label("Target URL").fill(stack.shop.url("/"))
    page.get_by_label("Turn budget").fill(str(TURN_BUDGET))
    page.get_by_label("Name").fill(PERSONA)
    page.get_by_label("Digital literacy").select_option("low")
    page.get_by_label("Locale").fill("en-GB")
    page.get_by_role("button", name="Start the run").click()
    expect(page.locator("#task-error")).to_contain_text("at least 1 character")
    expect(page.locator("#error-summary")).to_be_focused()  # read first, links to each field
    page.get_by_role("link", name=re.compile("^Task: ")).click()
    expect(page.get_by_label("Task")).to_be_focused()
    expect(page.get_by_role("alert")).to_contain_text("Task: String should have at least 1")
    expect(page.get_by_label("Name")).to_have_value(PERSONA)  # what was typed is kept
    check_page(page, shots, "start-a-run-with-error", problems)
    page.get_by_label("Task").fill(TASK)
    page.get_by_role("button", name="Start the run").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(TASK)
    run_url = page.url
    run_id = run_url.rsplit("/", 1)[1]

    # The live view: the persona's turns go up and its reactions appear, without a reload.
    card = page.locator(".persona-live")
    expect(card).to_contain_text(PERSONA)
    expect(card).to_contain_text(re.compile(r"turn [1-9]\d* of 12"), timeout=60_000)
    page.evaluate("() => { window.__sameDocument = true; }")
    expect(card.locator(".reactions-live li").first).to_be_visible(timeout=60_000)
    expect(card.locator("img")).to_have_attribute("alt", re.compile(PERSONA))
    check_page(page, shots, "live-view", problems)
    report_link = page.get_by_role("link", name="Read the aggregate report")
    expect(report_link).to_be_visible(timeout=RUN_TIMEOUT_MS)
    # Progress came by polling: the page the person opened is still the same document.
    assert page.evaluate("() => window.__sameDocument === true")
    expect(page.get_by_role("status").first).to_contain_text("completed")
    check_page(page, shots, "live-view-done", problems)

    # The aggregate report, inside the dashboard.
    report_link.click()
    expect(page.get_by_role("heading", level=1)).to_have_text(TASK)
    expect(page.get_by_text(re.compile(r"Task success: [01] of 1 persona"))).to_be_visible()
    expect(
        page.get_by_role("heading", name="Issues, by how many personas met them")
    ).to_be_visible()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    assert re.search(r"Usability study: .* · Aggregate report · Synthetic Users", page.title())
    check_page(page, shots, "aggregate-report", problems)

    # One persona's timeline.
    page.get_by_role("link", name=PERSONA).first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"{PERSONA}: {TASK}")
    expect(page.get_by_role("heading", name="Step by step")).to_be_visible()
    expect(page.locator("#step-1")).to_contain_text("Step 1")
    expect(page.locator(".timeline img").first).to_have_attribute("src", re.compile("/dashboard/"))
    check_page(page, shots, "persona-timeline", problems)

    # The runs list shows the run, done.
    page.get_by_role("link", name="Runs", exact=True).click()
    row = page.locator("tr", has_text=TASK)
    expect(row).to_contain_text("completed")
    expect(row).to_contain_text(PERSONA)
    check_page(page, shots, "runs", problems)

    # Personas: save one.
    page.get_by_role("link", name="Personas").click()
    page.get_by_label("Name").fill("Sam Okafor")
    page.get_by_label("Device").select_option("mobile")
    page.get_by_role("button", name="Save persona").click()
    expect(page.get_by_role("status")).to_have_text("Persona saved.")
    expect(page.get_by_role("heading", name="Sam Okafor")).to_be_visible()
    check_page(page, shots, "personas", problems)

    # Credentials: one stored; its password never comes back to the browser.
    nav = page.get_by_role("navigation", name="Main")
    nav.get_by_role("link", name="Credentials").click()
    page.get_by_role("textbox", name="Name (required)", exact=True).fill("Test shopper")
    page.get_by_role("textbox", name="User name (required)").fill("rosa@example.test")
    page.get_by_label("Password").fill(CREDENTIAL_PASSWORD)
    page.get_by_role("button", name="Store credential").click()
    expect(page.locator("main")).to_contain_text("Test shopper")
    assert CREDENTIAL_PASSWORD not in page.content()
    check_page(page, shots, "credentials", problems)

    # Webhooks: the API's error beside the URL, then an endpoint, its secret shown once.
    nav.get_by_role("link", name="Webhooks").click()
    page.get_by_label("Endpoint URL").fill("http://hooks.example.com/su")
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.locator("#url-error")).to_contain_text("must use https")
    page.get_by_label("Endpoint URL").fill("https://hooks.example.com/su")
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.get_by_label("Signing secret")).to_have_value(re.compile(r"^whsec_"))
    check_page(page, shots, "webhooks", problems)
    page.get_by_role("link", name=re.compile(r"^Delivery log")).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Delivery log")
    expect(page.get_by_text("No deliveries yet")).to_be_visible()
    assert "whsec_" not in page.content()
    check_page(page, shots, "webhook-deliveries", problems)

    # Usage: the run's one persona session, counted.
    nav.get_by_role("link", name="Usage").click()
    expect(page.locator(".totals dd").first).to_have_text("1")
    expect(page.locator("table.usage tbody tr")).to_contain_text(PERSONA)
    check_page(page, shots, "usage", problems)

    # A forged form on another site, posting into the signed-in session, is refused.
    forged = (
        f'<form id="f" method="post" action="{base}/dashboard/personas">'
        '<input name="name" value="Forged"></form>'
        "<script>document.getElementById('f').submit()</script>"
    )
    page.route(
        "http://attacker.test/",
        lambda route: route.fulfill(status=200, content_type="text/html", body=forged),
    )
    with page.expect_navigation(url=f"{base}/dashboard/personas"):
        page.goto("http://attacker.test/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Request refused")
    check_page(page, shots, "csrf-refused", problems)
    with stack.client() as http:
        names = [p["name"] for p in http.get("/personas").json()["personas"]]
    assert names == ["Sam Okafor"]

    # Signed out (a browser without the cookie): the report is not shown.
    stranger = browser.new_context(base_url=base)
    other = stranger.new_page()
    other.goto(f"/dashboard/runs/{run_id}/report")
    expect(other.get_by_role("heading", level=1)).to_have_text("Sign in")
    assert TASK not in other.content()
    stranger.close()

    # Sign out ends the session.
    page.goto(run_url)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    page.goto(run_url)
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    context.close()

    assert not problems, json.dumps(problems, indent=2)
    assert not [e for e in errors if "Content Security Policy" in e], errors
    written = sorted(p.name for p in shots.glob("*.png"))
    assert len(written) == 2 * 13, written  # thirteen pages, two widths
