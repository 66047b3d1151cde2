"""API keys: every operation but `/healthz` needs one; the service starts and stops its parts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from synthetic_users._api import create_app
from synthetic_users._artifacts import DirectoryStore
from synthetic_users._store import Store
from tests.synthetic_users.api.conftest import (
    RUN,
    SPEC,
    Api,
    RecordingServices,
    conforms,
    problem,
    serving,
)

if TYPE_CHECKING:
    from pathlib import Path

RUN_ID = "run_" + "0" * 32
SESSION_ID = "ses_" + "0" * 32
OPERATIONS = [
    ("POST", "/runs"),
    ("GET", "/runs"),
    ("GET", f"/runs/{RUN_ID}"),
    ("DELETE", f"/runs/{RUN_ID}"),
    ("GET", f"/runs/{RUN_ID}/sessions/{SESSION_ID}"),
    ("GET", f"/runs/{RUN_ID}/report.json"),
    ("GET", f"/runs/{RUN_ID}/report.md"),
    ("GET", f"/runs/{RUN_ID}/report.html"),
    ("GET", f"/runs/{RUN_ID}/sessions/{SESSION_ID}/transcript.json.gz"),
    ("GET", f"/runs/{RUN_ID}/sessions/{SESSION_ID}/report.json"),
    ("GET", f"/runs/{RUN_ID}/sessions/{SESSION_ID}/report.md"),
    ("GET", f"/runs/{RUN_ID}/sessions/{SESSION_ID}/report.html"),
    ("GET", f"/runs/{RUN_ID}/sessions/{SESSION_ID}/screenshots/step-0001.png"),
    ("POST", "/personas"),
    ("GET", "/personas"),
    ("GET", "/personas/per_" + "0" * 32),
    ("DELETE", "/personas/per_" + "0" * 32),
    ("POST", "/webhooks"),
    ("GET", "/webhooks"),
    ("GET", "/webhooks/whk_" + "0" * 32),
    ("DELETE", "/webhooks/whk_" + "0" * 32),
    ("GET", "/webhooks/whk_" + "0" * 32 + "/deliveries"),
    ("GET", "/usage"),
    ("POST", "/credentials"),
    ("GET", "/credentials"),
    ("GET", "/credentials/cred_" + "0" * 32),
    ("DELETE", "/credentials/cred_" + "0" * 32),
]


def test_the_list_covers_every_secured_operation_of_the_spec() -> None:
    secured = sum(
        1
        for item in SPEC.openapi["paths"].values()
        for method, op in item.items()
        if method in ("get", "post", "delete") and op.get("security", None) != []
    )
    assert len(OPERATIONS) == secured


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Bearer suk_not-a-key", "Basic YWNtZTpzZWNyZXQ=", "suk_raw-key"],
)
async def test_without_a_valid_key_every_operation_is_401(
    api: Api, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    for method, path in OPERATIONS:
        response = await api.client.request(method, path, json=RUN, headers=headers)
        body = problem(response, 401, "unauthorized")
        assert response.headers["www-authenticate"].startswith("Bearer"), (method, path)
        assert "keys create" in body["detail"]
    assert api.services.created == []


async def test_two_authorization_headers_are_refused(api: Api) -> None:
    response = await api.client.get(
        "/runs", headers=[("Authorization", f"Bearer {api.key}"), ("Authorization", "Bearer x")]
    )
    problem(response, 401, "unauthorized")


async def test_a_valid_key_with_any_scheme_spelling_is_accepted(api: Api) -> None:
    response = await api.client.get("/runs", headers={"Authorization": f"bearer {api.key}"})
    assert response.status_code == 200


async def test_healthz_needs_no_key(api: Api) -> None:
    response = await api.client.get("/healthz")
    assert response.status_code == 200
    conforms(response.json(), "Health")


async def test_an_unknown_path_is_a_problem_too(api: Api) -> None:
    problem(await api.client.get("/nowhere", headers=api.auth()), 404, "not_found")
    problem(await api.client.put("/runs", headers=api.auth()), 405, "method_not_allowed")


async def test_the_reference_is_served_at_docs(api: Api) -> None:
    response = await api.client.get("/docs")
    assert response.status_code == 200
    assert "Synthetic Users API" in response.text


async def test_the_app_starts_and_stops_its_services(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "su.db")
    services = RecordingServices()
    app = create_app(store, DirectoryStore(tmp_path / "a"), services=services)
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        assert services.events == ["start"]
        assert (await client.get("/healthz")).status_code == 200
    assert services.events == ["start", "stop"]
    store.close()


def test_services_and_callbacks_are_one_or_the_other(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "su.db")
    with pytest.raises(TypeError, match="not both"):
        create_app(
            store,
            DirectoryStore(tmp_path),
            services=RecordingServices(),
            on_run_created=lambda run: None,
        )
    store.close()
