"""Scripted login: an unattended session fills a login form with a vaulted password.

The script shows where a consumer plugs in its own governance: `approve_write` sees every write
(with its dry-run preview) before it is sent, and `print_audit` receives a content-free record of
every request and outcome. Understudy itself keeps no audit log and runs no approval workflow.

Run it against a running backend with an enrolled, online device:

    UNDERSTUDY_URL=http://127.0.0.1:8787 \\
    UNDERSTUDY_API_KEY=usk_... \\
    LOGIN_URL=https://example.com/login \\
    LOGIN_USERNAME=jane@example.com \\
    LOGIN_SECRET_REF=vault:login-password \\
    python docs/guide/examples/scripted_login.py

Optional: `LOGIN_SUCCESS_TEXT` (default `Welcome`), `PROFILE_STATE_KEY` (default `example-login`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from understudy_connector import AuditEvent, Client, WriteRequest, find_ref

if TYPE_CHECKING:
    from understudy_connector.generated.models import SnapshotResult


def approve_write(request: WriteRequest) -> bool:
    """The consumer's approval policy: here, allow a write only when its preview is allowed."""
    preview = request.preview.preview if request.preview is not None else None
    allowed = preview is None or preview.allowed
    if preview is not None and preview.target_role is not None:
        target = f"{preview.target_role} {preview.target_name!r}"
    else:
        target = (preview.navigates_to if preview is not None else None) or "the page"
    print(f"approve {request.name} on {target}: {allowed}", file=sys.stderr)
    return allowed


def print_audit(event: AuditEvent) -> None:
    """The consumer's audit sink: one JSON line per event on stderr (content-free)."""
    print(json.dumps(dataclasses.asdict(event), default=str), file=sys.stderr)


def origin_of(url: str) -> str:
    """The exact origin (`scheme://host[:port]`) of a URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def run(
    client: Client,
    *,
    login_url: str,
    username: str,
    secret_ref: str,
    success_text: str = "Welcome",
    profile_state_key: str = "example-login",
) -> SnapshotResult:
    """Log in and return a snapshot of the page behind the login."""
    with client.session(
        allowed_origins=[origin_of(login_url)],
        profile_state_key=profile_state_key,
        approve=approve_write,
        preview_writes=True,
        audit=print_audit,
    ) as session:
        session.navigate(login_url)
        form = session.snapshot(interactive_only=True)
        # Refs are plain values: look them up by role and accessible name, pass them back.
        user_field = find_ref(form, role="textbox", name="user")
        password_field = find_ref(form, role="textbox", name="password")
        submit = find_ref(form, role="button", name="sign in")
        session.fill(user_field, username)
        session.fill_secret(password_field, secret_ref)  # the plaintext never leaves the vault
        session.click(submit)
        session.wait_for(text=success_text, timeout_ms=10_000)
        return session.snapshot(interactive_only=True)


def main() -> None:
    """Read the configuration from the environment and log in."""
    with Client(os.environ["UNDERSTUDY_URL"], os.environ["UNDERSTUDY_API_KEY"]) as client:
        page = run(
            client,
            login_url=os.environ["LOGIN_URL"],
            username=os.environ["LOGIN_USERNAME"],
            secret_ref=os.environ["LOGIN_SECRET_REF"],
            success_text=os.environ.get("LOGIN_SUCCESS_TEXT", "Welcome"),
            profile_state_key=os.environ.get("PROFILE_STATE_KEY", "example-login"),
        )
    print(f"logged in: {page.title} ({page.url})")


if __name__ == "__main__":
    main()
