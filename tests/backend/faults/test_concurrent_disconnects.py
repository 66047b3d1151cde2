"""Many sessions at once while devices restart at random: nothing runs twice, nothing is lost.

Eight devices carry two unattended sessions each. Every session runs a seeded mix of writes and
reads one after the other (a session is single-flight) with the connector's retry rules, all
sessions at once, while seeded chaos tasks restart random devices' extensions (same browser
epoch: sockets drop, the write journal survives). The backend runs on real time, so deadlines fire
on their own as in production. On three nodes the consumers call node a while the devices' sockets
sit on nodes b and c (alternately), so every command crosses nodes.

Checked for every command: at most one execution, exactly one for a succeeded write, and a final
answer that is durable (`200`), an explicit unknown, or, on a session that already holds an
unknown write, `409 writes_blocked`; the durable state polled afterwards agrees with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.backend.faults._caller import UNKNOWN, Answer, check_final, drive
from tests.backend.faults._deployments import deployed
from tests.backend.faults._harness import open_session, read, write
from understudy._clock import ManualClock
from understudy.generated import models as m

if TYPE_CHECKING:
    from pathlib import Path

    import httpx
    import pytest

    from tests.support.simdevice import SimulatedDevice

SEED = 20_261_130
DEVICES = 8
SESSIONS_PER_DEVICE = 2
COMMANDS_PER_SESSION = 15
WRITE_SHARE = 0.6
CHAOS_WORKERS = 3
WRITES = ("click", "type", "navigate")
READS = ("snapshot", "get_tabs", "hello")


class WallClock(ManualClock):
    """Real time, behind the clock type the shared in-process starter takes."""

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, deadline: float) -> None:
        delay = deadline - time.time()
        if delay > 0:
            await asyncio.sleep(delay)

    async def advance(self, seconds: float) -> None:
        raise NotImplementedError("real time moves by itself")


@dataclass
class Session:
    device: SimulatedDevice
    http: httpx.AsyncClient
    session_id: str
    plan: list[dict[str, Any]]
    finals: list[tuple[bool, Answer]] = field(default_factory=list)  # (is a write, final)


async def _run(session: Session) -> None:
    for body in session.plan:
        final = await drive(session.http, session.session_id, body, budget_s=60, pause_s=0.02)
        session.finals.append((body["command"]["name"] in WRITES, final))


async def _chaos(
    devices: list[SimulatedDevice], rng: random.Random, stop: asyncio.Event, busy: set[int]
) -> int:
    """Restart random devices' extensions until `stop`; `busy` keeps workers off each other."""
    restarts = 0
    while not stop.is_set():
        await asyncio.sleep(rng.uniform(0.02, 0.12))
        free = [i for i in range(len(devices)) if i not in busy]
        if stop.is_set() or not free:
            continue
        chosen = rng.choice(free)
        busy.add(chosen)
        try:
            await devices[chosen].restart_extension()
        finally:
            busy.discard(chosen)
        restarts += 1
    return restarts


async def test_concurrent_sessions_with_random_restarts_lose_nothing_and_run_nothing_twice(
    tmp_path: Path, deployment_kind: str, request: pytest.FixtureRequest
) -> None:
    plan_rng = random.Random(SEED)  # noqa: S311 - a reproducible plan, not a secret
    sessions: list[Session] = []
    async with (
        deployed(deployment_kind, tmp_path, request, WallClock()) as deployment,
        contextlib.AsyncExitStack() as clients,
    ):
        backend = deployment.http
        devices = [
            await deployment.device_node(d).device(device=f"laptop-{d}") for d in range(DEVICES)
        ]
        for d, device in enumerate(devices):
            for s in range(SESSIONS_PER_DEVICE):
                # One key per session: the per-credential request limiter is not under test.
                key = backend.api_key(actor=f"bot-{d}-{s}")
                http = await clients.enter_async_context(backend.client(key))
                session_id, _ = await open_session(
                    http,
                    device,
                    device_id=f"laptop-{d}",
                    origin=f"https://s{d}-{s}.example",
                    profile=f"profile-{d}-{s}",
                )
                plan = [
                    write(plan_rng.choice(WRITES))
                    if plan_rng.random() < WRITE_SHARE
                    else read(plan_rng.choice(READS))
                    for _ in range(COMMANDS_PER_SESSION)
                ]
                sessions.append(Session(device, http, session_id, plan))

        stop, busy = asyncio.Event(), set[int]()
        rngs = [random.Random(SEED + w) for w in range(1, CHAOS_WORKERS + 1)]  # noqa: S311
        chaos = [asyncio.create_task(_chaos(devices, rng, stop, busy)) for rng in rngs]
        started = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.gather(*(_run(s) for s in sessions)), 120)
        finally:
            stop.set()
            restarts = sum(await asyncio.gather(*chaos))
        elapsed = time.monotonic() - started

        mismatched = []
        for session in sessions:
            for _, final in session.finals:
                if final.label == "409 writes_blocked":
                    continue
                url = f"/v1/sessions/{session.session_id}/commands/{final.command_id}"
                durable = await session.http.get(url)
                if (durable.status_code, durable.json()) != (final.status, final.body):
                    mismatched.append((final.trail, durable.status_code, durable.text))

    executions: dict[str, int] = {}
    for device in devices:
        executions.update(device.executions)
    finals = [final for session in sessions for _, final in session.finals]
    disturbed = sum(any(" 50" in step or "Error" in step for step in f.trail) for f in finals)
    figures = deployment.figures
    figures.run("concurrent", "random-extension-restarts", finals, executions)
    figures.note("concurrent run: device restarts", restarts)
    figures.note("concurrent run: commands that met a 503/504 or a dropped request", disturbed)

    assert restarts >= 10, f"only {restarts} restarts in {elapsed:.1f}s: the chaos did not bite"
    assert len(finals) == DEVICES * SESSIONS_PER_DEVICE * COMMANDS_PER_SESSION
    for session in sessions:
        blocked_since_unknown = False
        for is_write, final in session.finals:
            check_final(final, executions, write=is_write, allow_blocked=blocked_since_unknown)
            blocked_since_unknown |= is_write and final.code == UNKNOWN
    succeeded_writes = {
        final.command_id
        for session in sessions
        for is_write, final in session.finals
        if is_write and final.label == "200 succeeded"
    }
    assert succeeded_writes <= set(executions)
    assert all(count <= 1 for count in executions.values()), executions
    assert mismatched == []
    # The simulated extension refuses a grant it did not prepare; the backend must not rely on
    # that: a grant follows only a fresh admission (write_prepare), whatever the device does.
    sent: Counter[tuple[str, str]] = Counter()
    for device in devices:
        for lease in device.leases.values():
            for frame in lease.session_frames:
                if isinstance(frame, m.SessionServerWritePrepare | m.SessionServerWriteGrant):
                    sent[frame.type, str(frame.command_id)] += 1
    overgranted = {
        cid
        for kind, cid in sent
        if kind == "write_grant" and sent[kind, cid] > sent["write_prepare", cid]
    }
    assert overgranted == set()
