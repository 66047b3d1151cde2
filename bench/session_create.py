"""Session creation with a real Chromium device: ``POST /v1/sessions`` to ``201``.

Method:

1. Set-up (``bench._chromium``): an `understudy serve` subprocess (SQLite ``synchronous=FULL``,
   quotas raised), a local page on 127.0.0.1, and one headless Debian Chromium
   (``/usr/lib/chromium/chromium``) with the built extension enrolled as the server's only device,
   online before the first sample.
2. One sample: ``POST /v1/sessions`` with an unattended body (the device, the local page's origin,
   a fresh profile-state key) and a fresh ``Idempotency-Key`` on a keep-alive HTTP/1.1 connection
   (``bench._http``), timed from the request written to the reply read. ``201`` means the backend
   allocated the device, the extension handed the session a tab (its spare window's, kept ready
   ahead of the next provision, or a new unfocused window when none was ready), attached to it and
   connected the session socket. A ``202`` (still provisioning after the backend's 5 s wait) is
   counted, and its sample runs until ``GET`` shows the session ``connected``.
3. Between samples (untimed for the target): the session lives ``HOLD_S`` (1 s), then
   ``DELETE`` the session, then poll ``GET /v1/devices``
   every 20 ms until the device's ``usedCapacity`` is 0 again (the extension acknowledged the
   close), so every sample starts from an idle device. The delete-to-free time (``DELETE`` sent to
   the first ``GET /v1/devices`` that shows the capacity free) is reported too. The extension
   opens its next spare window once the session is connected, so within the hold.
4. Reported: p50/p95/p99 (nearest rank) of the creation round trip; the server's CPU per creation
   (utime + stime over the create requests only).
5. Steps (``bench._hops``): after the measurement, ``traced`` more creations run the same way with
   timing wrappers in the extension's service worker, and each is split into steps: the provision
   frame's arrival, the tab, the debugger attachment and its set-up calls, the session ticket, the
   session socket and its hello (see ``_hops.create_breakdown``), and how many of them found the
   spare window ready.

Warm-up: ``warmup`` creations (each deleted the same way), not recorded. Sample size:
``samples`` creations (plus ``traced`` for the steps, not in the latency figures).
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from typing import TYPE_CHECKING, Any, Final

from bench import _hops
from bench._chromium import chromium_rig
from bench._report import Table, Target, fmt
from bench._stats import summary

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from bench._chromium import Rig
    from bench._context import Context
    from bench._http import HttpConnection

TARGET_P50_MS: Final = 100.0
# How long each session lives between its 201 and its DELETE (untimed). The extension opens its
# next spare window once a session is connected; the window and its renderer then take a few
# hundred ms of the 2 cores, which a session deleted at once would share with its own DELETE and
# the next creation (bench/README.md has the figures).
HOLD_S: Final = 1.0


async def run(
    data_root: Path,
    samples: int,
    warmup: int,
    traced: int,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Create, delete and wait for the free device, ``warmup + samples`` times."""
    created: list[float] = []
    freed: list[float] = []
    statuses: dict[str, int] = {}
    server_cpu = 0.0
    load_before = os.getloadavg()[0]
    async with chromium_rig(data_root / "session-create", log) as rig:
        connection = rig.server.connection()
        try:
            for index in range(warmup + samples):
                measured = index >= warmup
                before = rig.server.sample().cpu_s
                started = time.perf_counter_ns()
                session_id, reply = await rig.create_session(connection, f"bench-create-{index}")
                elapsed_ms = (time.perf_counter_ns() - started) / 1e6
                cpu = rig.server.sample().cpu_s - before
                await asyncio.sleep(HOLD_S)
                started = time.perf_counter_ns()
                await rig.end_session(connection, session_id)
                free_ms = (time.perf_counter_ns() - started) / 1e6
                if not measured:
                    continue
                statuses[str(reply.status)] = statuses.get(str(reply.status), 0) + 1
                created.append(elapsed_ms)
                freed.append(free_ms)
                server_cpu += cpu
                if len(created) % max(1, samples // 5) == 0:
                    log(
                        f"session_create: {len(created)}/{samples}: p50 "
                        f"{summary(created)['p50']:.1f} ms"
                    )
            log(f"session_create: steps of {traced} traced creations ...")
            steps = await _traced(rig, connection, traced)
        finally:
            await connection.close()
    return {
        "method": __doc__,
        "samples": samples,
        "warmup": warmup,
        "statuses": statuses,
        "create_ms": summary(created),
        "delete_to_free_ms": summary(freed),
        "server_cpu_ms_per_create": server_cpu * 1000 / max(1, len(created)),
        "loadavg_1m": [load_before, os.getloadavg()[0]],
        "steps": steps,
        "steps_method": _hops.__doc__,
    }


async def _traced(rig: Rig, connection: HttpConnection, count: int) -> dict[str, Any]:
    installed = await _hops.install(rig)
    spans: list[tuple[float, float]] = []
    for index in range(count):
        sent = time.time() * 1000
        session_id, _ = await rig.create_session(connection, f"bench-traced-{index}")
        spans.append((sent, time.time() * 1000))
        await asyncio.sleep(HOLD_S)
        await rig.end_session(connection, session_id)
    trace, offset, error = await _hops.collect(rig)
    report = _hops.create_breakdown(spans, trace, offset)
    report["clock_offset_ms"] = [installed["offset_ms"], offset]
    report["clock_offset_error_ms"] = max(installed["offset_error_ms"], error)
    return report


# -- the suite's interface ---------------------------------------------------------------------


async def suite(ctx: Context) -> dict[str, Any]:
    """50 creations after 5 of warm-up (quick: 10 after 5); 10 traced for the steps (quick: 5)."""
    return await run(ctx.data_root, 10 if ctx.quick else 50, 5, 5 if ctx.quick else 10, ctx.log)


def tables(result: dict[str, Any]) -> list[Table]:
    create, freed = result["create_ms"], result["delete_to_free_ms"]
    table = Table(
        "Session creation with a real Chromium device: POST /v1/sessions to 201",
        [
            "n",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "server CPU ms",
            "delete to free p50 ms",
            "delete to free p95 ms",
        ],
    )
    table.rows.append(
        [
            str(create["n"]),
            fmt(create["p50"]),
            fmt(create["p95"]),
            fmt(create["p99"]),
            fmt(create["max"]),
            fmt(result["server_cpu_ms_per_create"]),
            fmt(freed["p50"]),
            fmt(freed["p95"]),
        ]
    )
    codes = ", ".join(f"{count} x {status}" for status, count in sorted(result["statuses"].items()))
    table.notes.append(
        f"{result['warmup']} warm-up creations; replies: {codes}; each sample starts on an idle "
        "device (the previous session deleted and its capacity free)"
    )
    steps = result["steps"]
    breakdown = Table(
        f"Where a session creation spends its time ({steps['creations']} traced, ms)",
        ["step", "p50", "mean"],
    )
    for key, label in [*_hops.CREATE_STEPS, ("total", "total (client round trip)")]:
        cell = steps["steps_ms"].get(key, {})
        breakdown.rows.append(
            [label, fmt(cell.get("p50", math.nan)), fmt(cell.get("mean", math.nan))]
        )
    breakdown.notes.append(
        f"the spare window was ready for {steps.get('spare_used', 0)} of {steps['creations']}; "
        + _hops.clock_note(steps)
    )
    return [table, breakdown]


def targets(result: dict[str, Any]) -> list[Target]:
    p50 = result["create_ms"]["p50"]
    return [
        Target(
            "session creation to 201 with a real Chromium device",
            f"p50 <= {TARGET_P50_MS:.0f} ms",
            f"p50 {fmt(p50)} ms, p95 {fmt(result['create_ms']['p95'])} ms, "
            f"p99 {fmt(result['create_ms']['p99'])} ms (delete -> capacity free p50 "
            f"{fmt(result['delete_to_free_ms']['p50'])} ms)",
            p50 <= TARGET_P50_MS,
        )
    ]
