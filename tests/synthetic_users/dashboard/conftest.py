"""A dashboard over a fresh store, and a browser-like client signed in to it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from litestar.testing import TestClient

from synthetic_users._api import create_app
from synthetic_users._artifacts import DirectoryStore
from synthetic_users._safety._ssrf import TargetPolicy
from synthetic_users._store import Store
from tests.synthetic_users.api.conftest import StubResolver

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import httpx
    from litestar import Litestar

LOOPBACK = "http://127.0.0.1:8788"
TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class Dashboard:
    store: Store
    artifacts: DirectoryStore
    app: Litestar
    key: str

    def client(self, base_url: str = LOOPBACK) -> TestClient[Litestar]:
        return TestClient(self.app, base_url=base_url)


@pytest.fixture
def dash(tmp_path: Path) -> Iterator[Dashboard]:
    store = Store.open(tmp_path / "db.sqlite3")
    artifacts = DirectoryStore(tmp_path / "artifacts")
    key = store.create_key("acme")
    try:
        # Targets resolve to a public address without the network (the policy still checks).
        app = create_app(store, artifacts, targets=TargetPolicy(resolver=StubResolver()))
        yield Dashboard(store, artifacts, app, key)
    finally:
        store.close()


def form_token(response: httpx.Response) -> str:
    match = TOKEN.search(response.text)
    assert match, "the page has no form token"
    return match[1]


def sign_in(client: TestClient[Litestar], key: str) -> str:
    """Sign in as a person would (the form, then its POST); returns the session's CSRF token."""
    token = form_token(client.get("/dashboard/sign-in"))
    done = client.post(
        "/dashboard/sign-in",
        data={"csrf_token": token, "api_key": key, "next": "/dashboard/runs"},
        follow_redirects=False,
    )
    assert done.status_code == 303, done.text
    return form_token(client.get("/dashboard/runs"))


@pytest.fixture
def signed_in(dash: Dashboard) -> Iterator[tuple[TestClient[Litestar], str]]:
    with dash.client() as client:
        yield client, sign_in(client, dash.key)


def field_errors(html: str) -> dict[str, str]:
    """Error messages by the id of the control they sit beside."""
    return dict(
        re.findall(
            r'class="field-error" id="([^"]+)-error"><span class="visually-hidden">Error: </span>'
            r"([^<]+)</p>",
            html,
        )
    )
