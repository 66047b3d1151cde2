"""`RunServices` owns the webhook worker: its store hooks write the outbox, and it delivers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from synthetic_users._artifacts import DirectoryStore
from synthetic_users._config import Settings
from synthetic_users._service import RunServices
from synthetic_users._store import RunState
from synthetic_users._usage import UsageStore
from synthetic_users._webhooks import WebhookStore

from .._http import LocalServer
from ..usage._helpers import ended_session
from ._helpers import Receiver, eventually, new_run, open_store

if TYPE_CHECKING:
    from pathlib import Path


async def test_the_service_writes_usage_and_delivers_webhooks_until_stopped(
    tmp_path: Path,
) -> None:
    extension = tmp_path / "ext"
    extension.mkdir()
    (extension / "manifest.json").write_text("{}")
    settings = Settings(
        data_dir=tmp_path,
        understudy_operator_token="op",  # noqa: S106 (never used: Understudy is not started)
        extension_dir=extension,
        webhook_retry_schedule=(0.05,),
        allow_loopback=True,
    )
    store = open_store(tmp_path / "su.db")
    services = RunServices(settings, store, DirectoryStore(tmp_path / "artifacts"))
    receiver = Receiver()
    with LocalServer(receiver) as server:
        hooks = WebhookStore(store)
        endpoint, receiver.secret = hooks.create("acme", f"{server.url}/h", ["run.completed"])
        services._start_delivery()  # what start() does once the fleet is up
        run_id = new_run(store)
        ended_session(store, run_id=run_id)
        store.set_run_state(run_id, RunState.COMPLETED)  # the session started it
        await eventually(
            lambda: hooks.deliveries("acme", endpoint.webhook_id).items[0].status == "delivered"
        )
        await services.stop()
    assert receiver.verified == [True]
    assert len(UsageStore(store).list_usage("acme").items) == 1
    store.close()
