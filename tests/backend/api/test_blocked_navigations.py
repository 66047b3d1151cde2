"""Navigations and popups the extension stopped: kept per session (newest 50, deduplicated by id),
shown in the session status, carried by the write whose settle window they fell into, and kept out
of telemetry."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING, Any

from tests.backend.conftest import Backend, post_create, unattended
from tests.support.simdevice import Behaviour, SimulatedDevice
from understudy._store import LATEST
from understudy.generated import models as m

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from understudy._store._db import Database

ELSEWHERE = "https://elsewhere.example"


async def _session(
    backend: Backend, http: Any, behaviour: Behaviour | None = None
) -> tuple[SimulatedDevice, str]:
    device = await backend.device(behaviour=behaviour)
    response = await post_create(backend, http, unattended())
    assert response.status_code == 201, response.text
    session_id: str = response.json()["sessionId"]
    lease = next(iter(device.leases.values()))
    await device.wait_for(lambda: lease.session_frames)  # hello_ack: the socket is up
    return device, session_id


def _record(blocked_id: str, cause: str = "redirect", **extra: Any) -> dict[str, Any]:
    return {
        "blockedId": blocked_id,
        "kind": "popup" if cause == "popup" else "navigation",
        "origin": ELSEWHERE,
        "cause": cause,
        "blockedAt": "2026-11-30T09:00:00Z",
        **extra,
    }


async def _eventually(probe: Callable[[], Awaitable[Any]], within_s: float = 5) -> Any:
    """Poll `probe` until it returns something truthy; fail after `within_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not (value := await probe()):
        assert loop.time() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.01)
    return value


async def _status(http: Any, session_id: str) -> dict[str, Any]:
    response = await http.get(f"/v1/sessions/{session_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_the_session_status_keeps_the_newest_50_blocked_navigations(
    backend: Backend,
) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        assert (await _status(http, sid))["blockedNavigations"] == []
        ids = [str(uuid.uuid4()) for _ in range(52)]
        for blocked_id in [ids[0], *ids]:  # the first one twice: a redelivery
            await device.send_session_frame(
                sid, {"type": "navigation_blocked", "blocked": _record(blocked_id)}
            )

        async def all_stored() -> bool:
            row = backend.services.db.one(
                "SELECT COUNT(*) AS n FROM blocked_navigations WHERE session_id = ?", (sid,)
            )
            return row is not None and int(row["n"]) == 52

        await _eventually(all_stored)
        shown = (await _status(http, sid))["blockedNavigations"]
        assert len(shown) == 50
        assert shown[0]["blockedId"] == ids[-1], "newest first"
        assert ids[0] not in {b["blockedId"] for b in shown}, "the oldest fell out"
        assert shown[0] == _record(ids[-1])


async def test_a_write_reports_the_popup_it_caused_in_its_outcome_and_the_status(
    backend: Backend,
) -> None:
    behaviour = Behaviour(page_blocks={"kind": "popup", "origin": ELSEWHERE, "cause": "popup"})
    async with backend.client(backend.api_key()) as http:
        _, sid = await _session(backend, http, behaviour)
        command_id = str(uuid.uuid4())
        response = await http.post(
            f"/v1/sessions/{sid}/commands",
            json={"commandId": command_id, "command": {"name": "click", "ref": "g1e1"}},
        )
        assert response.status_code == 200, response.text
        outcome = response.json()
        assert outcome["status"] == "succeeded"
        [reported] = outcome["result"]["blockedNavigations"]
        assert (reported["kind"], reported["origin"], reported["cause"]) == (
            "popup",
            ELSEWHERE,
            "popup",
        )
        assert reported["commandId"] == command_id

        async def in_status() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = (await _status(http, sid))["blockedNavigations"]
            return found

        assert await _eventually(in_status) == [reported]
        # The durable outcome says the same when polled again.
        again = await http.get(f"/v1/sessions/{sid}/commands/{command_id}")
        assert again.json()["result"]["blockedNavigations"] == [reported]


async def test_blocked_navigations_reach_telemetry_without_their_origin(
    backend: Backend,
) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        blocked_id = str(uuid.uuid4())
        await device.send_session_frame(
            sid, {"type": "navigation_blocked", "blocked": _record(blocked_id, "meta_refresh")}
        )

        async def emitted() -> list[Any]:
            events = backend.services.telemetry.events
            return [e for e in events if e["event"] == "navigation.blocked"]

        [event] = await _eventually(emitted)
        assert (event["kind"], event["reason"]) == ("navigation", "meta_refresh")
        assert "elsewhere" not in json.dumps(event)


async def test_a_malformed_blocked_navigation_is_refused_with_its_path(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        lease = next(iter(device.leases.values()))
        bad = _record(str(uuid.uuid4()), cause="teleport")
        await device.send_session_frame(sid, {"type": "navigation_blocked", "blocked": bad})

        def refused() -> list[m.SessionServerError]:
            return [
                f
                for f in lease.session_frames
                if isinstance(f, m.SessionServerError) and f.code == "invalid_frame"
            ]

        [error] = await device.wait_for(refused)
        assert "cause" in error.message
        assert (await _status(http, sid))["blockedNavigations"] == []


def test_records_are_deduplicated_and_only_the_newest_50_keep_their_payload(
    backend: Backend,
) -> None:
    db: Database = backend.services.db
    assert LATEST >= 3
    with db.transaction():
        assert db.storage.repos.blocked.record("s1", "b0", _record("b0"), 1.0) is True
        assert db.storage.repos.blocked.record("s1", "b0", _record("b0"), 2.0) is False
        for i in range(1, 55):
            db.storage.repos.blocked.record("s1", f"b{i}", _record(f"b{i}"), 1.0 + i)
        db.storage.repos.blocked.record("s2", "other", _record("other"), 0.5)
    with db.transaction():
        newest = db.storage.repos.blocked.newest("s1")
    assert [r["blockedId"] for r in newest] == [f"b{i}" for i in range(54, 4, -1)]
    with db.transaction():
        assert db.storage.repos.blocked.record("s1", "b1", _record("b1"), 99.0) is False, (
            "a tombstone stays"
        )
        assert [r["blockedId"] for r in db.storage.repos.blocked.newest("s2")] == ["other"]
