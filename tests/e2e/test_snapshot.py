"""Snapshots end to end in real Chromium: the compact form, and what no form may lose.

Pages written for these tests, served on 127.0.0.1: a textarea holding a value longer than the
1,000-character bound next to a single-line input and a rich-text editor; an SVG and a canvas the
page listens to clicks on, unnamed images told apart by their attributes; a page that changes
without navigating, for `changesSince`. The extension runs in a plain Chromium process and is
driven only through the HTTP API.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from demo.chromium import launch

from ._agent import Agent
from ._skip import require_chromium
from .conftest import (
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
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import httpx

    from demo.chromium import Chromium

    from .conftest import Backend, Hit, Route

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

LONG_VALUE = "".join(f"{n:04d} " for n in range(280)).strip()  # 1,399 characters
TEXT_BOUND = 1000
PASSWORD_VALUE = "correct horse battery"  # noqa: S105 - a page's field value, never reported
REF = r"g\d+e\d+"


def _page(title: str, body: str) -> str:
    return f"<!doctype html><html lang=en><title>{title}</title><body>{body}</body></html>"


def routes() -> dict[str, Route]:
    def fields(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Fields",
                "<h1>Profile</h1>"
                f"<label>Biography <textarea name=bio rows=4>{LONG_VALUE}</textarea></label>"
                "<label>Nickname <input name=nick value=jay></label>"
                '<div contenteditable=true role=textbox aria-label="Notes">first line</div>'
                f"<label>Password <input type=password name=pw value='{PASSWORD_VALUE}'></label>",
            )
        )

    def graphics(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Graphics",
                "<h1>Board</h1>"
                "<svg id=star width=24 height=24 aria-describedby=star-tip>"
                "<circle cx=12 cy=12 r=8 /></svg><span id=star-tip>Favourite</span>"
                "<svg id=plain width=24 height=24><rect width=8 height=8 /></svg>"
                "<canvas id=board width=60 height=40></canvas>"
                '<img src="/pixel-a.svg" id=first-pixel width=8 height=8>'
                '<img src="/pixel-b.svg" title="Second pixel" width=8 height=8>'
                "<p id=out>no click yet</p>"
                "<script>"
                "const out = document.getElementById('out');"
                "document.getElementById('star').addEventListener('click', () => {"
                " out.textContent = 'star clicked'; });"
                "document.getElementById('board').addEventListener('mousedown', () => {"
                " out.textContent = 'board clicked'; });"
                "</script>",
            )
        )

    def pixel(hit: Hit) -> Reply:
        del hit
        return Reply(
            "<svg xmlns='http://www.w3.org/2000/svg' width='8' height='8'><rect width='8' "
            "height='8'/></svg>",
            headers={"Content-Type": "image/svg+xml"},
        )

    def cart(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Cart",
                "<h1>Cart</h1>"
                "<label>Quantity <input id=qty type=number value=1></label>"
                "<button id=save onclick=\"document.getElementById('status').textContent="
                "'Saved'; document.getElementById('undo').remove();\">Save</button>"
                "<button id=undo>Undo</button>"
                "<p id=status></p>",
            )
        )

    return {
        "/fields": fields,
        "/graphics": graphics,
        "/pixel-a.svg": pixel,
        "/pixel-b.svg": pixel,
        "/cart": cart,
        "/untitled": lambda hit: Reply("<!doctype html><h1>No title</h1><button>Go</button>"),
    }


@dataclass
class Env:
    backend: Backend
    browser: Chromium
    http: httpx.AsyncClient
    site: Site
    agent: Agent
    live: set[str] = field(default_factory=set)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory, extension_dist: Path) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("snapshot")
    site = Site(routes())
    backend = await start_backend(root)
    browser = await launch(root / "profile", extension_dist)
    try:
        credential = backend.enroll()
        async with backend.client(backend.api_key()) as http:
            await enroll_extension(browser, backend, credential)
            await wait_online(http)
            yield Env(backend, browser, http, site, Agent(http))
    finally:
        browser.kill()
        await stop_backend(backend)
        site.close()


@contextlib.asynccontextmanager
async def session_on(env: Env, path: str) -> AsyncIterator[str]:
    """A connected unattended session showing `path` of the site, deleted afterwards."""
    created = await env.http.post(
        "/v1/sessions",
        json=unattended([env.site.origin], f"profile-{uuid.uuid4().hex}"),
        headers=idem(),
    )
    assert created.status_code == 201, created.text
    session_id: str = created.json()["sessionId"]
    env.live.add(session_id)
    try:
        await env.agent.run(session_id, {"name": "navigate", "url": env.site.url(path)})
        yield session_id
    finally:
        deleted = await env.http.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code in (200, 202), deleted.text
        await wait_status(env.http, session_id, 410)
        env.live.discard(session_id)

        async def released() -> bool:
            return bool((await device_row(env.http))["usedCapacity"] == len(env.live))

        await eventually(released, what="the device releasing the session's capacity")


async def snap(env: Env, session_id: str, **options: Any) -> dict[str, Any]:
    return await env.agent.run(session_id, {"name": "snapshot", **options})


def one(nodes: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [n for n in nodes if all(n.get(k) == v for k, v in match.items())]
    assert len(found) == 1, f"{match} in {[(n['role'], n['name']) for n in nodes]}"
    return found[0]


def line(text: str, pattern: str) -> str:
    found = [ln for ln in text.splitlines() if re.search(pattern, ln)]
    assert len(found) == 1, f"{pattern!r} in:\n{text}"
    return found[0]


async def test_a_first_tab_counts_its_documents_so_refs_and_the_header_stay_short(
    env: Env,
) -> None:
    async with session_on(env, "/fields") as session_id:
        page = await snap(env, session_id, format="compact")
        # about:blank was the tab's first document, this page its second.
        assert (page["generation"], page["snapshotId"]) == (2, "g2s1"), page
        header, *body = page["text"].splitlines()
        assert header == f"# Fields — {env.site.url('/fields')} (g2s1)", header
        refs = re.findall(rf"\[({REF})\]", "\n".join(body))
        assert refs and all(r.startswith("g2e") for r in refs), refs
        # A ref of a generation this tab never issued is stale, never resolved.
        unknown = {"kind": "element_state", "ref": "g123456789e1", "state": "attached"}
        error = await env.agent.failure(session_id, {"name": "wait_for", "condition": unknown})
        assert error["code"] == "stale_ref", error

        await env.agent.run(session_id, {"name": "navigate", "url": env.site.url("/untitled")})
        untitled = await snap(env, session_id, format="compact")
        # No title: the URL alone names the page (Chromium's tab title would repeat it).
        assert untitled["snapshotId"].startswith("g3s"), untitled
        header = f"# {env.site.url('/untitled')} ({untitled['snapshotId']})"
        assert untitled["text"].splitlines()[0] == header, untitled["text"]
        assert line(untitled["text"], r"^button") == 'button "Go" [g3e1]'


async def test_a_long_value_says_it_was_cut_and_its_full_length(env: Env) -> None:
    async with session_on(env, "/fields") as session_id:
        page = await snap(env, session_id, format="both")
    bio = one(page["nodes"], role="textbox", name="Biography")
    assert len(LONG_VALUE) > TEXT_BOUND
    assert bio["value"] == LONG_VALUE[:TEXT_BOUND]
    assert bio["valueLength"] == len(LONG_VALUE)
    compact = line(page["text"], r'^textbox "Biography"')
    assert f"…[cut: {len(LONG_VALUE)} chars]" in compact
    nickname = one(page["nodes"], role="textbox", name="Nickname")
    assert "valueLength" not in nickname


async def test_a_textarea_and_an_editor_are_told_apart_from_a_single_line_input(
    env: Env,
) -> None:
    async with session_on(env, "/fields") as session_id:
        page = await snap(env, session_id, format="both")
    assert one(page["nodes"], role="textbox", name="Biography")["multiline"] is True
    assert one(page["nodes"], role="textbox", name="Notes")["multiline"] is True
    assert one(page["nodes"], role="textbox", name="Nickname")["multiline"] is False
    assert "multiline" in line(page["text"], r'^textbox "Biography"')
    assert "multiline" in line(page["text"], r'^textbox "Notes"')
    assert "multiline" not in line(page["text"], r'^textbox "Nickname"')
    # A password's value is never reported, in either form; the compact form says what it is.
    password = one(page["nodes"], role="textbox", name="Password")
    assert "value" not in password
    assert PASSWORD_VALUE not in page["text"]
    assert re.search(rf'^textbox "Password" password \[{REF}\]$', page["text"], re.M)


async def test_clickable_svg_and_canvas_and_unnamed_images_are_nodes_that_differ(
    env: Env,
) -> None:
    async with session_on(env, "/graphics") as session_id:
        page = await snap(env, session_id, format="both")
        nodes = page["nodes"]
        star = one(nodes, attributes={"id": "star", "aria-describedby": "star-tip"})
        assert star["clickable"] is True
        board = one(nodes, role="Canvas")
        assert board["clickable"] is True
        assert board["attributes"] == {"id": "board"}
        plain = one(nodes, attributes={"id": "plain"})
        assert "clickable" not in plain
        first = one(nodes, attributes={"id": "first-pixel", "src": "pixel-a.svg"})
        assert first["name"] == ""
        text = page["text"]
        assert re.search(
            rf"^svg clickable id=star aria-describedby=star-tip \[{REF}\]$", text, re.M
        )
        assert re.search(rf"^canvas clickable id=board \[{REF}\]$", text, re.M)
        assert re.search(rf"^img id=first-pixel src=pixel-a.svg \[{REF}\]$", text, re.M)
        assert re.search(rf'^img "Second pixel" \[{REF}\]$', text, re.M)
        # The refs work: clicking the SVG and the canvas runs the page's listeners.
        star_ref = re.search(rf"^svg clickable id=star .*\[({REF})\]$", text, re.M)
        assert star_ref is not None
        await env.agent.run(session_id, {"name": "click", "ref": star_ref.group(1)})
        await env.agent.wait_text(session_id, "star clicked")
        await env.agent.run(session_id, {"name": "click", "ref": board["ref"]})
        await env.agent.wait_text(session_id, "board clicked")


async def test_changes_since_a_snapshot_list_only_what_changed(env: Env) -> None:
    async with session_on(env, "/cart") as session_id:
        before = await snap(env, session_id, format="compact")
        assert before["nodes"] == []
        save = re.search(rf'^button "Save" \[({REF})\]$', before["text"], re.M)
        undo = re.search(rf'^button "Undo" \[({REF})\]$', before["text"], re.M)
        assert save is not None and undo is not None
        await env.agent.run(session_id, {"name": "click", "ref": save.group(1)})
        await env.agent.wait_text(session_id, "Saved")
        since = before["snapshotId"]
        after = await snap(env, session_id, format="compact", changesSince=since)
        assert after["changes"]["status"] == "compared"
        assert after["changes"]["removedRefs"] == [undo.group(1)]
        body = after["text"].splitlines()[1:]
        assert "+ Saved" in body
        assert f'- button "Undo" [{undo.group(1)}]' in body
        assert not any("Quantity" in ln for ln in body), "what did not change is not repeated"
        # After a navigation the refs are new: a full snapshot, and it says why.
        await env.agent.run(session_id, {"name": "navigate", "url": env.site.url("/fields")})
        moved = await snap(env, session_id, format="compact", changesSince=after["snapshotId"])
        assert moved["changes"] == {"since": after["snapshotId"], "status": "navigated"}
        assert re.search(r'^textbox "Nickname"', moved["text"], re.M)


async def test_a_bounded_compact_snapshot_counts_what_it_left_out(env: Env) -> None:
    async with session_on(env, "/cart") as session_id:
        full = await snap(env, session_id, format="compact")
        bounded = await snap(env, session_id, format="compact", maxNodes=1)
    lines = full["text"].splitlines()[1:]
    assert len(lines) > 1
    assert bounded["truncated"] is True
    assert sum(bounded["omitted"].values()) == len(lines) - 1
    assert bounded["text"].splitlines()[-1].startswith(f"… {len(lines) - 1} more nodes left out")
