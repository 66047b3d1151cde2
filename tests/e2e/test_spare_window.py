"""The spare window in real Chromium: an idle device keeps one unfocused about:blank window ready,
the next unattended session is provisioned in its tab, capacity stays two, and disabling the
device closes it.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from ._skip import require_chromium
from ._stack import running_stack
from .conftest import (
    debugger_targets,
    device_row,
    eventually,
    idem,
    panel_request,
    unattended,
    window_of_tab,
    worker_eval,
)

if TYPE_CHECKING:
    from pathlib import Path

    from demo.chromium import Chromium

    from ._stack import Env

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OWN_TAB = "/own-tab"  # the page running_stack opens as a person's own tab
# The spare window's URL (extension/src/sessions/spareWindow.ts SPARE_URL).
SPARE_URL = "about:blank#understudy-spare"


async def spare_record(browser: Chromium) -> dict[str, Any] | None:
    """The spare the extension holds now (its chrome.storage.session record), if any."""
    record: dict[str, Any] | None = await worker_eval(
        browser, "chrome.storage.session.get('spareWindow').then(r => r.spareWindow ?? null)"
    )
    return record


async def tab_url(browser: Chromium, tab_id: int) -> str | None:
    url: str | None = await worker_eval(
        browser, f"chrome.tabs.get({tab_id}).then(t => t.url ?? t.pendingUrl, () => null)"
    )
    return url


async def ready_spare(env: Env, not_tab: int | None = None) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        record = await spare_record(env.browser)
        if record is None or record["tabId"] == not_tab:
            return None
        return record

    record: dict[str, Any] = await eventually(ready, what="a spare window being ready")
    return record


async def attached_tabs(browser: Chromium) -> list[int]:
    targets = await debugger_targets(browser)
    return sorted(t["tabId"] for t in targets if t["attached"] and "tabId" in t)


async def create(env: Env, origin: str) -> dict[str, Any]:
    created = await env.http.post(
        "/v1/sessions",
        json=unattended([origin], f"profile-{uuid.uuid4().hex}"),
        headers=idem(),
    )
    assert created.status_code == 201, created.text
    body: dict[str, Any] = created.json()
    return body


async def test_a_session_on_an_idle_device_gets_the_spare_window_which_disabling_closes(
    tmp_path: Path, extension_dist: Path
) -> None:
    async with running_stack(tmp_path, {}, extension_dist) as env:
        spare = await ready_spare(env)
        assert await tab_url(env.browser, spare["tabId"]) == SPARE_URL
        window = await window_of_tab(env.browser, spare["tabId"])
        assert window == {"focused": False, "tabs": [spare["tabId"]]}
        assert await attached_tabs(env.browser) == []
        row = await device_row(env.http)
        assert (row["capacity"], row["usedCapacity"]) == (2, 0)

        first = await create(env, env.site.origin)
        # The session runs in the spare's tab: no window was opened for it, and the session sees
        # plain about:blank (the spare's mark is gone).
        assert await attached_tabs(env.browser) == [spare["tabId"]]
        assert await tab_url(env.browser, spare["tabId"]) == "about:blank"
        assert (await device_row(env.http))["usedCapacity"] == 1

        # A new spare follows, outside the capacity: a second session still fits.
        second_spare = await ready_spare(env, not_tab=spare["tabId"])
        # Sessions sharing a device need disjoint origins.
        second = await create(env, "https://second.example")
        assert await attached_tabs(env.browser) == sorted([spare["tabId"], second_spare["tabId"]])
        row = await device_row(env.http)
        assert (row["capacity"], row["usedCapacity"]) == (2, 2)
        third_spare = await ready_spare(env, not_tab=second_spare["tabId"])
        assert third_spare["tabId"] not in await attached_tabs(env.browser)
        assert (await window_of_tab(env.browser, third_spare["tabId"]))["focused"] is False

        disabled = await panel_request(env.browser, {"type": "set_enabled", "enabled": False})
        assert disabled["ok"] is True, disabled

        async def spare_closed() -> bool:
            return await tab_url(env.browser, third_spare["tabId"]) is None

        await eventually(spare_closed, what="the spare window closing")
        assert await spare_record(env.browser) is None

        # The sessions' tabs close too; the person's own tab is all that is left.
        async def only_own_tab() -> list[str] | None:
            pages = [p.url for p in await env.browser.devtools.pages()]
            return pages if pages == [env.site.url(OWN_TAB)] else None

        await eventually(only_own_tab, what="only the person's own tab staying open")
        assert {first["deviceId"], second["deviceId"]} == {row["deviceId"]}
