"""`focus` and `wait_for` element states as a page sees them, in real Chromium, through the API.

`focus` moves keyboard focus to a field (the page counts its focus events, and the next snapshot
marks the field focused) without pressing anything; its dry run focuses nothing; an element that
cannot take focus fails `element_not_interactable`. `wait_for` with an element state waits for an
element to become visible, to leave the document (hidden), and for a disabled button to be enabled,
and answers `matched: false` for a state that never comes (attached, for a removed node).

Each page reports what it saw in its own text, which the test reads through snapshots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from ._agent import node, ref, shows
from ._skip import require_chromium
from ._stack import Env, running_stack, session
from .conftest import Reply

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from .conftest import Hit, Route

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

# After "Start": the late banner gets a box, and the notice leaves the document.
APPEAR_MS = 300
# After "Start": the Pay button is enabled. Longer than a command's round trip, so the wait
# provably waits for it.
ENABLE_MS = 1500
# A wait for a state that is not there yet (or never comes) gives up after this long.
SHORT_WAIT_MS = 300


def _page(title: str, body: str) -> str:
    return f"<!doctype html><html lang=en><title>{title}</title><body>{body}</body></html>"


def routes() -> dict[str, Route]:
    def form(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Form",
                "<h1>Sign up</h1>"
                "<p><label>Email <input id=email autocomplete=off></label></p>"
                "<p id=out>focus events 0</p>"
                "<script>let seen = 0; const out = document.getElementById('out');"
                "document.getElementById('email').addEventListener('focus', () => {"
                "  seen += 1; out.textContent = 'focus events ' + seen; });"
                "document.addEventListener('keydown', () => { out.textContent = 'key pressed'; });"
                "</script>",
            )
        )

    def later(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Later",
                "<h1>Later</h1>"
                "<button id=start>Start</button>"
                # In the accessibility tree from the start, but with an empty box until shown.
                '<button id=banner style="width:0;height:0;padding:0;border:0;overflow:hidden">'
                "Late banner</button>"
                "<button id=notice>Dismissable notice</button>"
                "<button id=pay disabled>Pay</button>"
                "<p id=out>not started</p>"
                "<script>document.getElementById('start').addEventListener('click', () => {"
                "  document.getElementById('out').textContent = 'started';"
                "  setTimeout(() => {"
                "    document.getElementById('banner').removeAttribute('style');"
                "    document.getElementById('notice').remove();"
                f"  }}, {APPEAR_MS});"
                "  setTimeout(() => { document.getElementById('pay').disabled = false; },"
                f"   {ENABLE_MS});"
                "});</script>",
            )
        )

    return {"/form": form, "/later": later}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory, extension_dist: Path) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("verbs")
    async with running_stack(root, routes(), extension_dist) as stack:
        yield stack


async def wait_state(
    env: Env, session_id: str, element: str, state: str, timeout_ms: int
) -> dict[str, Any]:
    condition = {"kind": "element_state", "ref": element, "state": state}
    return await env.agent.run(
        session_id, {"name": "wait_for", "condition": condition, "timeoutMs": timeout_ms}
    )


async def test_focus_moves_keyboard_focus_to_the_field_and_presses_nothing(env: Env) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/form"))
        email = ref(page, "textbox", "Email")

        preview = await env.agent.run(session_id, {"name": "focus", "ref": email}, dry_run=True)
        assert preview["preview"]["targetName"] == "Email", preview
        assert shows(await env.agent.snapshot(session_id), "focus events 0")

        await env.agent.run(session_id, {"name": "focus", "ref": email})
        after = await env.agent.snapshot(session_id)
        assert shows(after, "focus events 1"), after
        assert node(after, "textbox", "Email").get("focused") is True, after


async def test_focus_on_an_element_that_cannot_take_focus_fails_element_not_interactable(
    env: Env,
) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/form"))
        error = await env.agent.failure(
            session_id, {"name": "focus", "ref": ref(page, "heading", "Sign up")}
        )
        assert error["code"] == "element_not_interactable", error
        assert "cannot take keyboard focus" in error["message"], error


async def test_wait_for_element_states_waits_for_the_page_to_change(env: Env) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/later"))
        banner = ref(page, "button", "Late banner")
        notice = ref(page, "button", "Dismissable notice")
        pay = ref(page, "button", "Pay")

        # Nothing is scheduled yet: none of the states comes within the short wait.
        for element, state in ((banner, "visible"), (notice, "hidden"), (pay, "enabled")):
            before = await wait_state(env, session_id, element, state, SHORT_WAIT_MS)
            assert before["matched"] is False, (state, before)

        await env.agent.run(session_id, {"name": "click", "ref": ref(page, "button", "Start")})
        appeared = await wait_state(env, session_id, banner, "visible", 5000)
        assert appeared["matched"] is True, appeared
        gone = await wait_state(env, session_id, notice, "hidden", 5000)
        assert gone["matched"] is True, gone
        enabled = await wait_state(env, session_id, pay, "enabled", 5000)
        assert enabled["matched"] is True, enabled
        assert enabled["elapsedMs"] > 0, enabled

        # The notice left the document: waiting for it to be attached runs out the timeout.
        attached = await wait_state(env, session_id, notice, "attached", SHORT_WAIT_MS)
        assert attached["matched"] is False, attached
        assert attached["elapsedMs"] >= SHORT_WAIT_MS, attached
        assert shows(await env.agent.snapshot(session_id), "started")
