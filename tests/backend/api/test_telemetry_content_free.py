"""A full lifecycle leaves no identifier, origin, URL, key, ticket or hash in telemetry or logs.

The run covers an unattended create, an attended attach, deletes, an idle expiry, a replayed and a
forged ticket, an authentication failure and a quota refusal, with the JSON-lines sink on and every
server log (uvicorn and the app) captured at DEBUG.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import Counter
from typing import TYPE_CHECKING

import pytest
import websockets

from tests.backend.conftest import idem, start_backend, stop_backend, unattended
from understudy import _security
from understudy.generated import models as m

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.backend.conftest import Backend

TENANT = "tenant-qx7"
DEVICE = "device-zk4"
ACTOR = "actor-wv9"
SHOP = "https://shop-qx7.example"
BANK = "https://bank-qx7.example"
PROFILE = "profile-state-key-qx7"
SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")
# prometheus_client writes counter values as floats ("3.0").
METRIC = re.compile(r'^understudy_events_total\{event="([^"]+)",outcome="([^"]*)"\} (\d+)\.0$')


@pytest.fixture
def server_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Capture uvicorn's loggers too (they do not propagate to the root logger) at DEBUG."""
    caplog.set_level(logging.DEBUG)
    saved = {name: logging.getLogger(name).level for name in SERVER_LOGGERS}
    try:
        yield caplog
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
            logging.getLogger(name).removeHandler(caplog.handler)


def listen_to_server(caplog: pytest.LogCaptureFixture) -> None:
    # After start-up: uvicorn's Config sets these loggers' levels and handlers when it is built.
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        if not logger.propagate or name == "uvicorn":
            logger.addHandler(caplog.handler)


def server_log_text(caplog: pytest.LogCaptureFixture) -> str:
    """Everything the backend logged: its own modules, Litestar and uvicorn (not the test's
    clients, which hold the credentials by design)."""
    lines = []
    for record in caplog.records:
        if record.name.split(".")[0] in ("understudy", "uvicorn", "litestar"):
            lines.append(record.getMessage())
            if record.exc_info:
                lines.append(logging.Formatter().formatException(record.exc_info))
    return "\n".join(lines)


async def keep_alive(backend: Backend, seconds: float) -> None:
    """Advance the clock with the device recorded as alive every 70 s (hours in milliseconds)."""
    services = backend.services
    while seconds > 0:
        step = min(70.0, seconds)
        await backend.clock.advance(step)
        with services.storage.transaction() as tx:
            tx.devices.seen(TENANT, DEVICE, services.clock.now())
        seconds -= step


async def run_lifecycle(backend: Backend, secrets: list[str]) -> None:
    key = backend.api_key(tenant=TENANT, actor=ACTOR)
    device = await backend.device(tenant=TENANT, device=DEVICE, connect=False)
    ticket = await device.ticket()
    await device.connect(ticket)
    secrets += [key, device.credential, ticket.ticket, ticket.socket_url]
    async with backend.client(key) as http:
        # Unattended: create, read, delete with a fenced close.
        created = await http.post("/v1/sessions", json=unattended([SHOP], PROFILE), headers=idem())
        assert created.status_code == 201, created.text
        unattended_id = created.json()["sessionId"]
        await backend.until(lambda: backend.session_status(unattended_id) == "connected", "up")
        assert (await http.get(f"/v1/sessions/{unattended_id}")).status_code == 200
        assert (await http.delete(f"/v1/sessions/{unattended_id}")).status_code == 202
        await backend.until(lambda: backend.session_status(unattended_id) == "closed", "closed")
        assert (await http.get(f"/v1/sessions/{unattended_id}")).status_code == 410

        # Attended: attach an existing tab, then detach by deleting.
        attended_id = (await http.post("/v1/sessions")).json()["sessionId"]
        assert (await device.attach(attended_id, tab_id=31)).outcome == "attached"
        assert (await http.delete(f"/v1/sessions/{attended_id}")).status_code == 202
        await backend.until(lambda: backend.session_status(attended_id) == "closed", "detached")

        # A replayed and a forged ticket.
        for url in (ticket.socket_url, ticket.socket_url[:-3] + "AAA"):
            try:
                refused = await websockets.connect(url, open_timeout=5)
            except websockets.InvalidStatus:
                continue
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(refused.recv(), 5)

        # Idle expiry two hours after creation.
        created = await http.post("/v1/sessions", json=unattended([BANK], PROFILE), headers=idem())
        assert created.status_code == 201, created.text
        expiring_id = created.json()["sessionId"]
        await backend.until(lambda: backend.session_status(expiring_id) == "connected", "up")
        await keep_alive(backend, 2 * 3600)
        await backend.until(lambda: backend.session_status(expiring_id) == "expired", "expired")
        tomb = await http.get(f"/v1/sessions/{expiring_id}")
        assert (tomb.status_code, tomb.json()["status"]) == (410, "expired")

        # Authentication failures.
        async with backend.client("usk_" + "x" * 43) as stranger:
            assert (await stranger.get("/v1/devices")).status_code == 401
        async with backend.client(device.credential) as wrong_kind:
            assert (await wrong_kind.get(f"/v1/sessions/{expiring_id}")).status_code == 401

        # Session creation quota: 10 per actor per minute.
        statuses = [(await http.post("/v1/sessions")).status_code for _ in range(11)]
        assert statuses[-1] == 429

    session_tickets = device.frames_of(m.DeviceServerSessionTicket)
    leases = {str(f.lease_id) for f in session_tickets}
    assert len(session_tickets) >= 3
    secrets += [unattended_id, attended_id, expiring_id, *leases]
    secrets += [f.ticket for f in session_tickets] + [f.socket_url for f in session_tickets]


async def test_a_full_lifecycle_leaves_no_identifiers_in_telemetry_or_logs(
    tmp_path: Path, server_logs: pytest.LogCaptureFixture
) -> None:
    sink = tmp_path / "telemetry.jsonl"
    backend = await start_backend(
        tmp_path, telemetry_path=sink, unattended_enabled_tenants=frozenset({TENANT})
    )
    listen_to_server(server_logs)
    secrets: list[str] = []
    try:
        await run_lifecycle(backend, secrets)
        async with backend.client(secrets[0]) as http:
            metrics = await http.get("/metrics")
        counted = sink.read_text()  # what /metrics had seen
        keys = backend.services.keys
    finally:
        await stop_backend(backend)

    secrets += [
        TENANT,
        DEVICE,
        ACTOR,
        SHOP,
        BANK,
        "shop-qx7",
        "bank-qx7",
        PROFILE,
        _security.profile_state_hash(keys, TENANT, PROFILE),
        backend.url,
        backend.settings.socket_base_url,
    ]
    telemetry = sink.read_text()
    logs = server_log_text(server_logs)
    assert len(telemetry.splitlines()) > 30
    assert "WebSocket" in logs  # the socket handshakes were logged, so the check below has teeth
    for secret in secrets:
        assert secret not in telemetry, secret
        assert secret not in logs, secret

    events = [json.loads(line) for line in telemetry.splitlines()]
    kinds = {e["event"] for e in events}
    assert {
        "auth.refused",
        "allocation.granted",
        "lifecycle.transition",
        "quota.decision",
        "ticket.minted",
        "ticket.consumed",
        "ticket.refused",
        "device.connected",
        "device.disconnected",
    } <= kinds
    states = {e.get("to_state") for e in events if e["event"] == "lifecycle.transition"}
    assert {
        "awaiting_attach",
        "provisioning",
        "connected",
        "closing",
        "closed",
        "expired",
    } <= states
    assert {e["reason"] for e in events if e["event"] == "ticket.refused"} == {
        "replayed",
        "bad_signature",
    }
    assert any(
        e["event"] == "quota.decision"
        and e["outcome"] == "refused"
        and e["scope"] == "session_create"
        for e in events
    )
    # Identities are replaced by stable keyed pseudonyms, not dropped.
    assert {e["tenant"] for e in events if "tenant" in e} == {
        _security.pseudonym(keys, "tenant", TENANT)
    }

    # /metrics counts exactly what the sink recorded, in the Prometheus text format.
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = metrics.text.splitlines()
    assert "# TYPE understudy_events_total counter" in lines
    exported = {
        (match[1], match[2]): int(match[3]) for line in lines if (match := METRIC.match(line))
    }
    recorded = Counter(
        (e["event"], str(e.get("outcome", ""))) for e in map(json.loads, counted.splitlines())
    )
    assert exported == dict(recorded)
    assert exported[("quota.decision", "refused")] == 1
    # And the SQLite counters: a full lifecycle took turns, fewer COMMITs than turns or as many.
    sqlite = {
        name: float(value)
        for name, _, value in (line.partition(" ") for line in lines)
        if name in ("understudy_sqlite_transactions_total", "understudy_sqlite_commits_total")
    }
    assert "# TYPE understudy_sqlite_commits_total counter" in lines
    assert (
        0
        < sqlite["understudy_sqlite_commits_total"]
        <= sqlite["understudy_sqlite_transactions_total"]
    )
