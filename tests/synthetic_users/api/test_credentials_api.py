"""POST/GET/DELETE /credentials: the password goes in once and never comes out."""

from __future__ import annotations

import base64
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pytest

from synthetic_users._api import create_app
from synthetic_users._artifacts import DirectoryStore
from synthetic_users._safety._credentials import Credentials, Keyring
from synthetic_users._safety._ssrf import TargetPolicy
from synthetic_users._store import Store
from tests.synthetic_users.api.conftest import StubResolver

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

PASSWORD = "p4ss-Word_!-3f9e0c"  # noqa: S105 - the secret the test hunts for
BODY = {
    "name": "Test shopper",
    "username": "shopper@example.com",
    "password": PASSWORD,
    "origin": "https://shop.example.com",
}
# The run routes of `_routes.py` still declare path parameters in Litestar's older style.
pytestmark = pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning")

RUN = {
    "target_url": "https://shop.example.com/",
    "task": "log in and look at your orders",
    "personas": [{"name": "Ada"}],
}


class Api:
    def __init__(self, http: httpx.AsyncClient, store: Store, credentials: Credentials) -> None:
        self.http = http
        self.store = store
        self.credentials = credentials

    def key(self, customer: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.store.create_key(customer)}"}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    store = Store.open(tmp_path / "su.db")
    credentials = Credentials(store.db, Keyring.ephemeral())
    app = create_app(
        store,
        DirectoryStore(tmp_path / "artifacts"),
        credentials=credentials,
        targets=TargetPolicy(resolver=StubResolver()),  # no DNS in tests
    )
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://su.test") as http:
        yield Api(http, store, credentials)
    store.close()


def forms(secret: str) -> list[str]:
    return [secret, base64.b64encode(secret.encode()).decode(), quote(secret, safe="")]


def assert_absent(text: str) -> None:
    for form in forms(PASSWORD):
        assert form not in text


async def test_a_stored_credential_is_read_back_without_its_password(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    auth = api.key("acme")
    created = await api.http.post("/credentials", json=BODY, headers=auth)
    assert created.status_code == 201, created.text
    body = created.json()
    assert set(body) == {"credential_id", "name", "username", "origin", "created_at"}
    assert created.headers["location"] == f"/credentials/{body['credential_id']}"
    one = await api.http.get(created.headers["location"], headers=auth)
    listed = await api.http.get("/credentials", headers=auth)
    assert one.json() == body
    assert listed.json() == {"credentials": [body]}
    for response in (created, one, listed):
        assert_absent(response.text)
    assert_absent(caplog.text)
    # What the session will use: the same password, decrypted on demand.
    assert api.credentials.reveal("acme", body["credential_id"]) == PASSWORD


async def test_credentials_are_the_customers_own(api: Api) -> None:
    created = (await api.http.post("/credentials", json=BODY, headers=api.key("acme"))).json()
    other = api.key("globex")
    path = f"/credentials/{created['credential_id']}"
    for response in (
        await api.http.get(path, headers=other),
        await api.http.delete(path, headers=other),
    ):
        assert response.status_code == 404
        assert response.json()["code"] == "credential_not_found"
    assert (await api.http.get("/credentials", headers=other)).json() == {"credentials": []}
    run = await api.http.post(
        "/runs", json={**RUN, "credential_id": created["credential_id"]}, headers=other
    )
    assert run.status_code == 400
    assert run.json()["errors"] == [
        {
            "path": "/credential_id",
            "message": "no such credential; store one with POST /credentials",
        }
    ]


async def test_a_run_names_one_of_the_customers_credentials(api: Api) -> None:
    auth = api.key("acme")
    created = (await api.http.post("/credentials", json=BODY, headers=auth)).json()
    run = await api.http.post(
        "/runs", json={**RUN, "credential_id": created["credential_id"]}, headers=auth
    )
    assert run.status_code == 202, run.text
    assert api.store.get_run(run.json()["run_id"]).credential_id == created["credential_id"]
    unknown = await api.http.post(
        "/runs", json={**RUN, "credential_id": "cred_" + "0" * 32}, headers=auth
    )
    assert unknown.status_code == 400
    assert unknown.json()["errors"][0]["path"] == "/credential_id"


async def test_a_deleted_credential_is_gone(api: Api) -> None:
    auth = api.key("acme")
    created = (await api.http.post("/credentials", json=BODY, headers=auth)).json()
    path = f"/credentials/{created['credential_id']}"
    assert (await api.http.delete(path, headers=auth)).status_code == 204
    assert (await api.http.get(path, headers=auth)).status_code == 404
    assert (await api.http.delete(path, headers=auth)).status_code == 404
    assert (await api.http.get("/credentials/cred_nope", headers=auth)).status_code == 404


async def test_the_list_pages_newest_first(api: Api) -> None:
    auth = api.key("acme")
    ids = [
        (await api.http.post("/credentials", json={**BODY, "name": f"c{i}"}, headers=auth)).json()[
            "credential_id"
        ]
        for i in range(3)
    ]
    first = (await api.http.get("/credentials?limit=2", headers=auth)).json()
    second = (
        await api.http.get(f"/credentials?limit=2&cursor={first['next_cursor']}", headers=auth)
    ).json()
    seen = [c["credential_id"] for c in first["credentials"] + second["credentials"]]
    assert sorted(seen) == sorted(ids) and len(seen) == 3
    assert "next_cursor" not in second
    bad = await api.http.get("/credentials?cursor=zzz", headers=auth)
    assert bad.status_code == 400


@pytest.mark.parametrize(
    "body",
    [
        {k: v for k, v in BODY.items() if k != "password"},
        {**BODY, "password": ""},
        {**BODY, "password": "x" * 1025},
        {**BODY, "password": 12345},
        {**BODY, "origin": "https://shop.example.com/login"},
        {**BODY, "extra": PASSWORD},
    ],
)
async def test_a_bad_body_is_400_and_never_echoes_the_password(
    api: Api, body: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    response = await api.http.post("/credentials", json=body, headers=api.key("acme"))
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation_failed"
    assert_absent(response.text)
    assert_absent(caplog.text)
    assert api.credentials.page("acme", 10) == []


async def test_credentials_need_an_api_key(api: Api) -> None:
    for response in (
        await api.http.post("/credentials", json=BODY),
        await api.http.get("/credentials"),
    ):
        assert response.status_code == 401
