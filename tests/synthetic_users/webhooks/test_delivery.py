"""Delivery end to end: a local receiver (127.0.0.1) verifies every signature and answers scripts.

The endpoint is created through the API (which answers the secret once), runs end through the
store (whose end-of-run transaction writes the outbox), and the worker delivers on this loop
with a shrunk retry schedule and jitter pinned to 1 (each delay is exactly the schedule's).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from synthetic_users._api import create_app
from synthetic_users._artifacts import DirectoryStore
from synthetic_users._store import RunState
from synthetic_users._webhooks import WebhookStore, WebhookWorker, WorkerSettings

from .._http import LocalServer
from ..api.conftest import conforms, serving
from ._helpers import Receiver, body_of, end_run, eventually, new_run, open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from synthetic_users._store import Store

SCHEDULE = (0.1, 0.3, 0.6, 1.2)
SETTINGS = WorkerSettings(
    retry_schedule=SCHEDULE, timeout_s=0.3, poll_interval_s=0.05, allow_loopback=True
)


class Service:
    """The API and the worker over one store, as `serve` wires them."""

    def __init__(self, store: Store, client: httpx.AsyncClient, key: str) -> None:
        self.store = store
        self.client = client
        self.auth = {"Authorization": f"Bearer {key}"}
        self.hooks = WebhookStore(store)
        self.hooks.install()
        self.worker = WebhookWorker(self.hooks, settings=SETTINGS, jitter=lambda: 1.0)

    async def create(self, url: str, events: list[str] | None = None) -> dict[str, Any]:
        response = await self.client.post(
            "/webhooks",
            json={"url": url, "events": events or ["run.completed"]},
            headers=self.auth,
        )
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    async def get(self, path: str) -> httpx.Response:
        return await self.client.get(path, headers=self.auth)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    store = open_store(tmp_path / "su.db")
    app = create_app(store, DirectoryStore(tmp_path / "artifacts"), allow_loopback=True)
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        svc = Service(store, client, store.create_key("acme"))
        yield svc
        await svc.worker.stop()
    store.close()


async def test_retries_with_increasing_delays_until_delivered_each_attempt_readable(
    service: Service,
) -> None:
    receiver = Receiver(script=["timeout", 500, 503])
    with LocalServer(receiver) as server:
        created = await service.create(f"{server.url}/hook")
        receiver.secret = created["secret"]
        run_id = new_run(service.store)
        end_run(service.store, run_id)
        service.worker.start()

        hook_id = created["webhook_id"]
        await eventually(
            lambda: service.hooks.deliveries("acme", hook_id).items[0].status == "delivered"
        )
        page = (await service.get(f"/webhooks/{hook_id}/deliveries")).json()
        conforms(page, "DeliveryList")
    delivery = page["deliveries"][0]
    attempts = delivery["attempts"]
    assert [a.get("status_code") for a in attempts] == [None, 500, 503, 200]
    assert "timed out" in attempts[0]["error"]
    assert all(receiver.verified) and len(receiver.verified) == 4
    # Same event id on every attempt (receivers deduplicate on it), a fresh timestamp each time.
    ids = {r.headers["webhook-id"] for r in server.requests}
    assert ids == {delivery["event_id"]}
    body = body_of(server.requests[-1])
    conforms(body, "WebhookEvent")
    assert body["type"] == "run.completed"
    assert body["data"]["run_id"] == run_id and body["data"]["status"] == "completed"
    assert body["data"]["links"]["self"] == f"/runs/{run_id}"
    # Each wait follows the schedule: the gaps between attempts grow.
    rows = service.hooks.deliveries("acme", created["webhook_id"]).items[0].attempts
    waits = [b.attempted_at - (a.attempted_at + a.duration_ms / 1000) for a, b in pairwise(rows)]
    assert all(w >= s - 0.02 for w, s in zip(waits, SCHEDULE[:3], strict=True)), waits
    assert waits[0] < waits[1] < waits[2]
    assert [r.next_retry_at is not None for r in rows] == [True, True, True, False]


async def test_a_410_disables_the_endpoint_and_nothing_more_is_sent(service: Service) -> None:
    receiver = Receiver(script=[410])
    with LocalServer(receiver) as server:
        created = await service.create(f"{server.url}/gone", ["run.completed"])
        receiver.secret = created["secret"]
        first = new_run(service.store)
        end_run(service.store, first)
        service.worker.start()
        hook_id = created["webhook_id"]
        await eventually(lambda: service.hooks.get("acme", hook_id).status == "disabled")
        second = new_run(service.store)
        end_run(service.store, second, RunState.FAILED)
        assert await service.worker.run_once() == 0
    assert len(server.requests) == 1
    shown = (await service.get(f"/webhooks/{hook_id}")).json()
    assert shown["status"] == "disabled" and "410" in shown["disabled_reason"]
    deliveries = (await service.get(f"/webhooks/{hook_id}/deliveries")).json()["deliveries"]
    assert [d["status"] for d in deliveries] == ["failed"]
    assert deliveries[0]["attempts"][0]["status_code"] == 410


async def test_retries_end_when_the_schedule_is_spent(service: Service) -> None:
    receiver = Receiver(script=[500] * 10)
    with LocalServer(receiver) as server:
        created = await service.create(f"{server.url}/down")
        receiver.secret = created["secret"]
        end_run(service.store, new_run(service.store))
        service.worker.start()
        hook_id = created["webhook_id"]
        await eventually(
            lambda: service.hooks.deliveries("acme", hook_id).items[0].status == "failed"
        )
    assert len(server.requests) == len(SCHEDULE) + 1
    assert service.hooks.get("acme", hook_id).status == "active"  # a 5xx never disables


async def test_a_pending_delivery_resumes_after_a_restart(tmp_path: Path) -> None:
    receiver = Receiver(script=[500])
    with LocalServer(receiver) as server:
        store = open_store(tmp_path / "su.db")
        hooks = WebhookStore(store)
        hooks.install()
        record, receiver.secret = hooks.create("acme", f"{server.url}/hook", ["run.completed"])
        end_run(store, new_run(store))
        before = WebhookWorker(hooks, settings=SETTINGS, jitter=lambda: 1.0)
        assert await before.run_once() == 1  # the 500
        await before.stop()
        store.close()  # the service stops with the delivery pending

        store = open_store(tmp_path / "su.db")
        hooks = WebhookStore(store)
        after = WebhookWorker(hooks, settings=SETTINGS, jitter=lambda: 1.0)
        after.start()
        await eventually(
            lambda: hooks.deliveries("acme", record.webhook_id).items[0].status == "delivered"
        )
        await after.stop()
        attempts = hooks.deliveries("acme", record.webhook_id).items[0].attempts
        store.close()
    assert [a.status_code for a in attempts] == [500, 200]
    assert receiver.verified == [True, True]
    assert len({r.headers["webhook-id"] for r in server.requests}) == 1


async def test_a_connection_refused_is_an_attempt_with_its_error(service: Service) -> None:
    with LocalServer(Receiver()) as server:
        url = f"{server.url}/hook"
    # The server is stopped: its port refuses connections now.
    created = await service.create(url)
    end_run(service.store, new_run(service.store))
    assert await service.worker.run_once() == 1
    attempt = service.hooks.deliveries("acme", created["webhook_id"]).items[0].attempts[0]
    assert attempt.status_code is None and attempt.error and "Connect" in attempt.error
    assert attempt.next_retry_at is not None


async def test_a_name_resolving_to_a_private_address_is_not_sent_to(tmp_path: Path) -> None:
    # `localhost` stands in for a public name re-pointed at a private address (DNS rebinding):
    # registered through the store, past the API's check of the name as written.
    with LocalServer(Receiver()) as server:
        port = server.url.rsplit(":", 1)[1]
        store = open_store(tmp_path / "su.db")
        hooks = WebhookStore(store)
        hooks.install()
        record, _ = hooks.create("acme", f"http://localhost:{port}/h", ["run.completed"])
        end_run(store, new_run(store))
        strict = WebhookWorker(hooks, settings=replace(SETTINGS, allow_loopback=False))
        assert await strict.run_once() == 1
        await strict.stop()
        (attempt,) = hooks.deliveries("acme", record.webhook_id).items[0].attempts
        store.close()
    assert server.requests == []
    assert attempt.error and "non-public address" in attempt.error
    assert attempt.status_code is None and attempt.next_retry_at is not None
