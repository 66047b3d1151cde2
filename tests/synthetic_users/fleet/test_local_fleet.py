"""LocalChromiumFleet with real Chromium against a real Understudy backend.

Each test drives the fleet the way the persona runner will: acquire a profile, open an unattended
session pinned to its device, browse a local site that sets and echoes a cookie, release. What a
user of the fleet would check: two personas never share cookies, a released profile comes back
empty, the size bound holds, a crashed browser is noticed and replaced, and a restarted service
reuses the devices it enrolled.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import time
from typing import TYPE_CHECKING

import pytest

from synthetic_users._fleet import FleetExhausted
from tests.e2e._skip import require_chromium

if TYPE_CHECKING:
    from tests.synthetic_users.fleet.conftest import Stack

require_chromium()
pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def _online(stack: Stack) -> dict[str, str]:
    operator = await stack.operator()
    return {d.device_id: d.state for d in (await operator.list_devices("synthetic-users")).devices}


async def test_two_holders_get_two_online_devices_that_share_no_cookies_and_reuse_wipes(
    stack: Stack,
) -> None:
    fleet = await stack.fleet(max_browsers=2)
    consumer = await stack.consumer()
    first, second = await asyncio.gather(fleet.acquire("persona-a"), fleet.acquire("persona-b"))
    assert first.device_id != second.device_id
    states = await _online(stack)
    assert states[first.device_id] == states[second.device_id] == "online"

    set_a = await stack.page_text(consumer, first, "/set?v=alpha", "/echo")
    assert "cookies: persona=alpha" in set_a
    assert "cookies: none" in await stack.page_text(consumer, second, "/echo")

    await fleet.release(first)
    assert not fleet.alive(first)
    again = await fleet.acquire("persona-c")
    # The idle device is reused (no third device), on a fresh profile: the cookie is gone.
    assert again.device_id == first.device_id
    assert again.generation != first.generation
    assert "cookies: none" in await stack.page_text(consumer, again, "/echo")
    assert sorted(await _online(stack)) == sorted({first.device_id, second.device_id})


async def test_the_size_bound_holds_until_a_profile_is_released(stack: Stack) -> None:
    fleet = await stack.fleet(max_browsers=1)
    only = await fleet.acquire("persona-a")
    with pytest.raises(FleetExhausted):
        await fleet.acquire("persona-b", timeout_s=0.5)
    waiting = asyncio.ensure_future(fleet.acquire("persona-b", timeout_s=30))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await fleet.release(only)
    handed_on = await waiting
    assert handed_on.device_id == only.device_id
    assert list(await _online(stack)) == [only.device_id]


async def test_a_killed_browser_is_not_alive_and_a_broken_release_brings_it_back(
    stack: Stack,
) -> None:
    fleet = await stack.fleet(max_browsers=1)
    consumer = await stack.consumer()
    profile = await fleet.acquire("persona-a", allowed_origins=[stack.site.origin])
    assert fleet.alive(profile)
    state = json.loads((stack.root / "fleet.json").read_text())
    os.killpg(state["browsers"][profile.device_id], signal.SIGKILL)
    for _ in range(100):
        if not fleet.alive(profile):
            break
        await asyncio.sleep(0.05)
    assert not fleet.alive(profile)

    await fleet.release(profile, broken=True)
    relaunched = await fleet.acquire("persona-a")
    assert fleet.alive(relaunched)
    assert (await _online(stack))[relaunched.device_id] == "online"
    assert "cookies: none" in await stack.page_text(consumer, relaunched, "/echo")


async def _all_offline(stack: Stack) -> bool:
    for _ in range(100):
        if all(state == "offline" for state in (await _online(stack)).values()):
            return True
        await asyncio.sleep(0.1)
    return False


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_restarted_fleet_reuses_its_enrolled_devices(stack: Stack) -> None:
    fleet = await stack.fleet(max_browsers=2)
    first = await asyncio.gather(fleet.acquire("a"), fleet.acquire("b"))
    state_file = stack.root / "fleet.json"
    pids = json.loads(state_file.read_text())["browsers"].values()
    await fleet.close()
    assert not any(_running(pid) for pid in pids), "close() left a browser running"
    assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
    assert json.loads(state_file.read_text())["browsers"] == {}
    assert await _all_offline(stack)

    restarted = await stack.fleet(max_browsers=2)
    assert restarted.device_ids == sorted(p.device_id for p in first)
    second = await asyncio.gather(restarted.acquire("c"), restarted.acquire("d"))
    assert {p.device_id for p in second} == {p.device_id for p in first}
    assert sorted(await _online(stack)) == sorted(p.device_id for p in first)


async def test_a_fleet_started_after_a_crash_kills_the_browsers_left_behind(
    stack: Stack,
) -> None:
    crashed = await stack.fleet(max_browsers=1)
    left_behind = await crashed.acquire("a")
    # The service died without close(): its browser still runs, online, on the same root.
    successor = await stack.fleet(max_browsers=1)
    # The successor killed it; the kernel may still be tearing it down on a loaded machine.
    deadline = time.monotonic() + 10
    while crashed.alive(left_behind) and time.monotonic() < deadline:  # noqa: ASYNC110 (a process, no event)
        await asyncio.sleep(0.05)
    assert not crashed.alive(left_behind)
    assert successor.device_ids == [left_behind.device_id]
    profile = await successor.acquire("b")
    assert profile.device_id == left_behind.device_id
    assert list(await _online(stack)) == [left_behind.device_id]
