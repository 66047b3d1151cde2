"""`/webhooks`: the secret shown once, never listed; per customer; 400s name the field."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from synthetic_users._api import create_app
from synthetic_users._artifacts import DirectoryStore
from synthetic_users._store import Store
from synthetic_users._webhooks import WebhookStore
from tests.synthetic_users.api.conftest import conforms, paths, problem, serving
from tests.synthetic_users.webhooks._helpers import end_run, new_run

if TYPE_CHECKING:
    from pathlib import Path

    from tests.synthetic_users.api.conftest import Api

HOOK = {"url": "https://hooks.example.com/su", "events": ["run.completed"]}


async def create(api: Api, body: Any = None, key: str | None = None) -> httpx.Response:
    return await api.client.post("/webhooks", json=body or HOOK, headers=api.auth(key))


async def test_create_answers_the_secret_once_and_reads_never_show_it(api: Api) -> None:
    response = await create(api)
    assert response.status_code == 201
    created = response.json()
    conforms(created, "WebhookCreated")
    assert created["secret"].startswith("whsec_")
    assert response.headers["location"] == f"/webhooks/{created['webhook_id']}"
    one = await api.client.get(response.headers["location"], headers=api.auth())
    listed = await api.client.get("/webhooks", headers=api.auth())
    conforms(one.json(), "Webhook")
    conforms(listed.json(), "WebhookList")
    assert created["secret"] not in one.text + listed.text
    assert [w["webhook_id"] for w in listed.json()["webhooks"]] == [created["webhook_id"]]
    assert one.json()["status"] == "active"


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"events": ["run.completed"]}, "/url"),
        ({"url": "https://h.example/", "events": []}, "/events"),
        ({"url": "https://h.example/", "events": ["run.started"]}, "/events/0"),
        ({"url": "https://h.example/", "events": ["run.completed", "run.completed"]}, "/events"),
        ({"url": "http://hooks.example.com/", "events": ["run.completed"]}, "/url"),
        ({"url": "http://127.0.0.1:9/h", "events": ["run.completed"]}, "/url"),
        ({"url": "https://10.0.0.8/h", "events": ["run.completed"]}, "/url"),
        ({"url": "https://[fd00::1]/h", "events": ["run.completed"]}, "/url"),
        ({"url": "https://metadata.internal/h", "events": ["run.completed"]}, "/url"),
        ({"url": "https://u:p@h.example/", "events": ["run.completed"]}, "/url"),
        ({"url": "ftp://h.example/", "events": ["run.completed"]}, "/url"),
        ({**HOOK, "secret": "mine"}, "/secret"),
    ],
)
async def test_bad_input_is_400_naming_the_field(api: Api, body: Any, path: str) -> None:
    body_ = problem(await create(api, body), 400, "validation_failed")
    assert path in paths(body_)


async def test_another_customers_webhook_is_not_found(api: Api) -> None:
    created = (await create(api)).json()
    base = f"/webhooks/{created['webhook_id']}"
    other = api.auth(api.other_key)
    for method, path in (("GET", base), ("DELETE", base), ("GET", f"{base}/deliveries")):
        response = await api.client.request(method, path, headers=other)
        problem(response, 404, "webhook_not_found")
    assert (await api.client.get("/webhooks", headers=other)).json() == {"webhooks": []}
    assert (await api.client.get(base, headers=api.auth())).status_code == 200


async def test_a_malformed_id_is_not_found(api: Api) -> None:
    problem(await api.client.get("/webhooks/whk_x", headers=api.auth()), 404, "webhook_not_found")


async def test_delete_stops_deliveries_and_the_webhook_is_gone(api: Api) -> None:
    WebhookStore(api.store).install()
    created = (await create(api)).json()
    end_run(api.store, new_run(api.store))
    base = f"/webhooks/{created['webhook_id']}"
    pending = (await api.client.get(f"{base}/deliveries", headers=api.auth())).json()
    assert [d["status"] for d in pending["deliveries"]] == ["pending"]
    assert (await api.client.delete(base, headers=api.auth())).status_code == 204
    problem(await api.client.get(base, headers=api.auth()), 404, "webhook_not_found")
    rows = api.store.db.query("SELECT status FROM webhook_deliveries")
    assert [r["status"] for r in rows] == ["cancelled"]
    secrets = api.store.db.query("SELECT secret FROM webhooks")
    assert [r["secret"] for r in secrets] == [""]


async def test_lists_page_with_a_cursor(api: Api) -> None:
    for _ in range(3):
        await create(api)
    first = (await api.client.get("/webhooks?limit=2", headers=api.auth())).json()
    second = await api.client.get(
        f"/webhooks?limit=2&cursor={first['next_cursor']}", headers=api.auth()
    )
    assert len(first["webhooks"]) == 2 and len(second.json()["webhooks"]) == 1
    assert "next_cursor" not in second.json()
    problem(
        await api.client.get("/webhooks?cursor=abc", headers=api.auth()), 400, "validation_failed"
    )


async def test_loopback_endpoints_are_accepted_only_when_the_operator_allows(
    tmp_path: Path,
) -> None:
    store = Store.open(tmp_path / "su.db")
    app = create_app(store, DirectoryStore(tmp_path / "a"), allow_loopback=True)
    key = store.create_key("acme")
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        auth = {"Authorization": f"Bearer {key}"}
        for endpoint in ("http://127.0.0.1:9/h", "http://localhost:9/h", "https://[::1]:9/h"):
            body = {"url": endpoint, "events": ["session.completed"]}
            response = await client.post("/webhooks", json=body, headers=auth)
            assert response.status_code == 201, (endpoint, response.text)
        private = {"url": "http://10.0.0.8/h", "events": ["run.completed"]}
        assert (await client.post("/webhooks", json=private, headers=auth)).status_code == 400
    store.close()


async def test_a_body_over_the_bound_is_413(api: Api) -> None:
    body = {"url": "https://h.example/" + "a" * 300_000, "events": ["run.completed"]}
    problem(await create(api, body), 413, "payload_too_large")


async def test_deliveries_page_newest_first(api: Api) -> None:
    WebhookStore(api.store).install()
    created = (await create(api)).json()
    runs = [new_run(api.store) for _ in range(3)]
    for run_id in runs:
        end_run(api.store, run_id)
    base = f"/webhooks/{created['webhook_id']}/deliveries"
    first = (await api.client.get(f"{base}?limit=2", headers=api.auth())).json()
    conforms(first, "DeliveryList")
    rest = (
        await api.client.get(f"{base}?limit=2&cursor={first['next_cursor']}", headers=api.auth())
    ).json()
    subjects = [d["subject_id"] for d in first["deliveries"] + rest["deliveries"]]
    assert subjects == runs[::-1] and "next_cursor" not in rest
    assert all(d["status"] == "pending" and d["attempts"] == [] for d in first["deliveries"])
