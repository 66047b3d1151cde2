"""Commands end to end: the real extension in real Chromium, driven only through the HTTP API.

An agent's view: create a session, navigate, take snapshots, click, type, fill, sign in with a
vaulted password, read the signed-in page. Then the containment proofs: navigations to an origin
the session does not allow (by command, link, script and server redirect) and `window.open`
popups reach no server; dialogs are answered and reported; two sessions run at once and a third
is refused; a person's tab is attached, driven and left open; a person's own tab is never listed
or touched; the extension's service worker is stopped mid-session and recovers.

Nothing attaches to a controlled tab: the tests only look at the browser through DevTools' target
list and read-only `chrome.*` queries in the extension's service worker. The module shares one
backend and one browser; every test deletes the sessions it created.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import pytest_asyncio

from demo.cdp import call
from demo.chromium import launch
from understudy._store import vault

from ._agent import Agent, node, ref, shows
from ._pages import USERNAME, WELCOME, WRONG_LOGIN, site_routes, slow
from ._skip import require_chromium
from .conftest import (
    EXTENSION_ORIGIN,
    TENANT,
    Site,
    debugger_targets,
    device_row,
    enroll_extension,
    eventually,
    idem,
    panel_request,
    spare_ready,
    start_backend,
    stop_backend,
    unattended,
    wait_online,
    wait_status,
    worker_eval,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from demo.chromium import Chromium

    from .conftest import Backend

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

SECRET_NAME = "login-password"  # noqa: S105 - a vault entry name, not a password
OWN_TAB = "/own-tab"
READING_LIST = "/reading-list"
# Long enough for a navigation or popup the guards failed to stop to reach its server.
SETTLE_S = 1.0


@dataclass
class Env:
    backend: Backend
    browser: Chromium
    http: httpx.AsyncClient
    site: Site  # the origin sessions allow
    other: Site  # a second allowed origin, for a concurrent session
    blocked: Site  # an origin no session allows: it must never see a request
    password: str
    telemetry: Path
    agent: Agent
    live: set[str] = field(default_factory=set)  # unattended sessions not yet deleted


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory, extension_dist: Path) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("commands")
    password = f"pw-{secrets.token_urlsafe(18)}"
    blocked = Site()
    site = Site(site_routes(password, blocked.origin))
    other = Site({"/slow": slow})
    telemetry = root / "telemetry.jsonl"
    backend = await start_backend(root, {"UNDERSTUDY_TELEMETRY_PATH": str(telemetry)})
    browser = await launch(root / "profile", extension_dist, urls=[site.url(OWN_TAB)])
    try:
        with backend.services.storage.transaction() as tx:
            vault.put(tx.vault, backend.services.keys, TENANT, SECRET_NAME, password, 0.0)
        credential = backend.enroll()
        async with backend.client(backend.api_key()) as http:
            await enroll_extension(browser, backend, credential)
            await wait_online(http)
            yield Env(
                backend, browser, http, site, other, blocked, password, telemetry, Agent(http)
            )
    finally:
        browser.kill()
        await stop_backend(backend)
        for running in (site, other, blocked):
            running.close()


@contextlib.asynccontextmanager
async def unattended_session(
    env: Env, origins: list[str] | None = None, profile: str | None = None
) -> AsyncIterator[str]:
    """A connected unattended session, deleted (and its tab closed) afterwards."""
    created = await env.http.post(
        "/v1/sessions",
        json=unattended(origins or [env.site.origin], profile or f"profile-{uuid.uuid4().hex}"),
        headers=idem(),
    )
    assert created.status_code == 201, created.text
    session_id: str = created.json()["sessionId"]
    await spare_ready(env.browser)
    env.live.add(session_id)
    try:
        yield session_id
    finally:
        await end_session(env, session_id)


async def end_session(env: Env, session_id: str) -> None:
    """DELETE, then wait for the tombstone and for the device to free the session's slot."""
    deleted = await env.http.delete(f"/v1/sessions/{session_id}")
    assert deleted.status_code in (200, 202), deleted.text
    await wait_status(env.http, session_id, 410)
    env.live.discard(session_id)

    async def released() -> bool:
        return bool((await device_row(env.http))["usedCapacity"] == len(env.live))

    await eventually(released, what="the device releasing the session's capacity")


def health_total(env: Env, counter: str) -> int:
    """The extension's content-free health counter, summed over the backend's telemetry."""
    total = 0
    for line in env.telemetry.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "device.health" and event.get("reason") == counter:
            total += int(event.get("count", 0))
    return total


# -- an agent signs in -----------------------------------------------------------------------------


async def test_an_agent_signs_in_with_a_vaulted_password_that_it_never_sees(env: Env) -> None:
    async with unattended_session(env) as session_id:
        login_url = env.site.url("/login")
        form = await env.agent.open_page(session_id, login_url)
        assert (form["url"], form["title"]) == (login_url, "Sign in")

        # A first try with a wrong password: fill, fill, click.
        await env.agent.run(
            session_id,
            {"name": "fill", "ref": ref(form, "textbox", "Username"), "value": USERNAME},
        )
        await env.agent.run(
            session_id,
            {"name": "fill", "ref": ref(form, "textbox", "Password"), "value": "wrong-password"},
        )
        await env.agent.run(session_id, {"name": "click", "ref": ref(form, "button", "Sign in")})
        await env.agent.wait_text(session_id, WRONG_LOGIN)
        attempts = env.site.hits_on("/login", "POST")
        assert [h.form for h in attempts] == [{"username": USERNAME, "password": "wrong-password"}]

        # The new document retired the old refs.
        stale = await env.agent.failure(
            session_id, {"name": "click", "ref": ref(form, "button", "Sign in")}
        )
        assert stale["code"] == "stale_ref", stale

        retry = await env.agent.snapshot(session_id)
        assert retry["generation"] > form["generation"]
        assert shows(retry, WRONG_LOGIN)
        await env.agent.run(
            session_id,
            {"name": "type", "ref": ref(retry, "textbox", "Username"), "text": USERNAME},
        )
        filled = await env.agent.run(
            session_id,
            {
                "name": "fill_secret",
                "ref": ref(retry, "textbox", "Password"),
                "secretRef": f"vault:{SECRET_NAME}",
            },
        )
        assert filled["url"] == env.site.url("/login?error=1")
        typed = await env.agent.snapshot(session_id)
        assert node(typed, "textbox", "Username").get("value") == USERNAME
        assert "value" not in node(typed, "textbox", "Password"), "a password field's value leaked"

        await env.agent.run(session_id, {"name": "click", "ref": ref(typed, "button", "Sign in")})
        await env.agent.wait_text(session_id, WELCOME)
        account = await env.agent.snapshot(session_id)
        assert account["url"] == env.site.url("/account")
        assert (account["title"], shows(account, "You are signed in.")) == ("Your account", True)
        assert node(account, "heading", WELCOME)

        # The site received the vaulted password, in the one form POST that signed in.
        attempts = env.site.hits_on("/login", "POST")
        assert [h.form for h in attempts][1:] == [{"username": USERNAME, "password": env.password}]
        tabs = await env.agent.run(session_id, {"name": "get_tabs"})
        assert [t["url"] for t in tabs["tabs"]] == [env.site.url("/account")]

        # The plaintext is nowhere else: command answers, session status, backend storage,
        # telemetry, and the extension's storage.
        status = await env.http.get(f"/v1/sessions/{session_id}")
        secret = env.password.encode()
        assert all(env.password not in text for text in [*env.agent.transcript, status.text])
        stored = [p for p in env.backend.settings.data_dir.rglob("*") if p.is_file()]
        assert "understudy.db" in {p.name for p in stored}, stored
        # The scan sees plain content (the session's id is in there), but never the password.
        assert any(session_id.encode() in p.read_bytes() for p in stored)
        assert [p.name for p in stored if secret in p.read_bytes()] == []
        assert env.telemetry.read_text(), "the telemetry sink wrote nothing"
        assert secret not in env.telemetry.read_bytes()
        storage = await worker_eval(
            env.browser,
            "Promise.all([chrome.storage.session.get(null), chrome.storage.local.get(null)])"
            ".then(JSON.stringify)",
        )
        assert session_id in storage, "not the extension's storage of this session"
        assert env.password not in storage


# -- containment -----------------------------------------------------------------------------------


async def test_navigation_to_a_disallowed_origin_never_reaches_it(env: Env) -> None:
    async with unattended_session(env) as session_id:
        # By command: refused before anything runs, and previewed as not allowed.
        target = env.blocked.url("/by-command")
        preview = await env.agent.run(session_id, {"name": "navigate", "url": target}, dry_run=True)
        assert preview["preview"] == {"navigatesTo": target, "allowed": False}
        refused = await env.agent.failure(session_id, {"name": "navigate", "url": target})
        assert refused["code"] == "origin_not_allowed", refused

        # A server redirect behind an allowed URL: stopped at the redirect hop.
        redirected = await env.agent.failure(
            session_id, {"name": "navigate", "url": env.site.url("/redirect-away")}
        )
        assert redirected["code"] == "origin_not_allowed", redirected
        assert len(env.site.hits_on("/redirect-away")) == 1

        # A control: the same kind of link click to an allowed page does navigate.
        links = await env.agent.open_page(session_id, env.site.url("/links"))
        await env.agent.run(
            session_id, {"name": "click", "ref": ref(links, "link", "Stay on this site")}
        )
        await env.agent.wait_text(session_id, "Still on the allowed site")
        assert len(env.site.hits_on("/landing")) == 1

        for role, name in (
            ("link", "Leave by link"),
            ("button", "Leave by script"),
            ("link", "Leave by redirect"),
        ):
            links = await env.agent.open_page(session_id, env.site.url("/links"))
            blocked_before = health_total(env, "navigationsBlocked")
            clicked = await env.agent.run(
                session_id, {"name": "click", "ref": ref(links, role, name)}
            )
            # The click says what it made the page try; the tab then shows the block page.
            [stopped] = clicked["blockedNavigations"]
            assert (stopped["kind"], stopped["origin"]) == ("navigation", env.blocked.origin)

            # What the agent sees: Chromium's page for a request the client blocked.
            await env.agent.wait_text(session_id, "ERR_BLOCKED_BY_CLIENT")

            async def reported(before: int = blocked_before) -> bool:
                return health_total(env, "navigationsBlocked") > before

            await eventually(reported, what=f"the extension reporting {name!r} blocked")
        assert len(env.site.hits_on("/redirect-away")) == 2, "the redirect was not followed"
        await asyncio.sleep(SETTLE_S)
        assert env.blocked.hits == [], [h.path for h in env.blocked.hits]


async def test_window_open_popups_are_closed_before_their_first_request(env: Env) -> None:
    async with unattended_session(env) as session_id:
        popups = await env.agent.open_page(session_id, env.site.url("/popups"))
        pages_before = {t.id for t in await env.browser.devtools.pages()}
        closed_before = health_total(env, "popupsClosed")

        await env.agent.run(
            session_id, {"name": "click", "ref": ref(popups, "button", "Open a popup here")}
        )
        await env.agent.wait_text(session_id, "popup 1 opened")
        await env.agent.run(
            session_id,
            {"name": "click", "ref": ref(popups, "button", "Open a popup elsewhere")},
        )
        await env.agent.wait_text(session_id, "popup 2 opened")

        async def both_closed() -> bool:
            return health_total(env, "popupsClosed") >= closed_before + 2

        await eventually(both_closed, what="the extension reporting two popups closed")

        async def no_new_page() -> bool:
            return {t.id for t in await env.browser.devtools.pages()} <= pages_before

        await eventually(no_new_page, what="the popups' tabs disappearing")
        await asyncio.sleep(SETTLE_S)
        assert env.site.hits_on("/popup-target") == [], "a popup reached the allowed site"
        assert env.blocked.hits == [], "a popup reached the other origin"
        tabs = await env.agent.run(session_id, {"name": "get_tabs"})
        assert [t["url"] for t in tabs["tabs"]] == [env.site.url("/popups")]


# -- dialogs ---------------------------------------------------------------------------------------


async def test_alert_confirm_and_prompt_are_answered_and_reported(env: Env) -> None:
    async with unattended_session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/dialogs"))
        await env.agent.run(session_id, {"name": "click", "ref": ref(page, "button", "Alert")})
        await env.agent.wait_text(session_id, "alert returned")
        await env.agent.run(session_id, {"name": "click", "ref": ref(page, "button", "Confirm")})
        await env.agent.wait_text(session_id, "confirm returned false")
        await env.agent.run(session_id, {"name": "click", "ref": ref(page, "button", "Prompt")})
        await env.agent.wait_text(session_id, "prompt returned null")

        async def reported() -> list[dict[str, Any]] | None:
            body = (await env.http.get(f"/v1/sessions/{session_id}")).json()
            dialogs: list[dict[str, Any]] = body["dialogs"]
            return dialogs if len(dialogs) == 3 else None

        dialogs = await eventually(reported, what="three dialogs in the session status")
        seen = [(d["dialogType"], d["message"], d["accepted"], d["delivery"]) for d in dialogs]
        assert seen == [
            ("prompt", "Your name?", False, "delivered"),
            ("confirm", "Proceed?", False, "delivered"),
            ("alert", "Heads up", True, "delivered"),
        ]
        assert dialogs[0]["defaultPrompt"] == "anon"
        assert len({d["dialogId"] for d in dialogs}) == 3


# -- capacity and concurrency ----------------------------------------------------------------------


async def test_two_sessions_run_commands_at_once_and_a_third_is_refused(env: Env) -> None:
    async with (
        unattended_session(env, [env.site.origin]) as first,
        unattended_session(env, [env.other.origin]) as second,
    ):
        third = await env.http.post(
            "/v1/sessions", json=unattended([env.blocked.origin], "profile-third"), headers=idem()
        )
        assert third.status_code == 429, third.text
        assert third.json()["code"] == "capacity_exhausted"

        hellos = await asyncio.gather(
            env.agent.run(first, {"name": "hello"}), env.agent.run(second, {"name": "hello"})
        )
        assert hellos[0]["tab"]["tabId"] != hellos[1]["tab"]["tabId"]

        delay_ms = 1500
        done = await asyncio.gather(
            env.agent.run(first, {"name": "navigate", "url": env.site.url(f"/slow?ms={delay_ms}")}),
            env.agent.run(
                second, {"name": "navigate", "url": env.other.url(f"/slow?ms={delay_ms}")}
            ),
        )
        assert [d["title"] for d in done] == ["Slow page", "Slow page"]
        (a,) = [h for h in env.site.hits_on("/slow") if h.query == {"ms": str(delay_ms)}]
        (b,) = env.other.hits_on("/slow")
        assert a.finished is not None and b.finished is not None
        # Both servers held a request at the same moment: the two tabs ran at once (one after
        # the other, each would have waited for the other's 1.5 s answer).
        assert a.started < b.finished and b.started < a.finished, (a, b)

        # Each session's slot is its own: the first is busy while the second answers.
        waiting = asyncio.ensure_future(
            env.agent.submit(
                first,
                {
                    "name": "wait_for",
                    "condition": {"kind": "text_appears", "text": "never there"},
                    "timeoutMs": 2000,
                },
            )
        )
        await asyncio.sleep(0.5)
        assert (await env.agent.run(second, {"name": "get_tabs"}))["tabs"][0]["url"].startswith(
            env.other.origin
        )
        busy = await env.agent.submit(first, {"name": "get_tabs"})
        assert busy.status_code == 429 and busy.json()["code"] == "session_busy", busy.text
        finished = await waiting
        assert finished.status_code == 200 and finished.json()["result"]["matched"] is False


# -- a person's tabs -------------------------------------------------------------------------------


async def test_an_attended_tab_is_driven_by_commands_and_left_open_after_delete(env: Env) -> None:
    person = await env.browser.devtools.open_page(env.site.url(READING_LIST))

    async def tab_of_person() -> dict[str, Any] | None:
        rows = [t for t in await debugger_targets(env.browser) if t["id"] == person.id]
        return rows[0] if rows and rows[0]["url"] == env.site.url(READING_LIST) else None

    tab = await eventually(tab_of_person, what="the person's tab loading")
    try:
        created = await env.http.post("/v1/sessions")
        assert created.status_code == 200, created.text
        session_id = created.json()["sessionId"]
        answer = await panel_request(
            env.browser, {"type": "attach_tab", "sessionId": session_id, "tabId": tab["tabId"]}
        )
        assert answer["ok"] is True, answer
        connected = await wait_status(env.http, session_id, 200)
        assert connected["status"] == "connected"

        page = await env.agent.snapshot(session_id)
        assert (page["url"], page["title"]) == (env.site.url(READING_LIST), "Reading list")
        assert shows(page, "Unread")
        await env.agent.run(
            session_id, {"name": "click", "ref": ref(page, "button", "Mark as read")}
        )
        await env.agent.wait_text(session_id, "Marked as read")
        hello = await env.agent.run(session_id, {"name": "hello"})
        assert hello["tab"]["tabId"] == tab["tabId"]

        deleted = await env.http.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code in (200, 202), deleted.text
        await wait_status(env.http, session_id, 410)

        async def detached() -> bool:
            rows = [t for t in await debugger_targets(env.browser) if t["id"] == person.id]
            return bool(rows) and rows[0]["attached"] is False

        await eventually(detached, what="CDP detaching from the person's tab")
        await asyncio.sleep(SETTLE_S)
        still = [t for t in await env.browser.devtools.pages() if t.id == person.id]
        assert [t.url for t in still] == [env.site.url(READING_LIST)], "the tab was closed or moved"
        assert len(env.site.hits_on(READING_LIST)) == 1, "the person's page was reloaded"
    finally:
        await env.browser.devtools.close_page(person.id)


async def test_a_persons_own_tab_is_never_listed_or_touched(env: Env) -> None:
    own_url = env.site.url(OWN_TAB)
    own = [t for t in await debugger_targets(env.browser) if t.get("url") == own_url]
    assert len(own) == 1, "the person's tab opened at launch is gone"
    async with unattended_session(env) as session_id:
        await env.agent.open_page(session_id, env.site.url("/landing"))
        hello = await env.agent.run(session_id, {"name": "hello"})
        tabs = await env.agent.run(session_id, {"name": "get_tabs"})
        assert [t["tabId"] for t in tabs["tabs"]] == [hello["tab"]["tabId"]]
        assert hello["tab"]["tabId"] != own[0]["tabId"]
        assert all(t["url"] != own_url for t in [hello["tab"], *tabs["tabs"]])
        switched = await env.agent.failure(
            session_id, {"name": "switch_tab", "tabId": own[0]["tabId"]}
        )
        assert switched["code"] == "tab_not_owned", switched

        rows = [t for t in await debugger_targets(env.browser) if t["id"] == own[0]["id"]]
        assert [(t["url"], t["attached"]) for t in rows] == [(own_url, False)]
    rows = [t for t in await debugger_targets(env.browser) if t["id"] == own[0]["id"]]
    assert [(t["url"], t["attached"]) for t in rows] == [(own_url, False)]
    assert len(env.site.hits_on(OWN_TAB)) == 1, "the person's tab was reloaded"


# -- the service worker stops ----------------------------------------------------------------------


async def stop_service_worker(browser: Chromium) -> None:
    """Stop the extension's service worker without restarting the browser, as Chrome stops an
    idle one: close its DevTools target, which is what Puppeteer's `WebWorker.close()` does and
    what Chrome's extension docs use to test service-worker termination. One call on the
    browser endpoint, then the connection closes; nothing attaches to a tab.
    """
    workers = [
        t
        for t in await browser.devtools.targets()
        if t.type == "service_worker" and t.url.startswith(EXTENSION_ORIGIN)
    ]
    assert len(workers) == 1, workers
    async with httpx.AsyncClient(timeout=5) as http:
        version = (await http.get(f"{browser.devtools.base}/json/version")).json()
    result = await call(
        version["webSocketDebuggerUrl"], "Target.closeTarget", {"targetId": workers[0].id}
    )
    assert result.get("success") is True, result


def device_sockets(env: Env) -> int:
    return sum(1 for s in env.backend.recorder.seen if s.path == "/v1/device/socket")


async def test_a_stopped_service_worker_recovers_mid_session(env: Env) -> None:
    async with unattended_session(env) as session_id:
        await env.agent.open_page(session_id, env.site.url("/landing"))
        sockets = device_sockets(env)

        # Idle: the worker stops between commands; the next command succeeds once it is back.
        await stop_service_worker(env.browser)
        response = await env.agent.submit(
            session_id,
            {"name": "navigate", "url": env.site.url("/links")},
            retry_for_s=45,
        )
        assert response.status_code == 200 and response.json()["status"] == "succeeded", (
            response.text
        )
        assert device_sockets(env) > sockets, "the worker never restarted (no new device socket)"
        links = await env.agent.snapshot(session_id)
        await env.agent.run(
            session_id, {"name": "click", "ref": ref(links, "link", "Stay on this site")}
        )
        await env.agent.wait_text(session_id, "Still on the allowed site")

        # A write in flight: the worker stops while a slow navigation runs.
        sockets = device_sockets(env)
        in_flight = asyncio.ensure_future(
            env.agent.submit(session_id, {"name": "navigate", "url": env.site.url("/slow?ms=3000")})
        )

        async def requested() -> bool:
            return any(h.query == {"ms": "3000"} for h in env.site.hits_on("/slow"))

        await eventually(requested, what="the slow navigation reaching the site")
        await stop_service_worker(env.browser)
        outcome = await in_flight
        # The extension journaled the navigation as started and never wrote its result: after
        # the restart it reports it so, and the backend declares the outcome unknown.
        assert outcome.status_code == 409, outcome.text
        problem = outcome.json()
        assert (problem["code"], problem["retryPolicy"]) == (
            "command_outcome_unknown",
            "do_not_retry",
        )
        status = (await env.http.get(f"/v1/sessions/{session_id}")).json()
        assert status["writesBlockedReason"] == "unknown_outcome"
        assert status["writesBlockedCommandId"] == problem["commandId"]
        refused = await env.agent.submit(session_id, {"name": "go_back"})
        assert refused.status_code == 409 and refused.json()["code"] == "writes_blocked"
        # Reads work again on the restarted worker, on the page the navigation loaded.
        await env.agent.wait_text(session_id, "Slow page")
        assert device_sockets(env) > sockets
