"""The dashboard's pages: one Jinja2 environment over its templates and the reports' templates.

The environment is an overlay of the reports' own (`report_environment()`: autoescape on for
`.html`, strict undefined, the same filters), so a report page renders the very templates that
write `report.html`, only inside the dashboard's frame (`dashboard/_frame.html`) instead of the
standalone page (`_page.html`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

import jinja2
from litestar import Response

from synthetic_users._dashboard._forms import field_label
from synthetic_users._reports import report_environment

if TYPE_CHECKING:
    from collections.abc import Mapping

    from synthetic_users._dashboard._auth import SignIn

FRAME: Final = "dashboard/_frame.html"
STATIC_PREFIX: Final = "/dashboard/static"
# Pages load their stylesheet and script from this service and nothing else; the form targets
# and the frames that may embed a page are pinned too (clickjacking, form hijacking).
CSP: Final = (
    "default-src 'none'; img-src 'self'; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
STATIC_TYPES: Final = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


@dataclass(frozen=True)
class NavItem:
    """One entry of the main navigation."""

    key: str
    label: str
    href: str


# The main navigation, in reading order. A page for another part of the API adds its entry
# here when its API exists; no entry points at a page that does not.
NAV: Final = (
    NavItem("runs", "Runs", "/dashboard/runs"),
    NavItem("new-run", "Start a run", "/dashboard/runs/new"),
    NavItem("personas", "Personas", "/dashboard/personas"),
    NavItem("credentials", "Credentials", "/dashboard/credentials"),
    NavItem("webhooks", "Webhooks", "/dashboard/webhooks"),
    NavItem("usage", "Usage", "/dashboard/usage"),
)


def when(ts: float | None) -> str:
    """A Unix time as people read it, in UTC: `2026-12-01 13:05 UTC`."""
    if ts is None:
        return "—"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(ts: float | None) -> str:
    return "" if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


@cache
def environment() -> jinja2.Environment:
    """The reports' environment, with the dashboard's templates beside theirs."""
    base = report_environment()
    loader = jinja2.ChoiceLoader(
        [jinja2.PackageLoader("synthetic_users._dashboard", "templates"), base.loader]  # type: ignore[list-item]
    )
    env = base.overlay(loader=loader)
    # An overlay shares its base's filter dict: give it its own, or the reports would change.
    env.filters = {**base.filters, "when": when, "iso": iso, "field_label": field_label}
    return env


def frame_context(sign_in: SignIn | None, current: str | None) -> dict[str, Any]:
    """What the frame needs: the navigation, who is signed in and the sign-out form's token."""
    return {
        "frame": FRAME,
        "nav": NAV if sign_in else (),
        "current": current,
        "customer": sign_in.customer_id if sign_in else None,
        "csrf_token": sign_in.csrf_token if sign_in else "",
        "static": STATIC_PREFIX,
    }


def render(template: str, context: Mapping[str, Any]) -> str:
    return environment().get_template(template).render(context)


def page(
    template: str,
    sign_in: SignIn | None,
    current: str | None,
    status: int = 200,
    **context: Any,
) -> Response[Any]:
    """A full page inside the frame."""
    html = render(template, {**frame_context(sign_in, current), **context})
    return html_response(html, status)


def html_response(html: str, status: int = 200) -> Response[Any]:
    return Response(
        html,
        status_code=status,
        media_type="text/html; charset=utf-8",
        headers=dict(PAGE_HEADERS),
    )


@cache
def static_file(name: str) -> bytes | None:
    """A file of `static/` by name (only names it holds), or None."""
    if "/" in name or name.startswith("."):
        return None
    if name == "dashboard.css":
        # The reports' stylesheet first, so the report pages look as report.html does.
        source, _, _ = report_environment().loader.get_source(  # type: ignore[union-attr]
            report_environment(), "_style.css"
        )
        own = resources.files("synthetic_users._dashboard").joinpath("static", name)
        return (source + "\n" + own.read_text(encoding="utf-8")).encode()
    path = resources.files("synthetic_users._dashboard").joinpath("static", name)
    if not path.is_file():
        return None
    return path.read_bytes()
