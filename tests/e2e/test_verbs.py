"""`focus` and `wait_for` element states as a page sees them, in real Chromium, through the API.

`focus` moves keyboard focus to a field (the page counts its focus events, and the next snapshot
marks the field focused) without pressing anything; its dry run focuses nothing; an element that
cannot take focus fails `element_not_interactable`. `wait_for` with an element state waits for an
element to become visible, to leave the document (hidden), and for a disabled button to be enabled,
and answers `matched: false` for a state that never comes (attached, for a removed node).

`drag` reorders an HTML5 draggable list (Chromium's own drag and drop, started by real mouse
input), moves a pointer-event slider by an offset through intermediate moves, previews both in a
dry run that moves nothing, and fails `element_obscured` on a covered source with nothing pressed.
`select_text` selects a string inside an element (its first occurrence there, not the page's),
the first occurrence in the page, a range of offsets counted as the snapshot shows the text, and
part of a text area's value; its result and its dry-run preview say what it selected.

Each page reports what it saw in its own text, which the test reads through snapshots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from ._agent import node, ref, shows
from ._pages import verb_routes
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

    return {"/form": form, "/later": later, **verb_routes()}


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


def text_of(snap: dict[str, Any], prefix: str) -> str:
    """The one text on the page that starts with `prefix`."""
    found = [n["name"] for n in snap["nodes"] if str(n["name"]).startswith(prefix)]
    assert len(found) == 1, (prefix, found)
    return str(found[0])


async def test_drag_reorders_an_html5_draggable_list(env: Env) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/drag"))
        alpha = ref(page, "listitem", "Alpha")
        gamma = ref(page, "listitem", "Gamma")
        command = {"name": "drag", "ref": alpha, "targetRef": gamma}

        preview = (await env.agent.run(session_id, command, dry_run=True))["preview"]
        assert (preview["targetName"], preview["drag"]["dropName"]) == ("Alpha", "Gamma"), preview
        assert preview["drag"]["toY"] > preview["drag"]["fromY"], preview
        assert shows(await env.agent.snapshot(session_id), "order: Alpha, Beta, Gamma")

        await env.agent.run(session_id, command)
        after = await env.agent.snapshot(session_id)
        assert text_of(after, "order:") == "order: Beta, Gamma, Alpha", after


async def test_drag_by_an_offset_moves_a_pointer_event_slider_through_intermediate_moves(
    env: Env,
) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/drag"))
        volume = ref(page, "slider", "Volume")
        command = {"name": "drag", "ref": volume, "dx": 100, "dy": 0, "steps": 8}

        preview = (await env.agent.run(session_id, command, dry_run=True))["preview"]["drag"]
        assert preview["toX"] - preview["fromX"] == 100, preview
        assert shows(await env.agent.snapshot(session_id), "volume 0, moves 0")

        await env.agent.run(session_id, command)
        after = await env.agent.snapshot(session_id)
        # The thumb starts centred on the track's left edge: 100 px right is half of 200 px.
        volume_text, moves_text = text_of(after, "volume").split(", ")
        assert volume_text == "volume 50", after
        # Intermediate moves, not one jump (Chromium may coalesce two that land in one frame).
        assert 1 < int(moves_text.removeprefix("moves ")) <= 8, moves_text
        assert node(after, "slider", "Volume")["value"] == "50", after


async def test_drag_of_a_covered_source_fails_element_obscured_and_presses_nothing(
    env: Env,
) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/drag"))
        command = {"name": "drag", "ref": ref(page, "slider", "Locked"), "dx": 50, "dy": 0}

        previewed = await env.agent.submit(session_id, command, dry_run=True)
        assert previewed.json()["error"]["code"] == "element_obscured", previewed.text
        error = await env.agent.failure(session_id, command)
        assert error["code"] == "element_obscured", error
        assert "drag start" in error["message"] and "veil" in error["message"], error
        assert shows(await env.agent.snapshot(session_id), "order: Alpha, Beta, Gamma")


async def test_select_text_selects_the_first_occurrence_within_an_element(env: Env) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/select"))
        again = ref(page, "region", "Again")
        command = {"name": "select_text", "ref": again, "text": "Terms of service"}

        preview = (await env.agent.run(session_id, command, dry_run=True))["preview"]
        assert preview["selection"] == {
            "text": "Terms of service",
            "length": 16,
            "start": 0,
            "end": 16,
        }, preview
        assert shows(await env.agent.snapshot(session_id), "document selection: none")

        result = await env.agent.run(session_id, command)
        assert result["selection"]["text"] == "Terms of service", result
        after = await env.agent.snapshot(session_id)
        assert text_of(after, "document selection") == "document selection: Terms of service"


async def test_select_text_in_the_page_by_text_and_in_an_element_by_offsets(env: Env) -> None:
    async with session(env) as session_id:
        await env.agent.open_page(session_id, env.site.url("/select"))
        # Without a ref, the page's first occurrence; the source's runs of white space (three
        # spaces, a newline) count as one space, as a snapshot shows the text.
        found = await env.agent.run(
            session_id, {"name": "select_text", "text": "read the Terms of service before"}
        )
        assert found["selection"]["text"] == "read the Terms of service before", found
        page = await env.agent.snapshot(session_id)
        shown = text_of(page, "document selection")
        assert shown.split(": ", 1)[1].split() == "read the Terms of service before".split()

        # Two list items with no white space between them in the source read as two words.
        items = await env.agent.run(session_id, {"name": "select_text", "text": "Apples Pears"})
        assert items["selection"]["text"] == "Apples Pears", items
        shown = text_of(await env.agent.snapshot(session_id), "document selection")
        assert shown.split(": ", 1)[1].split() == ["Apples", "Pears"], shown

        again = ref(page, "region", "Again")
        ranged = await env.agent.run(
            session_id, {"name": "select_text", "ref": again, "start": 17, "end": 37}
        )
        assert ranged["selection"]["text"] == "apply to every order", ranged
        missing = await env.agent.failure(
            session_id, {"name": "select_text", "ref": again, "text": "refund"}
        )
        assert missing["code"] == "invalid_arguments", missing
        assert "not in the element" in missing["message"], missing


async def test_select_text_selects_part_of_a_text_area_value(env: Env) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/select"))
        note = ref(page, "textbox", "Note")
        result = await env.agent.run(
            session_id, {"name": "select_text", "ref": note, "text": "Monday"}
        )
        assert result["selection"] == {"text": "Monday", "length": 6, "start": 8, "end": 14}
        after = await env.agent.snapshot(session_id)
        assert text_of(after, "field selection") == "field selection: Monday", after
        assert node(after, "textbox", "Note").get("focused") is True, after
