"""One enrolled Chromium profile against the backend: device health, unattended and attended
sessions, capacity, and where the device credential may travel.

The tests of this module share one backend and one browser (launching Chromium is the slow part);
every test leaves no session behind, so they do not depend on each other's order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from demo.chromium import launch

from ._skip import require_chromium
from .conftest import (
    DEVICE_ID,
    EXTENSION_ORIGIN,
    debugger_targets,
    device_row,
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
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import httpx

    from demo.chromium import Chromium

    from .conftest import Backend, Site

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

USER_PAGE = "/a-persons-page"


@dataclass
class Env:
    backend: Backend
    browser: Chromium
    site: Site
    http: httpx.AsyncClient
    credential: str
    online_at: float  # time.monotonic() when the device was first seen online
    first_seen_at: str  # its lastSeenAt then


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, extension_dist: Path, site: Site
) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("shared")
    backend = await start_backend(root)
    browser = await launch(root / "profile", extension_dist, urls=[site.url(USER_PAGE)])
    try:
        credential = backend.enroll()
        async with backend.client(backend.api_key()) as http:
            await enroll_extension(browser, backend, credential)
            row = await wait_online(http)
            yield Env(backend, browser, site, http, credential, time.monotonic(), row["lastSeenAt"])
    finally:
        browser.kill()
        await stop_backend(backend)


async def page_ids(env: Env) -> set[str]:
    return {t.id for t in await env.browser.devtools.pages()}


async def tab_of_target(env: Env, target_id: str) -> dict[str, Any]:
    rows = [t for t in await debugger_targets(env.browser) if t["id"] == target_id]
    assert rows, f"target {target_id} is not known to chrome.debugger"
    return rows[0]


async def test_device_comes_online_with_both_protocols_and_safe_writes(env: Env) -> None:
    row = await device_row(env.http)
    assert row["online"] is True
    assert row["protocolVersions"] == [1, 2]
    assert "safe_write_v2" in row["capabilities"]
    assert {"unattended_v1", "attended_v1"} <= set(row["capabilities"])
    assert (row["capacity"], row["usedCapacity"]) == (2, 0)


async def test_unattended_session_opens_a_blank_tab_in_an_unfocused_window(env: Env) -> None:
    created = await env.http.post(
        "/v1/sessions", json=unattended([env.site.origin], "profile-one"), headers=idem()
    )
    assert created.status_code == 201, created.text
    session = created.json()
    assert (session["status"], session["deviceId"]) == ("connected", DEVICE_ID)

    # The tab is the extension's spare window's (or a new window's): the one attached tab.
    controlled = [t for t in await debugger_targets(env.browser) if t["attached"] and "tabId" in t]
    assert [t["url"] for t in controlled] == ["about:blank"], controlled
    tab = controlled[0]
    window = await window_of_tab(env.browser, tab["tabId"])
    assert window == {"focused": False, "tabs": [tab["tabId"]]}

    deleted = await env.http.delete(f"/v1/sessions/{session['sessionId']}")
    assert deleted.status_code in (200, 202), deleted.text
    tombstone = await wait_status(env.http, session["sessionId"], 410)
    assert (tombstone["status"], tombstone["reason"]) == ("closed", "deleted")

    async def closed() -> bool:
        return tab["id"] not in await page_ids(env)

    await eventually(closed, what="the session's tab closing")
    assert (await device_row(env.http))["usedCapacity"] == 0


async def test_a_third_session_on_one_device_is_refused_for_capacity(env: Env) -> None:
    ids = []
    for n in (1, 2):
        created = await env.http.post(
            "/v1/sessions",
            json=unattended([f"http://127.0.0.1:{9100 + n}"], f"profile-{n}"),
            headers=idem(),
        )
        assert created.status_code == 201, created.text
        ids.append(created.json()["sessionId"])
    third = await env.http.post(
        "/v1/sessions", json=unattended(["http://127.0.0.1:9103"], "profile-3"), headers=idem()
    )
    assert third.status_code == 429, third.text
    assert third.json()["code"] == "capacity_exhausted"
    assert int(third.headers["retry-after"]) > 0
    # Two controlled tabs; the extension's spare window, open beside them, is no capacity.
    controlled = [t for t in await debugger_targets(env.browser) if t["attached"] and "tabId" in t]
    assert len(controlled) == 2

    for session_id in ids:
        assert (await env.http.delete(f"/v1/sessions/{session_id}")).status_code in (200, 202)
    for session_id in ids:
        await wait_status(env.http, session_id, 410)

    async def closed() -> bool:
        return not {t["id"] for t in controlled} & await page_ids(env)

    await eventually(closed, what="both session tabs closing")


async def test_attended_session_attaches_a_persons_tab_and_delete_leaves_it_open(
    env: Env,
) -> None:
    user_url = env.site.url(USER_PAGE)
    user_tab = next(t for t in await env.browser.devtools.pages() if t.url == user_url)
    created = await env.http.post("/v1/sessions")
    assert created.status_code == 200, created.text
    session = created.json()
    assert (session["mode"], session["status"]) == ("attended", "awaiting_attach")

    # The panel's attach path: an extension page sends `attach_tab` for the picked tab.
    tab_id = (await tab_of_target(env, user_tab.id))["tabId"]
    answer = await panel_request(
        env.browser, {"type": "attach_tab", "sessionId": session["sessionId"], "tabId": tab_id}
    )
    assert answer["ok"] is True, answer
    connected = await wait_status(env.http, session["sessionId"], 200)
    assert (connected["status"], connected["deviceId"]) == ("connected", DEVICE_ID)
    assert (await tab_of_target(env, user_tab.id))["attached"] is True
    assert (await device_row(env.http))["usedCapacity"] == 1

    deleted = await env.http.delete(f"/v1/sessions/{session['sessionId']}")
    assert deleted.status_code in (200, 202), deleted.text
    tombstone = await wait_status(env.http, session["sessionId"], 410)
    assert tombstone["status"] == "closed"

    async def detached() -> bool:
        return (await tab_of_target(env, user_tab.id))["attached"] is False

    await eventually(detached, what="CDP detaching from the person's tab")
    still = [t for t in await env.browser.devtools.pages() if t.id == user_tab.id]
    assert [t.url for t in still] == [user_url], "the person's tab was closed or navigated"


async def test_a_dropped_session_socket_comes_back_through_a_ticket_request(env: Env) -> None:
    created = await env.http.post(
        "/v1/sessions", json=unattended([env.site.origin], "profile-drop"), headers=idem()
    )
    assert created.status_code == 201, created.text
    session_id = created.json()["sessionId"]
    agent = env.backend.services.session_agent(session_id)

    def session_sockets() -> int:
        path = f"/v1/sessions/{session_id}/socket"
        return sum(1 for s in env.backend.recorder.seen if s.path == path)

    async def said_hello() -> bool:
        return agent.available

    await eventually(said_hello, what="the session socket's hello")
    device_sockets = sum(1 for s in env.backend.recorder.seen if s.path == "/v1/device/socket")
    assert session_sockets() == 1

    await agent.shutdown()  # the server drops only the session socket

    await eventually(said_hello, what="a new session socket after a ticket_request")
    assert session_sockets() == 2
    assert sum(1 for s in env.backend.recorder.seen if s.path == "/v1/device/socket") == (
        device_sockets
    ), "the device socket should have stayed up"

    assert (await env.http.delete(f"/v1/sessions/{session_id}")).status_code in (200, 202)
    await wait_status(env.http, session_id, 410)


async def test_the_device_credential_never_appears_in_a_url(env: Env) -> None:
    # One full session, so device and session sockets and both ticket kinds are on record.
    created = await env.http.post(
        "/v1/sessions", json=unattended([env.site.origin], "profile-url"), headers=idem()
    )
    assert created.status_code == 201, created.text
    session_id = created.json()["sessionId"]
    agent = env.backend.services.session_agent(session_id)

    async def said_hello() -> bool:
        return agent.available

    # 201 answers once the tab is provisioned; the session socket follows a moment later.
    await eventually(said_hello, what="the session socket's hello")
    assert (await env.http.delete(f"/v1/sessions/{session_id}")).status_code in (200, 202)
    await wait_status(env.http, session_id, 410)

    seen = env.backend.recorder.seen
    sockets = [s for s in seen if s.kind == "websocket"]
    assert any(s.path == "/v1/device/socket" for s in sockets)
    assert any(s.path == f"/v1/sessions/{session_id}/socket" for s in sockets)
    assert all(s.query.startswith("ticket=") for s in sockets)
    assert all(s.headers.get("origin") == EXTENSION_ORIGIN for s in sockets)
    # The credential does travel, and only, in the Authorization header of connect-ticket calls.
    carriers = [s for s in seen if env.credential in " ".join(s.headers.values())]
    assert carriers, "the recorder saw no connect-ticket request from the extension"
    assert {(s.method, s.path) for s in carriers} == {("POST", "/v1/device/connect-ticket")}
    assert all(s.headers["authorization"] == f"Bearer {env.credential}" for s in carriers)
    for s in seen:
        assert env.credential not in s.target
    for path in env.site.paths:
        assert env.credential not in path
    for target in await env.browser.devtools.targets():
        assert env.credential not in target.url


async def test_heartbeats_keep_the_device_online(env: Env) -> None:
    # Heartbeats come every 22 s; wait for one after the hello that brought the device online.
    async def beaten() -> dict[str, Any] | None:
        row = await device_row(env.http)
        return row if row["lastSeenAt"] != env.first_seen_at else None

    remaining = max(0.0, 22 - (time.monotonic() - env.online_at))
    row = await eventually(beaten, remaining + 10, "a heartbeat moving lastSeenAt")
    assert row["online"] is True
    device_sockets = [s for s in env.backend.recorder.seen if s.path == "/v1/device/socket"]
    assert len(device_sockets) == 1, "the device socket reconnected instead of staying up"
