"""The references' sidebar search works in Debian's Chromium under the page's own policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from tests.e2e._skip import require_chromium

from codegen._bundle import ROOT

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser, Page

require_chromium()
playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/lib/chromium/chromium"
PAGES = ("api.html", "frames.html", "synthetic-users-api.html")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def open_page(browser: Browser, name: str) -> tuple[Page, list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto((ROOT / "docs" / "reference" / name).as_uri())
    return page, problems


def visible_links(page: Page) -> list[str]:
    return [
        str(a.get_attribute("href"))
        for a in page.locator("#sidebar li[data-q]:not(.group) > a").all()
        if a.is_visible()
    ]


@pytest.mark.parametrize("name", PAGES)
def test_search_runs_under_the_page_policy_and_filters_the_sidebar(
    browser: Browser, name: str
) -> None:
    page, problems = open_page(browser, name)
    everything = visible_links(page)
    assert len(everything) > 10
    page.keyboard.press("/")  # focuses the search box
    page.keyboard.type("no-such-thing-anywhere")
    assert visible_links(page) == []
    assert page.locator("#search-empty").is_visible()
    page.fill("#search", "")
    assert visible_links(page) == everything
    # No policy violation, no script error: the hash in the page allows its script.
    assert problems == []
    page.close()


def test_searching_an_operation_or_a_schema_and_pressing_enter_jumps_there(
    browser: Browser,
) -> None:
    page, problems = open_page(browser, "api.html")
    page.fill("#search", "enroll device")
    assert "#op-enrollDevice" in visible_links(page)
    assert all("nroll" in link for link in visible_links(page) if link.startswith("#op-"))
    page.press("#search", "Enter")
    assert page.evaluate("location.hash") == "#op-enrollDevice"
    page.fill("#search", "commandrequest")
    assert visible_links(page) == ["#schema-CommandRequest"]
    # The sidebar stays in view while the page scrolls far down.
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    top = page.evaluate("document.getElementById('sidebar').getBoundingClientRect().top")
    assert abs(top) < 1  # sub-pixel rounding aside, pinned to the top of the viewport
    assert page.locator("#search").is_visible()
    assert problems == []
    page.close()
