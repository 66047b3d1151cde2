"""The bundled demo site: a login form, a page behind it, served on 127.0.0.1.

It knows one user and the password the main job put in the vault; it never logs the password, and
it counts requests so the main job can show what the browser really did.
"""

from __future__ import annotations

import html
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

USERNAME = "demo-user"

LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Demo sign-in</title></head>
<body><main>
<h1>Sign in to the demo</h1>
{message}
<form method="post" action="/login">
  <label>Username <input name="username" autocomplete="username"></label>
  <label>Password <input name="password" type="password" autocomplete="current-password"></label>
  <button type="submit">Sign in</button>
</form>
</main></body></html>
"""

WELCOME_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Demo account</title></head>
<body><main><h1>Welcome, {user}</h1><p>You are signed in.</p>
<a href="/login">Sign out</a></main></body></html>
"""


@dataclass
class DemoSite:
    """A running demo site; `stop()` shuts it down."""

    password: str
    server: ThreadingHTTPServer | None = None
    sessions: set[str] = field(default_factory=set)
    logins: list[bool] = field(default_factory=list)  # outcome of every sign-in attempt

    @property
    def origin(self) -> str:
        assert self.server is not None  # noqa: S101 - started first
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> DemoSite:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet: the main job prints its own steps

            def _send(
                self, status: int, body: str = "", headers: dict[str, str] | None = None
            ) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _signed_in(self) -> bool:
                cookie = self.headers.get("Cookie", "")
                token = next(
                    (c.split("=", 1)[1] for c in cookie.split("; ") if c.startswith("demo=")), ""
                )
                return token in site.sessions

            def do_GET(self) -> None:
                if self.path == "/welcome" and self._signed_in():
                    self._send(200, WELCOME_PAGE.format(user=html.escape(USERNAME)))
                elif self.path in ("/", "/welcome"):
                    self._send(303, headers={"Location": "/login"})
                elif self.path == "/login":
                    self._send(200, LOGIN_PAGE.format(message=""))
                else:
                    self._send(404, "<h1>Not found</h1>")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                ok = form.get("username") == [USERNAME] and secrets.compare_digest(
                    form.get("password", [""])[0], site.password
                )
                site.logins.append(ok)
                if not ok:
                    message = "<p role='alert'>Wrong username or password.</p>"
                    self._send(200, LOGIN_PAGE.format(message=message))
                    return
                token = secrets.token_urlsafe(16)
                site.sessions.add(token)
                self._send(
                    303,
                    headers={
                        "Location": "/welcome",
                        "Set-Cookie": f"demo={token}; HttpOnly; Path=/",
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
