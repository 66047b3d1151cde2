"""Chromium killed and restarted on the same profile: a new browser epoch.

The live unattended session gets a fresh `about:blank` tab in an unfocused window with writes
blocked (`browser_epoch_changed`); tabs Chrome restores from the previous run, including the
session's old tab, stay open and uncontrolled, except the previous run's spare window, which the
extension recognises by its URL and closes.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from demo.chromium import continue_where_left_off, launch, restore_after_crash

from ._skip import require_chromium
from .conftest import (
    debugger_targets,
    enroll_extension,
    eventually,
    idem,
    panel_request,
    start_backend,
    stop_backend,
    unattended,
    wait_online,
    wait_status,
    window_of_tab,
    worker_eval,
)

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

    from demo.chromium import Chromium

    from .conftest import Site

require_chromium()

pytestmark = [pytest.mark.browser]

USER_PAGE = "/still-reading-this"
# The spare window's URL (extension/src/sessions/spareWindow.ts SPARE_URL).
SPARE_URL = "about:blank#understudy-spare"
# Chromium writes its session file a moment after a tab changes; a crash before that loses it.
SESSION_SAVE_S = 3


async def controlled_tabs(browser: Chromium) -> list[dict[str, Any]]:
    return [t for t in await debugger_targets(browser) if t["attached"] and "tabId" in t]


async def test_a_killed_browser_comes_back_with_a_fresh_blank_tab_and_writes_blocked(
    tmp_path: Path, extension_dist: Path, site: Site
) -> None:
    backend = await start_backend(tmp_path)
    profile = tmp_path / "profile"
    user_url = site.url(USER_PAGE)
    continue_where_left_off(profile)
    browser = await launch(profile, extension_dist, urls=[user_url])
    try:
        credential = backend.enroll()
        async with backend.client(backend.api_key()) as http:
            await enroll_extension(browser, backend, credential)
            await wait_online(http)
            before = await panel_request(browser, {"type": "get_status"})
            assert before["ok"] is True, before
            epoch_before = before["status"]["browserEpoch"]
            created = await http.post(
                "/v1/sessions", json=unattended([site.origin], "profile-restart"), headers=idem()
            )
            assert created.status_code == 201, created.text
            session_id = created.json()["sessionId"]
            assert len(await controlled_tabs(browser)) == 1
            # The session's first tab counts its documents from 1: short refs.
            assert (await read_command(http, session_id, {"name": "snapshot"}))["generation"] == 1
            await asyncio.sleep(SESSION_SAVE_S)

            browser.kill()
            restore_after_crash(profile)
            browser = await launch(profile, extension_dist)

            async def recovered() -> dict[str, Any] | None:
                body: dict[str, Any] = (await http.get(f"/v1/sessions/{session_id}")).json()
                return body if body.get("status") == "connected" and body["writesBlocked"] else None

            session = await eventually(recovered, 30, "the session recovering on the new epoch")
            assert session["writesBlockedReason"] == "browser_epoch_changed"
            status = (await panel_request(browser, {"type": "get_status"}))["status"]
            assert status["browserEpoch"] not in (None, epoch_before)
            assert [s["sessionId"] for s in status["sessions"]] == [session_id]

            # The session socket came back on the new epoch too (a fresh ticket, a new socket).
            session_sockets = [
                s for s in backend.recorder.seen if s.path == f"/v1/sessions/{session_id}/socket"
            ]
            assert len(session_sockets) >= 2
            # The tab provisioned again counts from the clock, so no ref of the first tab (g1e1
            # named its first element) is issued again: it is stale, never resolved.
            fresh_snapshot = await read_command(http, session_id, {"name": "snapshot"})
            assert fresh_snapshot["generation"] >= 1_000_000, fresh_snapshot
            old_ref = {"kind": "element_state", "ref": "g1e1", "state": "attached"}
            stale = await http.post(
                f"/v1/sessions/{session_id}/commands",
                json={
                    "commandId": str(uuid.uuid4()),
                    "command": {"name": "wait_for", "condition": old_ref},
                },
            )
            assert stale.json()["error"]["code"] == "stale_ref", stale.text
            controlled = await controlled_tabs(browser)
            assert [t["url"] for t in controlled] == ["about:blank"]
            fresh = controlled[0]
            assert (await window_of_tab(browser, fresh["tabId"]))["focused"] is False
            # Restored tabs: the person's page and the session's old tab; none is controlled. The
            # old epoch's spare window came back too, on its URL, and was closed; the new epoch's
            # spare is not among them.
            spare = await eventually(
                lambda: worker_eval(
                    browser, "chrome.storage.session.get('spareWindow').then(r => r.spareWindow)"
                ),
                what="the new epoch's spare window",
            )

            async def only_new_spare_marked() -> bool:
                marked = [t for t in await debugger_targets(browser) if t["url"] == SPARE_URL]
                return [t.get("tabId") for t in marked] == [spare["tabId"]]

            await eventually(only_new_spare_marked, what="the old epoch's restored spare closing")
            pages = [
                t
                for t in await debugger_targets(browser)
                if "tabId" in t and not t["url"].startswith("chrome-extension:")
            ]
            restored = [t for t in pages if t["id"] != fresh["id"] and t["tabId"] != spare["tabId"]]
            expected = [user_url, "about:blank"]
            assert sorted(t["url"] for t in restored) == sorted(expected), pages
            assert all(not t["attached"] for t in restored), restored

            await asyncio.sleep(2)  # long enough for a wrongly closing extension to have acted
            still = {t.id for t in await browser.devtools.pages()}
            assert {t["id"] for t in restored} <= still, "a restored tab was closed"

            # A tab that comes to show the spare's URL later (as a spare restored after start-up
            # would) and is no spare of this run is closed too.
            stray = await browser.devtools.open_page(SPARE_URL.replace("#", "%23"))

            async def stray_closed() -> bool:
                return stray.id not in {t.id for t in await browser.devtools.pages()}

            await eventually(stray_closed, what="a stray spare closing")
            assert spare["tabId"] in {t.get("tabId") for t in await debugger_targets(browser)}

            deleted = await http.delete(f"/v1/sessions/{session_id}")
            assert deleted.status_code in (200, 202), deleted.text
            await wait_status(http, session_id, 410)

            spare_target = next(t["id"] for t in pages if t["tabId"] == spare["tabId"])

            async def only_fresh_closed() -> bool:
                left = {t.id for t in await browser.devtools.pages()}
                return left == {t["id"] for t in restored} | {spare_target}

            await eventually(only_fresh_closed, what="the fresh tab closing, restored tabs staying")
    finally:
        browser.kill()
        await stop_backend(backend)


async def read_command(
    http: httpx.AsyncClient, session_id: str, command: dict[str, Any]
) -> dict[str, Any]:
    """A read that must succeed at once; its result."""
    response = await http.post(
        f"/v1/sessions/{session_id}/commands",
        json={"commandId": str(uuid.uuid4()), "command": command},
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "succeeded", response.text
    result: dict[str, Any] = response.json()["result"]
    return result
