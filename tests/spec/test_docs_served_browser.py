"""The references as their servers serve them: the search script runs under what they send.

The async Playwright API, in a module of its own: the sync API of `test_docs_browser.py` runs an
event loop of its own, which cannot share a module with asyncio tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from tests.e2e._skip import require_chromium

if TYPE_CHECKING:
    from pathlib import Path

require_chromium()
pytest.importorskip("playwright.async_api")

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/lib/chromium/chromium"


async def test_the_served_references_search_under_the_policy_their_servers_send(
    tmp_path: Path,
) -> None:
    """`/docs` of the backend and of Synthetic Users, as served, in Chromium."""
    from playwright.async_api import async_playwright
    from tests.backend.conftest import start_backend, stop_backend
    from tests.synthetic_users.api.conftest import running_api

    (tmp_path / "understudy").mkdir()
    (tmp_path / "su").mkdir()
    backend = await start_backend(tmp_path / "understudy")
    try:
        async with running_api(tmp_path / "su") as su, async_playwright() as p:
            urls = [
                f"{backend.url}/docs",
                f"{backend.url}/docs/frames.html",
                f"{str(su.client.base_url).rstrip('/')}/docs",
            ]
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            problems: list[str] = []
            try:
                for url in urls:
                    page = await browser.new_page()
                    problems.clear()
                    page.on(
                        "console", lambda m: problems.append(m.text) if m.type == "error" else None
                    )
                    page.on("pageerror", lambda e: problems.append(str(e)))
                    response = await page.goto(url)
                    assert response is not None and response.status == 200, url
                    # Whatever policy the server adds must leave the page's own script allowed.
                    policy = (await response.all_headers()).get("content-security-policy", "")
                    assert not policy or "'sha256-" in policy or "'unsafe-inline'" in policy, policy
                    await page.fill("#search", "no-such-thing-anywhere")
                    assert await page.locator("#search-empty").is_visible(), url
                    await page.fill("#search", "")
                    assert not await page.locator("#search-empty").is_visible(), url
                    assert problems == [], (url, problems)
                    await page.close()
            finally:
                await browser.close()
    finally:
        await stop_backend(backend)
