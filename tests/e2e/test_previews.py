"""Dry runs end to end: previews that preview, in real Chromium, driven only through the HTTP API.

A dry run of `fill_secret` checks the field and the vault entry and succeeds, with no plaintext
in any frame the backend sent the tab, in storage or in telemetry. A dry run of `click` on a
link, an image-map area or a form's submit control says where the click would go, with which
method, whether the session may go there and whether it opens a popup, and goes nowhere. The
guide's scripted login, whose approval hook sees every write's dry run first, signs in.

The backend runs in this process, so a test may wrap the session agent's `send` to see every
frame it sent the extension; nothing attaches to the controlled tab.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from demo.chromium import launch
from understudy._store import vault
from understudy.session_agent import SessionAgent

from ._agent import Agent, node, ref
from ._pages import USERNAME, WELCOME, LoginRoutes
from ._skip import require_chromium
from .conftest import (
    ROOT,
    TENANT,
    Reply,
    Site,
    device_row,
    enroll_extension,
    eventually,
    idem,
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

    import httpx

    from demo.chromium import Chromium
    from understudy.session_agent import _Frame

    from .conftest import Backend, Hit, Route

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

SECRET_NAME = "login-password"  # noqa: S105 - a vault entry name, not a password
SCRIPTED_LOGIN = ROOT / "docs" / "guide" / "examples" / "scripted_login.py"
EXAMPLE_WITHIN_S = 120
# Long enough for a navigation a dry run wrongly started to reach its server.
SETTLE_S = 1.0
# A square image the map's area covers; a data: URL is a subresource, which no policy filters.
MAP_IMAGE = (
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='120' height='60'%3E"
    "%3Crect width='120' height='60' fill='%23ccc'/%3E%3C/svg%3E"
)


def _page(title: str, body: str) -> str:
    return f"<!doctype html><html lang=en><title>{title}</title><body>{body}</body></html>"


def routes(password: str, elsewhere: str) -> dict[str, Route]:
    """A login form, and a page of elements whose clicks would navigate (or not)."""
    login = LoginRoutes(password)

    def ways(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Ways to go",
                "<h1>Ways to go</h1>"
                '<p><a href="/landing">Stay on this site</a></p>'
                f'<p><a href="{elsewhere}/help" target="_blank">Help in a new window</a></p>'
                f'<p><img src="{MAP_IMAGE}" usemap="#regions" alt="Regions" width=120 height=60>'
                '<map name="regions"><area shape="rect" coords="0,0,120,60" href="/region"'
                ' alt="Northern region"></map></p>'
                '<form method=post action="/subscribe?list=news" target="results">'
                "<label>Email <input name=email></label>"
                "<button type=submit>Subscribe</button></form>"
                '<form action="/search?stale=1"><label>Query <input name=q value=previews>'
                "</label><input type=submit value=Search></form>"
                "<p><button onclick=\"window.open('/popup')\">Open by script</button></p>",
            )
        )

    return {
        "/login": login.login,
        "/account": login.account,
        "/ways": ways,
    }


@dataclass
class Env:
    backend: Backend
    browser: Chromium
    http: httpx.AsyncClient
    site: Site
    blocked: Site  # an origin the sessions do not allow
    password: str
    telemetry: Path
    agent: Agent
    live: set[str] = field(default_factory=set)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory, extension_dist: Path) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("previews")
    password = f"pw-{secrets.token_urlsafe(18)}"
    blocked = Site()
    site = Site(routes(password, blocked.origin))
    telemetry = root / "telemetry.jsonl"
    backend = await start_backend(root, {"UNDERSTUDY_TELEMETRY_PATH": str(telemetry)})
    browser = await launch(root / "profile", extension_dist)
    try:
        with backend.services.storage.transaction() as tx:
            vault.put(tx.vault, backend.services.keys, TENANT, SECRET_NAME, password, 0.0)
        credential = backend.enroll()
        async with backend.client(backend.api_key()) as http:
            await enroll_extension(browser, backend, credential)
            await wait_online(http)
            yield Env(backend, browser, http, site, blocked, password, telemetry, Agent(http))
    finally:
        browser.kill()
        await stop_backend(backend)
        for running in (site, blocked):
            running.close()


@contextlib.asynccontextmanager
async def unattended_session(env: Env) -> AsyncIterator[str]:
    """A connected unattended session on the site's origin, deleted afterwards."""
    created = await env.http.post(
        "/v1/sessions",
        json=unattended([env.site.origin], f"profile-{uuid.uuid4().hex}"),
        headers=idem(),
    )
    assert created.status_code == 201, created.text
    session_id: str = created.json()["sessionId"]
    env.live.add(session_id)
    try:
        yield session_id
    finally:
        deleted = await env.http.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code in (200, 202), deleted.text
        await wait_status(env.http, session_id, 410)
        env.live.discard(session_id)
        await capacity_released(env)


async def capacity_released(env: Env) -> None:
    async def released() -> bool:
        return bool((await device_row(env.http))["usedCapacity"] == len(env.live))

    await eventually(released, what="the device releasing the session's capacity")


@pytest.fixture
def frames_to_tabs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every frame the backend's session agents send to the extension, as its JSON text."""
    sent: list[str] = []
    original = SessionAgent.send

    async def recording(self: SessionAgent, frame: _Frame, *, committed: bool = False) -> None:
        sent.append(frame.to_wire_json())
        await original(self, frame, committed=committed)

    monkeypatch.setattr(SessionAgent, "send", recording)
    return sent


# -- fill_secret -----------------------------------------------------------------------------------


async def test_a_fill_secret_dry_run_succeeds_and_its_plaintext_goes_nowhere(
    env: Env, frames_to_tabs: list[str]
) -> None:
    async with unattended_session(env) as session_id:
        form = await env.agent.open_page(session_id, env.site.url("/login"))
        for field_name in ("Password", "Username"):
            result = await env.agent.run(
                session_id,
                {
                    "name": "fill_secret",
                    "ref": ref(form, "textbox", field_name),
                    "secretRef": f"vault:{SECRET_NAME}",
                },
                dry_run=True,
            )
            assert result["preview"] == {
                "targetRole": "textbox",
                "targetName": field_name,
                "allowed": True,
            }
            assert result["url"] == env.site.url("/login")

        # A field that takes no text fails the dry run as the fill would, and a missing vault
        # entry fails before the tab is asked.
        button = {"name": "fill_secret", "ref": ref(form, "button", "Sign in")}
        refused = await env.agent.submit(
            session_id, {**button, "secretRef": f"vault:{SECRET_NAME}"}, dry_run=True
        )
        assert refused.json()["error"]["code"] == "element_not_interactable", refused.text
        missing = await env.agent.submit(
            session_id,
            {**button, "ref": ref(form, "textbox", "Password"), "secretRef": "vault:absent"},
            dry_run=True,
        )
        assert missing.json()["error"]["code"] == "secret_not_found", missing.text

        # Nothing was typed: the text field is still empty, no form was sent, the page is as it was.
        after = await env.agent.snapshot(session_id)
        assert after["generation"] == form["generation"]
        assert not node(after, "textbox", "Username").get("value")
        assert env.site.hits_on("/login", "POST") == []

        grants = [json.loads(f) for f in frames_to_tabs if '"write_grant"' in f]
        fills = [g for g in grants if g["command"]["name"] == "fill_secret"]
        assert len(fills) == 3, grants  # Password, Username and the button; not the missing one
        assert all(g["dryRun"] is True and "secretValue" not in g for g in fills)
        status = await env.http.get(f"/v1/sessions/{session_id}")

    secret = env.password.encode()
    assert frames_to_tabs, "no frame to the tab was recorded"
    assert [f for f in frames_to_tabs if env.password in f] == []
    assert all(env.password not in text for text in [*env.agent.transcript, status.text])
    stored = [p for p in env.backend.settings.data_dir.rglob("*") if p.is_file()]
    assert any(session_id.encode() in p.read_bytes() for p in stored), "not the session's storage"
    assert [p.name for p in stored if secret in p.read_bytes()] == []
    assert secret not in env.telemetry.read_bytes()
    storage = await worker_eval(
        env.browser,
        "Promise.all([chrome.storage.session.get(null), chrome.storage.local.get(null)])"
        ".then(JSON.stringify)",
    )
    assert env.password not in storage


# -- click -----------------------------------------------------------------------------------------


async def test_click_dry_runs_say_where_the_click_goes_and_go_nowhere(env: Env) -> None:
    async with unattended_session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/ways"))

        async def preview(role: str, name: str) -> dict[str, Any]:
            result = await env.agent.run(
                session_id, {"name": "click", "ref": ref(page, role, name)}, dry_run=True
            )
            assert result["url"] == env.site.url("/ways")
            found: dict[str, Any] = result["preview"]
            assert (found["targetRole"], found["targetName"]) == (role, name)
            return found

        def navigation(found: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in found.items() if k not in ("targetRole", "targetName")}

        assert navigation(await preview("link", "Stay on this site")) == {
            "navigatesTo": env.site.url("/landing"),
            "method": "GET",
            "allowed": True,
            "opensPopup": False,
        }
        assert navigation(await preview("link", "Help in a new window")) == {
            "navigatesTo": env.blocked.url("/help"),
            "method": "GET",
            "allowed": False,
            "opensPopup": True,
        }
        assert navigation(await preview("link", "Northern region")) == {
            "navigatesTo": env.site.url("/region"),
            "method": "GET",
            "allowed": True,
            "opensPopup": False,
        }
        # A POST form into a named window: its action as written, query and all.
        assert navigation(await preview("button", "Subscribe")) == {
            "navigatesTo": env.site.url("/subscribe?list=news"),
            "method": "POST",
            "allowed": True,
            "opensPopup": True,
        }
        # A GET form: the action without a query, because the fields (here "previews") replace
        # it and a preview never carries field values.
        searched = navigation(await preview("button", "Search"))
        assert searched == {
            "navigatesTo": env.site.url("/search"),
            "method": "GET",
            "allowed": True,
            "opensPopup": False,
        }
        # Where only script decides, the preview does not guess.
        assert navigation(await preview("button", "Open by script")) == {"allowed": True}

        still = await env.agent.snapshot(session_id)
        assert (still["url"], still["generation"]) == (env.site.url("/ways"), page["generation"])
        tabs = await env.agent.run(session_id, {"name": "get_tabs"})
        assert [t["url"] for t in tabs["tabs"]] == [env.site.url("/ways")]
    await asyncio.sleep(SETTLE_S)
    targets = ("/landing", "/region", "/subscribe", "/search", "/popup")
    assert [h.path for h in env.site.hits if h.route in targets] == []
    assert env.blocked.hits == []


async def test_a_ref_of_a_generation_never_issued_says_so(env: Env) -> None:
    async with unattended_session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/ways"))
        made_up = "g999999999e1"
        error = await env.agent.failure(session_id, {"name": "click", "ref": made_up})
        assert error["code"] == "stale_ref", error
        assert error["message"] == (
            f"Ref {made_up} names generation 999999999, which this tab never issued (its current "
            f"document is generation {page['generation']}); take a snapshot and use its refs."
        )
        old = f"g{page['generation'] - 1}e1"
        earlier = await env.agent.failure(session_id, {"name": "click", "ref": old})
        assert earlier["code"] == "stale_ref"
        assert "earlier document" in earlier["message"]


# -- the guide's example ---------------------------------------------------------------------------


async def test_the_scripted_login_example_signs_in_with_its_approval_hook(env: Env) -> None:
    environ = {
        **os.environ,
        "UNDERSTUDY_URL": env.backend.url,
        "UNDERSTUDY_API_KEY": env.backend.api_key("example"),
        "LOGIN_URL": env.site.url("/login"),
        "LOGIN_USERNAME": USERNAME,
        "LOGIN_SECRET_REF": f"vault:{SECRET_NAME}",
        "LOGIN_SUCCESS_TEXT": WELCOME,
        "PROFILE_STATE_KEY": f"example-{uuid.uuid4().hex}",
    }
    before = len(env.site.hits_on("/login", "POST"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPTED_LOGIN),
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), EXAMPLE_WITHIN_S)
    stdout, stderr = out.decode(), err.decode()
    assert process.returncode == 0, stderr
    assert stdout.strip() == f"logged in: Your account ({env.site.url('/account')})"
    # The approval hook saw each write's dry run, fill_secret's included, and allowed it.
    for line in (
        f"approve navigate on {env.site.url('/login')}: True",
        "approve fill on textbox 'Username': True",
        "approve fill_secret on textbox 'Password': True",
        "approve click on button 'Sign in': True",
    ):
        assert line in stderr, stderr
    # One real sign-in with the vaulted password; the dry runs posted nothing.
    posts = env.site.hits_on("/login", "POST")[before:]
    assert [h.form for h in posts] == [{"username": USERNAME, "password": env.password}]
    assert env.password not in stdout + stderr
    await capacity_released(env)
