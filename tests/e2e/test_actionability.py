"""Pointer and keyboard writes as a page sees them, in real Chromium, driven only through the API.

A click on a button under an overlay fails `element_obscured` naming the overlay, and the
button's handler never runs; once the overlay is gone the same click lands. A click on a button
that an opening accordion is still pushing down lands where the button comes to rest. `type`
presses a key per character (keydown, keypress, input, keyup each counted by the page), delivers
characters no key produces as text, and its `insert` delivery fires input events only.

Each page reports what it saw in its own text, which the test reads through snapshots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from ._agent import ref, shows
from ._skip import require_chromium
from ._stack import Env, running_stack, session
from .conftest import Reply

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from .conftest import Hit, Route

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

# The accordion opens over this long: well inside the 1 s a pointer write waits for a moving
# element, and far longer than one command's round trip, so the next click arrives mid-motion.
ACCORDION_MS = 700


def _page(title: str, body: str) -> str:
    return f"<!doctype html><html lang=en><title>{title}</title><body>{body}</body></html>"


def routes() -> dict[str, Route]:
    def overlay(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Overlay",
                "<h1>Shop</h1>"
                # The label's text sits in a span: a hit on a descendant is a hit on the button.
                "<button id=buy onclick=\"bought += 1; out.textContent = 'bought ' + bought\">"
                "<span>Buy now</span></button>"
                "<p id=out>bought 0</p>"
                '<div id=cookie-wall class="overlay modal" role=region aria-label="Cookie consent"'
                ' style="position:fixed;inset:0;background:rgba(0,0,0,.4)">'
                '<button style="margin-top:300px" onclick="this.parentNode.remove()">'
                "Accept cookies</button></div>"
                "<script>let bought = 0; const out = document.getElementById('out');</script>",
            )
        )

    def accordion(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Accordion",
                "<h1>Order</h1>"
                "<button onclick=\"panel.style.height = '320px'\">Show details</button>"
                f'<div id=panel style="height:0;overflow:hidden;transition:height {ACCORDION_MS}ms'
                ' linear;background:#eef"><p>Shipping details</p></div>'
                # The page tells whether the click came while the panel was still opening (a
                # running transition) or after everything came to rest.
                "<button onclick=\"out.textContent = 'confirmed '"
                " + (document.getAnimations().length > 0 ? 'while moving' : 'at rest')\">"
                "Confirm order</button>"
                "<p id=out>not confirmed</p>"
                "<script>const panel = document.getElementById('panel');"
                "const out = document.getElementById('out');</script>",
            )
        )

    def keys(hit: Hit, slow: bool = False) -> Reply:
        del hit
        # The slow variant's key handler takes 4 ms a key, as a heavy page's might: typing long
        # text there outlasts a command however the key presses are sent.
        busy = "const until = performance.now() + 4; while (performance.now() < until);"
        return Reply(
            _page(
                "Keys",
                "<h1>Keys</h1>"
                "<p><label>Keyed <input id=keyed autocomplete=off></label></p>"
                "<p><label>Inserted <input id=inserted autocomplete=off></label></p>"
                "<p id=keyed-out>keyed: none</p><p id=inserted-out>inserted: none</p>"
                "<script>"
                "for (const id of ['keyed', 'inserted']) {"
                "  const field = document.getElementById(id);"
                "  const out = document.getElementById(id + '-out');"
                "  const seen = { keydown: 0, keypress: 0, input: 0, keyup: 0 };"
                "  for (const kind of Object.keys(seen)) field.addEventListener(kind, () => {"
                f"    if (kind === 'keydown') {{ {busy if slow else ''} }}"
                "    seen[kind] += 1;"
                "    const counts = Object.entries(seen).map(([k, n]) => k + ' ' + n);"
                "    const value = ' value [' + field.value + ']';"
                "    out.textContent = id + ': ' + counts.join(', ') + value;"
                "  });"
                "}"
                "</script>",
            )
        )

    def controls(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Controls",
                "<h1>Controls</h1>"
                # A custom checkbox: the styled label lies on top of the real input.
                '<p style="position:relative;height:40px">'
                '<input type=checkbox id=agree style="position:absolute;left:8px;top:8px"'
                " onchange=\"terms.textContent = 'terms ' + (this.checked ? 'agreed' : 'open')\">"
                '<label for=agree style="position:absolute;left:0;top:0;width:140px;height:36px;'
                'background:#ccd">Agree to terms</label></p>'
                "<p id=terms>terms open</p>"
                # A shadow-DOM button whose label is slotted light DOM.
                "<fancy-button><span>Send it</span></fancy-button><p id=sent>not sent</p>"
                "<script>customElements.define('fancy-button', class extends HTMLElement {"
                "  constructor() { super(); const root = this.attachShadow({ mode: 'open' });"
                "    root.innerHTML = '<button style=\"padding:12px\"><slot></slot></button>';"
                "    root.querySelector('button').addEventListener('click', () => {"
                "      document.getElementById('sent').textContent = 'sent'; }); } });"
                "const terms = document.getElementById('terms');"
                "</script>",
            )
        )

    def slow_keys(hit: Hit) -> Reply:
        return keys(hit, slow=True)

    return {
        "/overlay": overlay,
        "/accordion": accordion,
        "/keys": keys,
        "/slow-keys": slow_keys,
        "/controls": controls,
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory, extension_dist: Path) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("actionability")
    async with running_stack(root, routes(), extension_dist) as stack:
        yield stack


def text_of(snap: dict[str, Any], prefix: str) -> str:
    """The one accessible name that starts with `prefix`."""
    found = [n["name"] for n in snap["nodes"] if str(n["name"]).startswith(prefix)]
    assert len(found) == 1, found
    return str(found[0])


async def test_a_click_on_a_covered_button_fails_naming_the_overlay_and_presses_nothing(
    env: Env,
) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/overlay"))
        buy = ref(page, "button", "Buy now")
        error = await env.agent.failure(session_id, {"name": "click", "ref": buy})
        assert error["code"] == "element_obscured", error
        assert 'id="cookie-wall"' in error["message"], error
        assert 'class="overlay modal"' in error["message"], error
        assert "Close or dismiss the covering element" in error["message"], error
        assert shows(await env.agent.snapshot(session_id), "bought 0")

        await env.agent.run(
            session_id, {"name": "click", "ref": ref(page, "button", "Accept cookies")}
        )
        await env.agent.run(session_id, {"name": "click", "ref": buy})
        await env.agent.wait_text(session_id, "bought 1")


async def test_a_click_lands_through_a_label_on_its_control_and_slotted_shadow_content(
    env: Env,
) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/controls"))
        await env.agent.run(
            session_id, {"name": "click", "ref": ref(page, "checkbox", "Agree to terms")}
        )
        await env.agent.wait_text(session_id, "terms agreed")
        await env.agent.run(session_id, {"name": "click", "ref": ref(page, "button", "Send it")})
        await env.agent.wait_text(session_id, "sent")


async def test_a_click_on_a_button_still_sliding_lands_where_it_comes_to_rest(env: Env) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/accordion"))
        await env.agent.run(
            session_id, {"name": "click", "ref": ref(page, "button", "Show details")}
        )
        # Sent at once: the panel is still growing and pushing the button down.
        await env.agent.run(
            session_id, {"name": "click", "ref": ref(page, "button", "Confirm order")}
        )
        await env.agent.wait_text(session_id, "confirmed")
        assert text_of(await env.agent.snapshot(session_id), "confirmed") == "confirmed at rest"


async def test_type_presses_a_key_per_character_and_insert_fires_input_only(env: Env) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/keys"))
        await env.agent.run(
            session_id, {"name": "type", "ref": ref(page, "textbox", "Keyed"), "text": "ab C"}
        )
        assert text_of(await env.agent.snapshot(session_id), "keyed:") == (
            "keyed: keydown 4, keypress 4, input 4, keyup 4 value [ab C]"
        )
        await env.agent.run(
            session_id,
            {
                "name": "type",
                "ref": ref(page, "textbox", "Inserted"),
                "text": "xyz",
                "delivery": "insert",
            },
        )
        assert text_of(await env.agent.snapshot(session_id), "inserted:") == (
            "inserted: keydown 0, keypress 0, input 1, keyup 0 value [xyz]"
        )


async def test_type_delivers_characters_no_key_produces_as_text(env: Env) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/keys"))
        await env.agent.run(
            session_id, {"name": "type", "ref": ref(page, "textbox", "Keyed"), "text": "a中文😀é"}
        )
        snap = await env.agent.snapshot(session_id)
        # One key press for "a"; the rest arrives as one text insertion (one input event).
        assert text_of(snap, "keyed:") == (
            "keyed: keydown 1, keypress 1, input 2, keyup 1 value [a中文😀é]"
        )


async def test_typing_too_long_for_the_deadline_fails_durably_saying_how_far_it_got(
    env: Env,
) -> None:
    async with session(env) as session_id:
        page = await env.agent.open_page(session_id, env.site.url("/slow-keys"))
        # Key by key on a page that takes 4 ms a key, this much text takes far longer than one
        # command may.
        text = "a" * 10_000
        error = await env.agent.failure(
            session_id, {"name": "type", "ref": ref(page, "textbox", "Keyed"), "text": text}
        )
        assert error["code"] == "deadline_exceeded", error
        typed = int(error["message"].split()[1])
        assert 0 < typed < len(text), error
        assert f"Typed {typed} of {len(text)} characters" in error["message"]
        # Every character the error counts arrived as a whole key press (the snapshot shortens
        # the long value, so the counts are compared).
        assert text_of(await env.agent.snapshot(session_id), "keyed:").startswith(
            f"keyed: keydown {typed}, keypress {typed}, input {typed}, keyup {typed} value [aaa"
        )
