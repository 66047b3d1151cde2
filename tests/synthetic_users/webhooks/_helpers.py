"""What the webhook tests share: a store with a run to end, and a receiver that checks signatures.

`verify` is written from the Standard Webhooks text, independently of `_webhooks/_sign.py`: the
key is the base64-decoded secret after `whsec_`, the signed content `{id}.{timestamp}.{body}`,
the signature header a space-separated list of `v1,<base64 HMAC-SHA256>`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from synthetic_users._store import NewRun, RunState, Store

from .._http import Recorded, Reply

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

PERSONA = {
    "name": "Margaret",
    "background": "",
    "goals": [],
    "digital_literacy": "low",
    "patience": "medium",
    "device": "desktop",
    "locale": "en-GB",
}


def verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    key = base64.b64decode(secret[len("whsec_") :])
    content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    return any(
        version == "v1" and hmac.compare_digest(value, expected)
        for version, _, value in (s.partition(",") for s in headers["webhook-signature"].split())
    )


@dataclass
class Receiver:
    """Answers each delivery from `script` (a status, or "timeout"), then 200; checks each one."""

    script: list[int | str] = field(default_factory=list)
    secret: str = ""
    timeout_delay_s: float = 3.0
    verified: list[bool] = field(default_factory=list)

    def __call__(self, request: Recorded) -> Reply:
        ok = bool(self.secret) and verify(self.secret, request.headers, request.body)
        self.verified.append(ok)
        step = self.script.pop(0) if self.script else 200
        if step == "timeout":
            return Reply(200, {}, delay_s=self.timeout_delay_s)
        assert isinstance(step, int)
        return Reply(step, {"ok": step < 300})


def new_run(store: Store, customer: str = "acme") -> str:
    run, _ = store.create_run(
        customer,
        NewRun(
            target_url="https://shop.example.com/",
            task="Buy a kettle.",
            turn_budget=5,
            model="heuristic",
            personas=[PERSONA],
            request_hash="h",
        ),
    )
    return run.run_id


def end_run(store: Store, run_id: str, status: RunState = RunState.COMPLETED) -> None:
    store.set_run_state(run_id, RunState.RUNNING)
    store.set_run_state(run_id, status)


def open_store(path: Path) -> Store:
    return Store.open(path)


async def eventually(check: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    """Poll `check` until it returns something truthy (the worker runs on this loop)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {timeout_s} s")
        await asyncio.sleep(0.02)


def body_of(request: Recorded) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(request.body)
    return data
