"""The connection deadlines of the server: one timer handle per deadline, re-armed per request."""

from __future__ import annotations

import asyncio

from understudy._server import _Deadline

DELAY_S = 0.05


async def test_a_deadline_fires_once_its_last_arming_has_passed() -> None:
    loop = asyncio.get_running_loop()
    fired: list[float] = []
    deadline = _Deadline(loop, lambda: fired.append(loop.time()))
    armed_at = loop.time()
    for _ in range(4):  # re-armed before each due time: it moves later each time
        deadline.arm(DELAY_S)
        armed_at = loop.time()
        await asyncio.sleep(DELAY_S / 2)
    await asyncio.sleep(DELAY_S * 2)
    assert len(fired) == 1
    assert fired[0] >= armed_at + DELAY_S - 0.002  # never before the last arming's due time
    assert not deadline.armed


async def test_a_disarmed_deadline_does_not_fire_and_can_be_armed_again() -> None:
    loop = asyncio.get_running_loop()
    fired: list[str] = []
    deadline = _Deadline(loop, lambda: fired.append("fired"))
    deadline.arm(DELAY_S)
    deadline.disarm()
    await asyncio.sleep(DELAY_S * 2)
    assert fired == []
    deadline.arm(DELAY_S)
    await asyncio.sleep(DELAY_S * 2)
    assert fired == ["fired"]


async def test_a_shorter_arming_replaces_the_scheduled_handle() -> None:
    loop = asyncio.get_running_loop()
    fired: list[str] = []
    deadline = _Deadline(loop, lambda: fired.append("fired"))
    deadline.arm(60.0)
    deadline.arm(DELAY_S)
    await asyncio.sleep(DELAY_S * 2)
    assert fired == ["fired"]


async def test_a_closed_deadline_never_fires() -> None:
    loop = asyncio.get_running_loop()
    fired: list[str] = []
    deadline = _Deadline(loop, lambda: fired.append("fired"))
    deadline.arm(DELAY_S)
    deadline.close()
    await asyncio.sleep(DELAY_S * 2)
    assert fired == []
    assert not deadline.armed
