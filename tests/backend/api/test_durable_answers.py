"""A command's answer waits for the open group commit unless it shows only what a committed turn
wrote (as a committed turn's frames do not wait, `Connection.send(committed=True)`)."""

from __future__ import annotations

import sqlite3
import uuid
from typing import TYPE_CHECKING, Any, cast

import httpx
import pytest

from tests.backend.conftest import post_create, unattended
from understudy.http._fast import FastCommands

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

    from tests.backend.conftest import Backend


def _on_disk(path: str) -> int:
    """The probe rows another process sees: what a crash now would keep."""
    other = sqlite3.connect(path)
    try:
        (rows,) = other.execute("SELECT count(*) FROM probe").fetchone()
    finally:
        other.close()
    return int(rows)


def _watched(app: ASGIApp, path: str, seen: list[int]) -> ASGIApp:
    """`app`, recording the probe rows on disk when each response starts."""

    async def watched(scope: Scope, receive: Receive, send: Send) -> None:
        async def spy(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen.append(_on_disk(path))
            await send(message)

        await app(scope, receive, spy)

    return watched


@pytest.mark.parametrize("route", ["fast", "routed"])
@pytest.mark.parametrize("committed", [True, False])
async def test_an_answer_waits_for_the_open_group_only_when_its_row_is_not_durable(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, route: str, committed: bool
) -> None:
    db = backend.services.db
    db.execute("CREATE TABLE probe (n INTEGER)")
    key = backend.api_key()
    await backend.device()
    async with backend.client(key) as http:
        created = await post_create(backend, http, unattended())
        assert created.status_code == 201, created.text
        sid = created.json()["sessionId"]
    agent = backend.services.session_agent(sid)
    await backend.until(lambda: agent.available, "socket up")

    deliver, wait_outcome = agent._deliver, agent.wait_outcome

    async def spied(out: Any) -> None:
        if out.wake:  # the result turn, which wakes the request
            # Not committed: as a turn whose outcome row is not durable yet would deliver it.
            out.committed = committed
        await deliver(out)

    async def interleaved(command_id: str) -> Any:
        row = await wait_outcome(command_id)
        # Another actor's turn ran before the woken request went on: its group is open.
        with db.transaction():
            db.execute("INSERT INTO probe VALUES (1)")
        return row

    monkeypatch.setattr(agent._turns, "_deliver", spied)
    monkeypatch.setattr(agent, "wait_outcome", interleaved)

    served = backend.server.config.app
    assert isinstance(served, FastCommands)
    app = served if route == "fast" else served.app
    seen: list[int] = []
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=cast("Any", _watched(app, db.path, seen))),
        base_url=backend.url,
        headers={"Authorization": f"Bearer {key}"},
    )
    body = {"commandId": str(uuid.uuid4()), "command": {"name": "click", "ref": "g1e1"}}
    async with client:
        done = await client.post(f"/v1/sessions/{sid}/commands", json=body)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "succeeded"
    # From a committed turn's row it starts at once, before the other actor's group commits;
    # else it could show a write that is not durable yet, and waits for every turn so far.
    assert seen == ([0] if committed else [1])
