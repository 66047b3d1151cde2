"""The local sites the command tests drive: a login form, ways out of the allowed origin, popups,
dialogs and a slow page. Each site is a `Site` of its own (its own port, so its own origin).
"""

from __future__ import annotations

import secrets
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING

from .conftest import Reply

if TYPE_CHECKING:
    from .conftest import Hit, Route

USERNAME = "jane"
WELCOME = f"Welcome, {USERNAME}"
WRONG_LOGIN = "Wrong username or password"


def _page(title: str, body: str) -> str:
    return f"<!doctype html><html lang=en><title>{title}</title><body>{body}</body></html>"


class LoginRoutes:
    """A login form whose server checks the password and keeps a signed-in cookie."""

    def __init__(self, password: str) -> None:
        self.password = password
        self.signed_in: set[str] = set()

    def login_form(self, hit: Hit) -> Reply:
        error = f"<p role=alert>{WRONG_LOGIN}</p>" if hit.query.get("error") else ""
        return Reply(
            _page(
                "Sign in",
                "<h1>Sign in</h1>"
                f"{error}"
                '<form method=post action="/login">'
                "<p><label>Username <input name=username autocomplete=off></label></p>"
                "<p><label>Password <input name=password type=password></label></p>"
                "<p><button type=submit>Sign in</button></p>"
                "</form>",
            )
        )

    def login(self, hit: Hit) -> Reply:
        if hit.method != "POST":
            return self.login_form(hit)
        form = hit.form
        if form.get("username") == USERNAME and form.get("password") == self.password:
            token = secrets.token_hex(16)
            self.signed_in.add(token)
            return Reply(
                status=303,
                headers={
                    "Location": "/account",
                    "Set-Cookie": f"sid={token}; Path=/; HttpOnly; SameSite=Lax",
                },
            )
        return Reply(status=303, headers={"Location": "/login?error=1"})

    def account(self, hit: Hit) -> Reply:
        cookie = SimpleCookie(hit.headers.get("cookie", ""))
        sid = cookie.get("sid")
        if sid is None or sid.value not in self.signed_in:
            return Reply(status=303, headers={"Location": "/login"})
        return Reply(_page("Your account", f"<h1>{WELCOME}</h1><p>You are signed in.</p>"))


def site_routes(password: str, elsewhere: str) -> dict[str, Route]:
    """Every page of the allowed site; `elsewhere` is an origin the sessions do not allow."""
    login = LoginRoutes(password)

    def links(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Links",
                "<h1>Ways out</h1>"
                '<p><a href="/landing">Stay on this site</a></p>'
                f'<p><a href="{elsewhere}/by-link">Leave by link</a></p>'
                '<p><a href="/redirect-away">Leave by redirect</a></p>'
                f"<p><button onclick=\"location.href='{elsewhere}/by-script'\">"
                "Leave by script</button></p>",
            )
        )

    def popups(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Popups",
                "<h1>Popups</h1>"
                "<button onclick=\"report(window.open('/popup-target'))\">"
                "Open a popup here</button>"
                f"<button onclick=\"report(window.open('{elsewhere}/popup-target'))\">"
                "Open a popup elsewhere</button>"
                "<p id=out>no popup yet</p>"
                "<script>let opened = 0;"
                "function report(w) { opened += 1; document.getElementById('out').textContent ="
                " w ? 'popup ' + opened + ' opened' : 'popup ' + opened + ' refused'; }"
                "</script>",
            )
        )

    def dialogs(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Dialogs",
                "<h1>Dialogs</h1>"
                "<button onclick=\"alert('Heads up'); say('alert returned')\">Alert</button>"
                "<button onclick=\"say('confirm returned ' + confirm('Proceed?'))\">"
                "Confirm</button>"
                "<button onclick=\"say('prompt returned ' + prompt('Your name?', 'anon'))\">"
                "Prompt</button>"
                "<p id=out>nothing yet</p>"
                "<script>function say(t) { document.getElementById('out').textContent = t; }"
                "</script>",
            )
        )

    def reading_list(hit: Hit) -> Reply:
        del hit
        return Reply(
            _page(
                "Reading list",
                "<h1>A person's reading list</h1>"
                "<button onclick=\"document.getElementById('state').textContent = "
                "'Marked as read'\">Mark as read</button>"
                "<p id=state>Unread</p>",
            )
        )

    return {
        "/login": login.login,
        "/account": login.account,
        "/links": links,
        "/landing": lambda hit: Reply(_page("Landing", "<h1>Still on the allowed site</h1>")),
        "/redirect-away": lambda hit: Reply(
            status=302, headers={"Location": f"{elsewhere}/by-redirect"}
        ),
        "/popups": popups,
        "/dialogs": dialogs,
        "/reading-list": reading_list,
        "/slow": slow,
    }


def slow(hit: Hit) -> Reply:
    """A page whose server takes `?ms=` milliseconds to answer."""
    delay_ms = int(hit.query.get("ms", "1000"))
    return Reply(_page("Slow page", f"<h1>Slow page ({delay_ms} ms)</h1>"), delay_s=delay_ms / 1000)


# The drag page: an HTML5 draggable list (native drag and drop: dragstart, dragover, drop), a
# slider driven by pointer events (pointerdown, pointermove with the button held, pointerup), and
# a second slider under an overlay. Each reports what it saw in its own text.
DRAG_PAGE = _page(
    "Drag",
    "<h1>Drag</h1>"
    "<ul id=tasks style='width:220px;padding:0'>"
    + "".join(
        f"<li draggable=true aria-label={name} "
        "style='list-style:none;height:32px;margin:4px;background:#def'>"
        f"{name}</li>"
        for name in ("Alpha", "Beta", "Gamma")
    )
    + "</ul>"
    "<p id=order>order: Alpha, Beta, Gamma</p>"
    "<div id=track style='position:relative;width:200px;height:20px;margin:20px;"
    "background:#ccc'>"
    "<div id=thumb role=slider aria-label=Volume aria-valuenow=0 tabindex=0 "
    "style='position:absolute;left:-10px;top:0;width:20px;height:20px;background:#36c;"
    "touch-action:none'></div></div>"
    "<p id=volume>volume 0, moves 0</p>"
    "<div style='position:relative;width:200px;height:40px;margin:20px'>"
    "<div role=slider aria-label=Locked aria-valuenow=0 tabindex=0 "
    "style='position:absolute;left:0;top:10px;width:20px;height:20px;background:#999'></div>"
    "<div id=veil aria-label='Upgrade to unlock' "
    "style='position:absolute;inset:0;background:rgba(0,0,0,.3)'></div></div>"
    "<script>"
    "let dragged = null;"
    "const list = document.getElementById('tasks');"
    "const order = () => { document.getElementById('order').textContent = 'order: ' +"
    "  [...list.children].map((li) => li.textContent).join(', '); };"
    "for (const li of list.children) {"
    "  li.addEventListener('dragstart', (e) => { dragged = li;"
    "    e.dataTransfer.setData('text/plain', li.textContent); });"
    "  li.addEventListener('dragover', (e) => e.preventDefault());"
    "  li.addEventListener('drop', (e) => { e.preventDefault();"
    "    if (dragged && dragged !== li) { li.after(dragged); order(); } });"
    "}"
    "const track = document.getElementById('track');"
    "const thumb = document.getElementById('thumb');"
    "let moves = 0; let held = false;"
    "const show = (v) => { document.getElementById('volume').textContent ="
    "  'volume ' + v + ', moves ' + moves; };"
    "thumb.addEventListener('pointerdown', (e) => { held = true;"
    "  thumb.setPointerCapture(e.pointerId); });"
    "thumb.addEventListener('pointermove', (e) => { if (!held || !(e.buttons & 1)) return;"
    "  moves += 1; const r = track.getBoundingClientRect();"
    "  const v = Math.round(Math.min(100, Math.max(0, (e.clientX - r.left) / r.width * 100)));"
    "  thumb.style.left = (v * 2 - 10) + 'px'; thumb.setAttribute('aria-valuenow', v); show(v); });"
    "thumb.addEventListener('pointerup', () => { held = false; });"
    "</script>",
)

# The select page: a paragraph, a second paragraph with the same words, a list written without
# white space between its items, and a text area; the page
# reports the document selection (selectionchange) and the field's (select) in its own text.
SELECT_PAGE = _page(
    "Select",
    "<h1>Select</h1>"
    "<p id=intro>Please read   the Terms of service\n   before you sign.</p>"
    "<section aria-label=Again><p>Terms of service apply to every order.</p></section>"
    "<ul><li>Apples</li><li>Pears</li></ul>"
    "<textarea id=note aria-label=Note rows=2>Ship on Monday morning</textarea>"
    "<p id=doc>document selection: none</p>"
    "<p id=field>field selection: none</p>"
    "<script>"
    "document.addEventListener('selectionchange', () => {"
    "  const text = getSelection().toString();"
    "  if (text !== '') document.getElementById('doc').textContent ="
    "    'document selection: ' + text; });"
    "const note = document.getElementById('note');"
    "note.addEventListener('select', () => { document.getElementById('field').textContent ="
    "  'field selection: ' + note.value.slice(note.selectionStart, note.selectionEnd); });"
    "</script>",
)


def verb_routes() -> dict[str, Route]:
    """The drag and select pages."""
    return {
        "/drag": lambda hit: Reply(DRAG_PAGE),
        "/select": lambda hit: Reply(SELECT_PAGE),
    }
