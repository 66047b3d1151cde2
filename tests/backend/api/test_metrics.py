"""`/metrics` as a Prometheus scraper reads it: names, types, labels and values that move with
what the service did."""

from __future__ import annotations

import logging
import os
import uuid
from typing import TYPE_CHECKING

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.backend.conftest import idem, unattended
from understudy._policy import OFFLINE_AFTER_S
from understudy.coordinator import Outbox, TenantCoordinator
from understudy.generated.versions import API_VERSION

if TYPE_CHECKING:
    import pytest
    from prometheus_client import Metric

    from tests.backend.conftest import Backend


async def scrape(backend: Backend) -> dict[str, Metric]:
    async with httpx.AsyncClient(base_url=backend.url, timeout=10) as http:
        response = await http.get("/metrics")  # unauthenticated, as a scraper asks
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def value(families: dict[str, Metric], sample: str, **labels: str) -> float:
    family = families[sample.removesuffix("_total").removesuffix("_count").removesuffix("_sum")]
    matches = [
        s.value
        for s in family.samples
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(matches) == 1, (sample, labels, family.samples)
    return matches[0]


async def test_metrics_follow_sessions_devices_commands_and_the_lifecycle(
    backend: Backend,
) -> None:
    before = await scrape(backend)
    assert value(before, "understudy_devices_online") == 0
    assert value(before, "understudy_sessions", state="connected") == 0
    build = value(before, "understudy_build_info", api_version=API_VERSION)
    assert build == 1
    assert before["understudy_build_info"].samples[0].labels["protocol_versions"] == "1,2"
    assert "process_resident_memory_bytes" in before
    assert "python_gc_collections" in before
    assert before["understudy_sqlite_commits"].type == "counter"
    assert not [name for name in before if name.endswith("_created")]

    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        created = await http.post("/v1/sessions", json=unattended(), headers=idem())
        assert created.status_code == 201, created.text
        session_id = created.json()["sessionId"]
        lease = next(iter(device.leases.values()))
        await device.wait_for(lambda: lease.session_frames)  # hello_ack: the socket is up
        command = {"commandId": str(uuid.uuid4()), "command": {"name": "snapshot"}}
        answered = await http.post(f"/v1/sessions/{session_id}/commands", json=command)
        assert answered.status_code == 200, answered.text

        during = await scrape(backend)
        assert value(during, "understudy_devices_online") == 1
        assert value(during, "understudy_device_free_tabs") == 1
        assert value(during, "understudy_sessions", state="connected") == 1
        assert (
            value(
                during,
                "understudy_session_create_duration_seconds_count",
                mode="unattended",
                status="201",
            )
            == 1
        )
        assert (
            value(
                during,
                "understudy_command_duration_seconds_count",
                command="snapshot",
                kind="read",
            )
            == 1
        )
        assert (
            value(
                during,
                "understudy_lifecycle_transitions_total",
                from_state="provisioning",
                to_state="connected",
            )
            == 1
        )

        # The runbook's "watch lost": the device goes silent and the 90 s grace passes.
        await device.stop()
        await backend.until(
            lambda: backend.session_status(session_id) == "recovering", "the loss is noticed"
        )
        await backend.clock.advance(91)
        await backend.until(lambda: backend.session_status(session_id) == "lost", "lost")
        assert (await http.get(f"/v1/sessions/{session_id}")).json()["status"] == "lost"

    after = await scrape(backend)
    lost = [
        s
        for s in after["understudy_lifecycle_transitions"].samples
        if s.name.endswith("_total") and s.labels["to_state"] == "lost"
    ]
    assert [s.value for s in lost] == [1.0]
    assert value(after, "understudy_sessions", state="connected") == 0
    assert value(after, "understudy_devices_online") == 0
    assert value(after, "understudy_device_free_tabs") == 0
    assert value(after, "understudy_events_total", event="device.offline", outcome="") == 1
    assert value(after, "understudy_sqlite_transactions_total") >= value(
        after, "understudy_sqlite_commits_total"
    )
    # Every turn runs statements: more of them than turns, and the count only grows.
    if os.environ.get("UNDERSTUDY_TEST_ENGINE") != "postgresql":  # SQLite's executor counts
        statements = value(after, "understudy_sqlite_statements_total")
        assert statements > value(after, "understudy_sqlite_transactions_total")
        assert statements > value(during, "understudy_sqlite_statements_total") > 0


async def test_refused_creates_are_timed_under_their_status_and_mode(backend: Backend) -> None:
    async with httpx.AsyncClient(base_url=backend.url, timeout=10) as anonymous:
        refused = await anonymous.post("/v1/sessions", json=unattended(), headers=idem())
    assert refused.status_code == 401
    async with backend.client(backend.api_key()) as http:
        no_key = await http.post("/v1/sessions", json=unattended())
        assert no_key.status_code == 400
    families = await scrape(backend)
    name = "understudy_session_create_duration_seconds_count"
    # Refused by the guard before the body says the mode; refused after it did.
    assert value(families, name, mode="unknown", status="401") == 1
    assert value(families, name, mode="unattended", status="400") == 1


async def test_a_timer_turn_that_fails_is_logged_and_counted_not_swallowed(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert value(await scrape(backend), "understudy_timer_errors_total", actor="tenant") == 0

    def broken_tick(self: TenantCoordinator, out: Outbox, now: float) -> None:
        raise RuntimeError("tick failed")

    monkeypatch.setattr(TenantCoordinator, "_tick", broken_tick)
    await backend.device()  # online: the tenant's timer is armed for its heartbeat deadline
    with caplog.at_level(logging.ERROR, logger="understudy._turns"):
        await backend.clock.advance(OFFLINE_AFTER_S)
        await backend.settle()
    families = await scrape(backend)
    assert value(families, "understudy_timer_errors_total", actor="tenant") == 1
    assert value(families, "understudy_timer_errors_total", actor="session") == 0
    assert "tenant timer turn failed" in caplog.text
    assert "RuntimeError: tick failed" in caplog.text


# Statements of one governed write on SQLite, end to end: the credential lookup (1), the
# admission turn (5), the write_ready and result turns (1 each). The timer's re-arm after each
# turn and the HTTP waiter take what the turns wrote instead of asking the rows again.
GOVERNED_WRITE_STATEMENTS = 8


async def test_a_governed_write_runs_a_fixed_number_of_sql_statements(backend: Backend) -> None:
    if os.environ.get("UNDERSTUDY_TEST_ENGINE") == "postgresql":  # SQLite's executor counts
        return
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        created = await http.post("/v1/sessions", json=unattended(), headers=idem())
        assert created.status_code == 201, created.text
        session_id = created.json()["sessionId"]
        lease = next(iter(device.leases.values()))
        await device.wait_for(lambda: lease.session_frames)  # hello_ack: the socket is up

        async def write() -> None:
            command = {"commandId": str(uuid.uuid4()), "command": {"name": "click", "ref": "g1e1"}}
            answered = await http.post(f"/v1/sessions/{session_id}/commands", json=command)
            assert answered.status_code == 200, answered.text
            assert answered.json()["status"] == "succeeded", answered.text

        await write()  # warm: the first write of a session may read what later ones need not
        first = value(await scrape(backend), "understudy_sqlite_statements_total")
        second = value(await scrape(backend), "understudy_sqlite_statements_total")
        scrape_cost = second - first  # a scrape's own statements, if any
        writes = 5
        for _ in range(writes):
            await write()
        after = value(await scrape(backend), "understudy_sqlite_statements_total")
    assert (after - second - scrape_cost) / writes == GOVERNED_WRITE_STATEMENTS
