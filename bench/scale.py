"""Scale: connected simulated devices with heartbeats in one server process.

Method, per level (1k, 5k and 10k devices; ``--quick``: 1k), each on a fresh server and data
directory with ``synchronous=FULL`` (the default):

1. Enroll N devices through ``DEVICE_TOKENS``, in tenants of ``tenant_size`` devices (see below),
   start ``understudy serve``, wait 2 s and read the server's VmRSS: the baseline.
2. Connect: two swarm processes (``bench._swarm``), 32 devices in flight each; every device takes a
   connect ticket over HTTP, opens the device socket, sends ``hello`` and waits for ``welcome``.
   Then wait until the server is quiet (under 5% of a core for 1 s), because the coordinator's
   turn for each hello runs after the ``welcome`` went out. Connect rate = N / time to the last
   ``welcome``; server CPU per connect = server CPU from the first ticket until quiet / N.
3. Memory: VmRSS now; RSS per device = (connected - baseline) / N. VmHWM is the peak.
4. Idle cost: server CPU over a 3 s window with every socket open and no traffic.
5. Heartbeats: every device sends ``rounds`` heartbeats at the given interval, the first at a
   uniformly random offset, so the aggregate rate is steady at N / interval per second. The full
   run uses the real 22 s interval for one round; ``--quick`` compresses it to 5 s (the results
   say which). Handling cost = (server CPU during the phase - idle rate x phase time) / heartbeats
   acknowledged, per 1000; the client records each heartbeat's round trip to its ``heartbeat_ack``.

Tenants: the levels spread devices over tenants of ``tenant_size`` (100). The single-tenant part
connects N devices of one tenant the same way, at growing N, to show what a hello costs as a
tenant grows: every coordinator turn re-arms the tenant's timer at its earliest deadline (one SQL
aggregate since the coordinator stopped loading every row; before, CPU per connect grew with N).

Warm-up: none beyond the connect phase itself. Sample size: N connects and N x rounds heartbeats
per level; N connects per single-tenant size.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import time
from typing import TYPE_CHECKING, Any, Final

from bench._proc import open_file_limit, sample
from bench._profile import Profile
from bench._report import Table, Target, fmt
from bench._server import TENANT, Server, new_devices
from bench._stats import summary
from bench._swarm import raise_open_file_limit
from bench._workers import Worker

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from bench._context import Context

SWARM_PROCESSES: Final = 2
IN_FLIGHT_PER_PROCESS: Final = 32
REAL_HEARTBEAT_INTERVAL_S: Final = 22.0
SETTLE_S: Final = 2.0
IDLE_WINDOW_S: Final = 3.0
DEFAULT_TENANT_SIZE: Final = 100
# Descriptors beyond one per socket: SQLite, the listening socket, stdio, the telemetry file.
FD_HEADROOM: Final = 256
TARGET_RSS_BYTES: Final = 1.5 * 2**30  # 10,000 devices within 1.5 GiB
MIB: Final = 2**20


async def run(
    data_root: Path,
    levels: list[int],
    heartbeat_interval_s: float,
    rounds: int,
    single_tenant_sizes: list[int],
    tenant_size: int = DEFAULT_TENANT_SIZE,
    profile_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run every level, then the single-tenant connects; returns JSON-ready results."""
    soft, hard = raise_open_file_limit()
    results: dict[str, Any] = {
        "method": __doc__,
        "open_file_limit": {"soft": soft, "hard": hard},
        "synchronous": "FULL",
        "tenant_size": tenant_size,
        "heartbeat_interval_s": heartbeat_interval_s,
        "heartbeat_interval_is_real": heartbeat_interval_s == REAL_HEARTBEAT_INTERVAL_S,
        "heartbeat_rounds": rounds,
        "swarm_processes": SWARM_PROCESSES,
        "in_flight_per_process": IN_FLIGHT_PER_PROCESS,
        "levels": [],
        "single_tenant": [],
    }
    for count in levels:
        needed = count + FD_HEADROOM
        if needed > soft:
            log(f"scale: skipping {count} devices: needs ~{needed} descriptors, limit is {soft}")
            results["levels"].append({"devices": count, "skipped": f"open-file limit {soft}"})
            continue
        log(f"scale: {count} devices in tenants of {tenant_size} ...")
        level = await _level(
            data_root / f"scale-{count}", count, tenant_size, heartbeat_interval_s, rounds
        )
        results["levels"].append(level)
        log(
            f"scale: {count} devices: {level['connect_rate_per_s']:.0f} connects/s, "
            f"{level['rss_connected_mib']:.0f} MiB RSS ({level['rss_per_device_kib']:.1f} "
            f"KiB/device), {level['cpu_s_per_1000_heartbeats']:.3f} CPU s/1000 heartbeats"
        )
    for index, count in enumerate(single_tenant_sizes):
        log(f"scale: {count} devices in one tenant (connect only) ...")
        profile = profile_dir if index == len(single_tenant_sizes) - 1 else None
        one = await _single_tenant(data_root / f"single-{count}", count, profile)
        results["single_tenant"].append(one)
        log(
            f"scale: one tenant, {count} devices: {one['connect_rate_per_s']:.1f} connects/s, "
            f"{one['server_cpu_ms_per_connect']:.1f} ms server CPU per connect"
        )
    return results


async def _swarm(server: Server, credentials: list[str], workers: list[Worker]) -> None:
    """Start the swarm processes into ``workers`` (so the caller stops them even on failure)."""
    for index in range(SWARM_PROCESSES):
        workers.append(
            await Worker.start(
                "bench._swarm",
                {
                    "host": server.host,
                    "port": server.port,
                    "credentials": credentials[index::SWARM_PROCESSES],
                    "concurrency": IN_FLIGHT_PER_PROCESS,
                    "seed": index,
                },
            )
        )
    for worker in workers:
        await worker.receive()  # ready


async def _connect(server: Server, workers: list[Worker], count: int) -> dict[str, Any]:
    before = server.sample().cpu_s
    started = time.perf_counter()
    replies = await asyncio.gather(*(w.ask({"op": "connect"}) for w in workers))
    connect_s = time.perf_counter() - started
    backlog_s = await server.settle()
    cpu = server.sample().cpu_s - before
    ok = sum(r["ok"] for r in replies)
    return {
        "devices": count,
        "connected": ok,
        "connect_failures": sum(r["failed"] for r in replies),
        "connect_errors": [e for r in replies for e in r["errors"]][:5],
        "connect_s": round(connect_s, 3),
        "connect_rate_per_s": ok / connect_s if connect_s else 0.0,
        "connect_latency_ms": summary([ms for r in replies for ms in r["latency_ms"]]),
        "server_settle_s": round(backlog_s, 3),
        "server_cpu_s_connect": round(cpu, 3),
        "server_cpu_ms_per_connect": cpu / max(ok, 1) * 1000,
    }


async def _level(
    data_dir: Path, count: int, tenant_size: int, interval_s: float, rounds: int
) -> dict[str, Any]:
    _fresh(data_dir)
    devices = new_devices(count)
    tenants = {device: f"{TENANT}-{i // tenant_size:04d}" for i, device in enumerate(devices)}
    server = Server(data_dir, "FULL", devices, tenants)
    await server.start()
    workers: list[Worker] = []
    try:
        await asyncio.sleep(SETTLE_S)
        baseline = server.sample()
        server_nofile = open_file_limit(server.pid)
        await _swarm(server, list(devices.values()), workers)
        result = await _connect(server, workers, count)
        connected = server.sample()
        idle_start = connected.cpu_s
        await asyncio.sleep(IDLE_WINDOW_S)
        idle_rate = (server.sample().cpu_s - idle_start) / IDLE_WINDOW_S
        hb_before = server.sample().cpu_s
        started = time.perf_counter()
        beats = await asyncio.gather(
            *(
                w.ask({"op": "heartbeat", "interval_s": interval_s, "rounds": rounds})
                for w in workers
            )
        )
        hb_s = time.perf_counter() - started
        after = server.sample()
        hb_cpu = after.cpu_s - hb_before
        acked = sum(r["acked"] for r in beats)
        client_rss = sum(sample(w.pid).rss_bytes for w in workers)
        await asyncio.gather(*(w.ask({"op": "close"}) for w in workers))
    finally:
        for worker in workers:
            await worker.stop()
        exit_code = await server.stop()
    ok = result["connected"]
    return {
        **result,
        "tenants": len(set(tenants.values())),
        "server_open_fds": connected.open_fds,
        "server_open_file_limit": server_nofile,
        "rss_baseline_mib": baseline.rss_bytes / MIB,
        "rss_connected_mib": connected.rss_bytes / MIB,
        "rss_after_heartbeats_mib": after.rss_bytes / MIB,
        "rss_peak_mib": after.hwm_bytes / MIB,
        "rss_per_device_kib": (connected.rss_bytes - baseline.rss_bytes) / max(ok, 1) / 1024,
        "within_1_5_gib": after.hwm_bytes <= TARGET_RSS_BYTES,
        "idle_cpu_s_per_s": round(idle_rate, 4),
        "heartbeats_sent": sum(r["sent"] for r in beats),
        "heartbeats_acked": acked,
        "heartbeat_phase_s": round(hb_s, 3),
        "heartbeat_rate_per_s": acked / hb_s if hb_s else 0.0,
        "heartbeat_server_cpu_s": round(hb_cpu, 3),
        "cpu_s_per_1000_heartbeats": (hb_cpu - idle_rate * hb_s) / max(acked, 1) * 1000,
        "heartbeat_ack_ms": summary([ms for r in beats for ms in r["ack_ms"]]),
        "client_rss_mib": client_rss / MIB,
        "server_exit_code": exit_code,
    }


async def _single_tenant(data_dir: Path, count: int, profile_dir: Path | None) -> dict[str, Any]:
    _fresh(data_dir)
    devices = new_devices(count)
    server = Server(data_dir, "FULL", devices, profile=profile_dir is not None)
    await server.start()
    workers: list[Worker] = []
    try:
        await asyncio.sleep(SETTLE_S)
        await _swarm(server, list(devices.values()), workers)
        profiled = None
        if profile_dir is None:
            result = await _connect(server, workers, count)
        else:
            profile = Profile(server, profile_dir / f"scale-single-tenant-{count}.pstats")
            async with profile:
                result = await _connect(server, workers, count)
            profiled = profile.summary()
        await asyncio.gather(*(w.ask({"op": "close"}) for w in workers))
    finally:
        for worker in workers:
            await worker.stop()
        await server.stop()
    return {**result, "tenants": 1, **({"profile": profiled} if profiled else {})}


# -- the suite's interface ---------------------------------------------------------------------

QUICK_HEARTBEAT_INTERVAL_S: Final = 5.0


async def suite(ctx: Context) -> dict[str, Any]:
    """Full: 1k, 5k, 10k devices at the real 22 s heartbeat interval, one tenant at 250, 500 and
    1000 devices. Quick: 1k devices at a 5 s interval, one tenant at 200 devices."""
    if ctx.quick:
        return await run(
            ctx.data_root,
            [1000],
            QUICK_HEARTBEAT_INTERVAL_S,
            1,
            [200],
            profile_dir=ctx.profile_dir,
            log=ctx.log,
        )
    return await run(
        ctx.data_root,
        [1000, 5000, 10000],
        REAL_HEARTBEAT_INTERVAL_S,
        1,
        [250, 500, 1000],
        profile_dir=ctx.profile_dir,
        log=ctx.log,
    )


def tables(result: dict[str, Any]) -> list[Table]:
    interval = result["heartbeat_interval_s"]
    real = "the real interval" if result["heartbeat_interval_is_real"] else "compressed"
    levels = Table(
        f"Scale: connected devices in one server (tenants of {result['tenant_size']}), "
        f"synchronous={result['synchronous']}",
        [
            "devices",
            "connects/s",
            "CPU ms/connect",
            "RSS base MiB",
            "RSS MiB",
            "KiB/device",
            "peak MiB",
            "heartbeats/s",
            "CPU s/1000 hb",
            "ack p50 ms",
            "ack p99 ms",
        ],
    )
    for level in result["levels"]:
        if "skipped" in level:
            levels.rows.append([str(level["devices"]), level["skipped"], *[""] * 9])
            continue
        levels.rows.append(
            [
                f"{level['connected']}/{level['devices']}",
                fmt(level["connect_rate_per_s"], 1),
                fmt(level["server_cpu_ms_per_connect"]),
                fmt(level["rss_baseline_mib"], 0),
                fmt(level["rss_connected_mib"], 0),
                fmt(level["rss_per_device_kib"], 1),
                fmt(level["rss_peak_mib"], 0),
                fmt(level["heartbeat_rate_per_s"], 0),
                fmt(level["cpu_s_per_1000_heartbeats"], 3),
                fmt(level["heartbeat_ack_ms"].get("p50", math.nan)),
                fmt(level["heartbeat_ack_ms"].get("p99", math.nan)),
            ]
        )
    levels.notes.append(
        f"heartbeats: one round per device at a {interval:g} s interval ({real}), "
        "staggered uniformly; CPU s/1000 hb has the idle CPU subtracted"
    )
    limit = result["open_file_limit"]
    levels.notes.append(
        f"open-file limit (soft/hard) after raising: {limit['soft']}/{limit['hard']}"
    )
    single = Table(
        "Scale: devices of one tenant connecting (CPU per connect should not grow with N)",
        ["devices", "connects/s", "CPU ms/connect", "connect p50 ms", "connect p99 ms"],
    )
    for one in result["single_tenant"]:
        single.rows.append(
            [
                f"{one['connected']}/{one['devices']}",
                fmt(one["connect_rate_per_s"], 1),
                fmt(one["server_cpu_ms_per_connect"]),
                fmt(one["connect_latency_ms"].get("p50", math.nan)),
                fmt(one["connect_latency_ms"].get("p99", math.nan)),
            ]
        )
    return [levels, single]


def targets(result: dict[str, Any]) -> list[Target]:
    top = next(
        (lv for lv in result["levels"] if lv["devices"] == 10_000 and "skipped" not in lv), None
    )
    if top is None:
        return [
            Target("10,000 connected devices in one process", "RSS <= 1.5 GiB", "not run", None)
        ]
    return [
        Target(
            "10,000 connected devices in one process, with heartbeats",
            "peak RSS <= 1,536 MiB",
            f"{top['connected']} connected, peak {fmt(top['rss_peak_mib'], 0)} MiB",
            top["connected"] == 10_000 and top["within_1_5_gib"],
        )
    ]


def _fresh(directory: Path, keep: bool = False) -> None:
    """An empty directory (or, with ``keep``, an existing one left as it is)."""
    if directory.exists() and not keep:
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
