"""A run the orchestrator drives to its end is reported: usage per session, then webhooks sent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from synthetic_users._usage import UsageStore
from synthetic_users._webhooks import WebhookStore, WebhookWorker, WorkerSettings

from .._http import LocalServer
from ..test_orchestrator import call, harness, run_to_end
from ._helpers import Receiver, body_of, eventually

if TYPE_CHECKING:
    from pathlib import Path


async def test_an_orchestrated_run_writes_usage_and_its_webhooks_are_delivered(
    tmp_path: Path,
) -> None:
    done = call("finish", success=True, summary="done")
    h = harness(tmp_path, {"Ada": [call("scroll", direction="down"), done], "Bo": [done]})
    hooks, usage = WebhookStore(h.store), UsageStore(h.store)
    hooks.install()
    usage.install()
    receiver = Receiver()
    with LocalServer(receiver) as server:
        endpoint, receiver.secret = hooks.create(
            "acme", f"{server.url}/h", ["run.completed", "session.completed"]
        )
        run_id = h.create(["Ada", "Bo"])
        await run_to_end(h, run_id)
        worker = WebhookWorker(
            hooks, settings=WorkerSettings(poll_interval_s=0.05, allow_loopback=True)
        )
        worker.start()
        await eventually(
            lambda: (
                [d.status for d in hooks.deliveries("acme", endpoint.webhook_id).items]
                == ["delivered"] * 3
            )
        )
        await worker.stop()
    sessions = {s.session_id for s in h.store.sessions(run_id)}
    records = usage.list_usage("acme", run_id=run_id).items
    assert {r.session_id for r in records} == sessions
    assert sorted(r.turns for r in records) == [1, 2]
    kinds = sorted(body_of(r)["type"] for r in server.requests)
    assert kinds == ["run.completed", "session.completed", "session.completed"]
    assert all(receiver.verified)
    assert len(server.requests) == 3
