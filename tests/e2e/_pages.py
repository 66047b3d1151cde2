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
