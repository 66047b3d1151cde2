"""Exact SQLite quotas through HTTP: session creation per actor, device tickets per device, the
minute windows on the manual clock, and QUOTA_POLICY overrides in a running app and at start-up."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from tests.backend.conftest import idem, start_backend, stop_backend, unattended
from understudy._config import load_settings

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

    from tests.backend.conftest import Backend


def seconds_to_next_minute(backend: Backend) -> int:
    now = backend.clock.now()
    return max(1, math.ceil((math.floor(now / 60) + 1) * 60 - now))


def assert_rate_limited(response: httpx.Response, backend: Backend) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "rate_limited"
    assert int(response.headers["retry-after"]) == seconds_to_next_minute(backend)


async def create_attended(http: Any) -> httpx.Response:
    response: httpx.Response = await http.post("/v1/sessions")
    return response


async def test_session_creation_is_10_per_minute_per_actor_then_429(backend: Backend) -> None:
    async with backend.client(backend.api_key(actor="bot")) as http:
        for _ in range(10):
            assert (await create_attended(http)).status_code == 200
        refused = await create_attended(http)
        # The quota is checked before allocation: an unattended create is refused the same way
        # even though no device is online (which would otherwise be 503).
        unattended_refused = await http.post("/v1/sessions", json=unattended(), headers=idem())

    assert_rate_limited(refused, backend)
    assert_rate_limited(unattended_refused, backend)


async def test_unattended_and_attended_creates_share_the_actor_quota(backend: Backend) -> None:
    await backend.device()
    async with backend.client(backend.api_key(actor="bot")) as http:
        for i in range(2):
            body = unattended([f"https://s{i}.example"], f"profile-{i}")
            created = await http.post("/v1/sessions", json=body, headers=idem())
            assert created.status_code == 201, created.text
        for _ in range(8):
            assert (await create_attended(http)).status_code == 200
        assert_rate_limited(await create_attended(http), backend)


async def test_session_quota_is_per_actor_not_per_tenant_or_key(backend: Backend) -> None:
    first_key, second_key = backend.api_key(actor="bot"), backend.api_key(actor="bot")
    async with backend.client(first_key) as bot, backend.client(second_key) as same_actor:
        for http in [bot] * 5 + [same_actor] * 5:
            assert (await create_attended(http)).status_code == 200
        assert_rate_limited(await create_attended(bot), backend)
        assert_rate_limited(await create_attended(same_actor), backend)
    async with backend.client(backend.api_key(actor="planner")) as other_actor:
        assert (await create_attended(other_actor)).status_code == 200


async def test_session_quota_resets_in_the_next_minute(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        for _ in range(10):
            await create_attended(http)
        refused = await create_attended(http)
        assert refused.status_code == 429
        await backend.clock.advance(int(refused.headers["retry-after"]) - 1)
        assert (await create_attended(http)).status_code == 429
        await backend.clock.advance(1)
        for _ in range(10):
            assert (await create_attended(http)).status_code == 200
        assert (await create_attended(http)).status_code == 429


async def test_device_tickets_are_30_per_minute_per_device_then_429(backend: Backend) -> None:
    laptop = await backend.device(device="laptop-1", connect=False)
    desktop = await backend.device(device="desktop-1", connect=False)
    body = {"browserEpoch": laptop.browser_epoch}
    async with backend.client(laptop.credential) as http:
        for _ in range(30):
            assert (await http.post("/v1/device/connect-ticket", json=body)).status_code == 200
        refused = await http.post("/v1/device/connect-ticket", json=body)
    assert_rate_limited(refused, backend)
    # Another device of the same tenant has its own counter.
    assert (await desktop.ticket()).ticket
    # The next minute starts a new window.
    await backend.clock.advance(int(refused.headers["retry-after"]))
    assert (await laptop.connect()).device_id == "laptop-1"


async def test_quota_policy_overrides_are_honoured_by_a_running_app(tmp_path: Path) -> None:
    policy = '{"sessionCreatesPerActorPerMin": 2, "device_tickets_per_device_per_min": 3}'
    quota = load_settings({"QUOTA_POLICY": policy}).quota
    backend = await start_backend(tmp_path, quota=quota)
    try:
        device = await backend.device(connect=False)
        for _ in range(3):
            await device.ticket()
        async with backend.client(device.credential) as http:
            tickets = await http.post(
                "/v1/device/connect-ticket", json={"browserEpoch": device.browser_epoch}
            )
        assert_rate_limited(tickets, backend)
        async with backend.client(backend.api_key()) as http:
            assert (await create_attended(http)).status_code == 200
            assert (await create_attended(http)).status_code == 200
            refused = await create_attended(http)
        assert_rate_limited(refused, backend)
        assert "2 per minute" in refused.json()["detail"]
    finally:
        await stop_backend(backend)


def test_a_bad_quota_policy_stops_serve_with_a_clear_message(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("UNDERSTUDY_") and key not in ("DEVICE_TOKENS", "QUOTA_POLICY")
    }
    env |= {
        "UNDERSTUDY_DATA_DIR": str(tmp_path / "data"),
        "UNDERSTUDY_PORT": "0",
        "QUOTA_POLICY": '{"sessionCreatesPerActorPerMin": 0}',
    }
    result = subprocess.run(
        [sys.executable, "-m", "understudy.cli", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "QUOTA_POLICY" in result.stderr
    assert "'sessionCreatesPerActorPerMin' must be a whole number from 1" in result.stderr
    assert "serving" not in result.stdout
    assert not (tmp_path / "data").exists()
