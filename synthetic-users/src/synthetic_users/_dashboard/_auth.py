"""Signing in to the dashboard: server-side sessions, their cookie, and CSRF checks.

Signing in with an API key creates a row in `dashboard_sessions` (its own migration). The
cookie holds a random session id only; the table holds its SHA-256 digest, the customer, the
digest of the API key used (revoking that key ends the session) and the session's CSRF token.
The key itself is never stored, never put in a cookie and never echoed into a page.

Every POST is checked before anything else, signed in or not (`check_post`): a browser's
`Origin` (or `Sec-Fetch-Site`) must say the form came from this origin, and the form must carry
the CSRF token of its session — for the sign-in form, which has no session yet, the token of a
short-lived pre-sign-in cookie it was served with (a double-submit token).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from synthetic_users._store import key_digest

if TYPE_CHECKING:
    from litestar import Request, Response

    from synthetic_users._store import Store

SESSION_COOKIE: Final = "su_dashboard"
SIGN_IN_COOKIE: Final = "su_dashboard_sign_in"
COOKIE_PATH: Final = "/dashboard"
SESSION_LIFETIME_S: Final = 12 * 3600
SIGN_IN_FORM_LIFETIME_S: Final = 3600
CSRF_FIELD: Final = "csrf_token"


class DashboardError(Exception):
    """A page that answers an error: its status and what the person should read."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(f"{status} {title}: {message}")
        self.status = status
        self.title = title
        self.message = message


class SignedOut(DashboardError):
    """The request needs a signed-in session and has none (the page redirects to sign-in)."""

    def __init__(self) -> None:
        super().__init__(401, "Signed out", "sign in with an API key to see this page")


class CsrfRefused(DashboardError):
    """A POST that did not come from one of this dashboard's own forms."""

    def __init__(self, why: str) -> None:
        super().__init__(
            403,
            "Request refused",
            f"{why}. Forms of this dashboard carry a token that other sites cannot know; "
            "go back, reload the page and send the form again.",
        )


@dataclass(frozen=True)
class SignIn:
    """A signed-in browser: whose it is and the token its forms carry."""

    customer_id: str
    csrf_token: str


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class SignIns:
    """The `dashboard_sessions` table."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(self, api_key: str) -> tuple[str, SignIn] | None:
        """A new session for the holder of `api_key`: `(cookie value, sign-in)`; None if unknown."""
        customer = self._store.authenticate(api_key)
        if customer is None:
            return None
        session_id = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        now = self._store.clock()
        with self._store.db.transaction() as conn:
            # Sign-ins that ended are of no use to anyone; sweep them while writing anyway.
            conn.execute("DELETE FROM dashboard_sessions WHERE expires_at <= ?", (now,))
            conn.execute(
                "INSERT INTO dashboard_sessions (digest, customer_id, key_digest, csrf_token, "
                "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    _digest(session_id),
                    customer,
                    key_digest(api_key),
                    csrf,
                    now,
                    now + SESSION_LIFETIME_S,
                ),
            )
        return session_id, SignIn(customer, csrf)

    def get(self, session_id: str | None) -> SignIn | None:
        """The sign-in a cookie names, unless it expired or its API key was revoked."""
        if not session_id or len(session_id) > 128:
            return None
        row = self._store.db.one(
            "SELECT s.customer_id, s.csrf_token FROM dashboard_sessions s "
            "JOIN api_keys k ON k.digest = s.key_digest "
            "WHERE s.digest = ? AND s.expires_at > ? AND k.revoked_at IS NULL",
            (_digest(session_id), self._store.clock()),
        )
        if row is None:
            return None
        return SignIn(str(row["customer_id"]), str(row["csrf_token"]))

    def delete(self, session_id: str | None) -> None:
        if session_id:
            self._store.db.execute(
                "DELETE FROM dashboard_sessions WHERE digest = ?", (_digest(session_id),)
            )


def is_loopback(request: Request[Any, Any, Any]) -> bool:
    """Whether the request was addressed to this machine over plain HTTP (local development)."""
    host = (request.url.hostname or "").strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def secure_cookies(request: Request[Any, Any, Any]) -> bool:
    """`Secure` on every cookie, except over plain HTTP to a loopback address.

    Only there may a browser keep a cookie sent over `http:`; anywhere else the dashboard is
    behind TLS (or should be), and a cookie without `Secure` could leak over a downgrade.
    """
    return request.url.scheme == "https" or not is_loopback(request)


def set_cookie(
    response: Response[Any],
    request: Request[Any, Any, Any],
    name: str,
    value: str,
    max_age: int,
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=COOKIE_PATH,
        secure=secure_cookies(request),
        httponly=True,
        samesite="lax",
    )


def clear_cookie(response: Response[Any], request: Request[Any, Any, Any], name: str) -> None:
    set_cookie(response, request, name, "", 0)


def new_form_token() -> str:
    return secrets.token_urlsafe(32)


def check_origin(request: Request[Any, Any, Any]) -> None:
    """Refuse a POST a browser says came from another site or origin."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        raise CsrfRefused("the form was sent from another site")
    origin = request.headers.get("origin")
    if origin is not None:
        # Host and port, not the scheme: behind a TLS-terminating proxy the service sees
        # http while the browser says https, and that is still this dashboard.
        sent = urlsplit(origin)
        if origin == "null" or sent.netloc.lower() != request.url.netloc.lower():
            raise CsrfRefused("the form was sent from another site")


def check_token(expected: str | None, sent: str | None) -> None:
    """Refuse a POST whose form token is missing or not the one expected."""
    if not expected or not sent:
        raise CsrfRefused("the form carried no valid token")
    if not hmac.compare_digest(expected.encode(), sent.encode()):
        raise CsrfRefused("the form carried no valid token")
