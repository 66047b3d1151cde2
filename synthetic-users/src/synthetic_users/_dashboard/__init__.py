"""The Synthetic Users dashboard: server-rendered pages under `/dashboard`, beside the API.

Pages (all but sign-in need a signed-in session; without one a page redirects to sign-in):

- `/dashboard/sign-in`: sign in with an API key (a server-side session behind an `HttpOnly`,
  `SameSite=Lax` cookie, `Secure` except over plain HTTP to loopback); sign out from any page.
- `/dashboard/runs`: the customer's runs, newest first, with each persona's progress.
- `/dashboard/runs/new`: start a run: target, task, turn budget, saved or inline personas.
- `/dashboard/runs/<run>`: the live view: each persona's turn, browser generation, last
  screenshot and reactions as they arrive (a script polls every 2 s; without script the page
  refreshes itself); links to the reports when they are written.
- `/dashboard/runs/<run>/report` and `/dashboard/runs/<run>/sessions/<session>`: the aggregate
  report and a persona's timeline, rendered by the templates that write `report.html`.
- `/dashboard/personas`: saved personas: list, create, delete.
- `/dashboard/credentials`: log-ins for the target site: list (name, user name, origin;
  never the password), add (the password control always comes back empty), delete.
- `/dashboard/webhooks`: webhook endpoints: list (events, active or disabled and why), add
  (the signing secret is shown once, on the page that answers the form), delete;
  `/dashboard/webhooks/<id>`: its delivery log, each delivery with its attempts.
- `/dashboard/usage`: usage totals and each persona session's usage event, by run, paged.

Every form carries its session's CSRF token and every POST is checked (origin, then token)
before anything else. Validation is the API's own (`_api/_parse.py`); its JSON pointers are
shown beside the form control they name.

Exceptions (`_auth.py`), each rendered as a page:

    DashboardError          an error page with its status
    ├── SignedOut           no sign-in: GET pages redirect (302) to the sign-in page
    └── CsrfRefused         a POST without this dashboard's token or from another origin (403)
"""

from __future__ import annotations

from litestar import Router

from synthetic_users._dashboard._auth import CsrfRefused, DashboardError, SignedOut
from synthetic_users._dashboard._credentials import CREDENTIAL_HANDLERS
from synthetic_users._dashboard._hooks import HOOK_HANDLERS
from synthetic_users._dashboard._pages import HANDLERS, on_dashboard_error, on_unexpected

__all__ = ["CsrfRefused", "DashboardError", "SignedOut", "dashboard_router"]


def dashboard_router() -> Router:
    """The dashboard's routes under `/dashboard` (a new router for each app)."""
    return Router(
        path="/dashboard",
        route_handlers=[*HANDLERS, *HOOK_HANDLERS, *CREDENTIAL_HANDLERS],
        exception_handlers={DashboardError: on_dashboard_error, Exception: on_unexpected},
        include_in_schema=False,
    )
