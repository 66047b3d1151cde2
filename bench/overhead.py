"""Backend overhead: commands through HTTP to simulated devices that execute instantly.

Method, for each SQLite variant (``FULL``: synchronous=FULL with group commit, the default;
``FULL-per-turn``: synchronous=FULL with ``UNDERSTUDY_SQLITE_GROUP_COMMIT=false``, every turn its
own COMMIT; ``NORMAL``: synchronous=NORMAL with group commit), on a fresh server and data
directory:

1. Enroll ceil(max level / 2) devices and run them as
   :class:`~tests.support.simdevice.SimulatedDevice` objects in a device-host process
   (``bench._devicehost``); each executes a command the moment its grant arrives. Quotas are
   raised through ``QUOTA_POLICY`` (still counted on every command).
2. Create max-level unattended sessions over HTTP, two per device (session i on device i // 2, so
   10 sessions use 5 devices and 100 sessions 50).
3. For each level L (1, 10, 100 concurrent sessions) and each command (a write, ``click``; a read,
   ``snapshot``): warm-up, then the measured phase. Each of the first L sessions has its own
   keep-alive HTTP connection and a closed loop: send ``POST /v1/sessions/{id}/commands``, wait
   for the reply, send the next, until the phase's total is reached. Latency is the client's
   round trip (request written to reply read); throughput is commands / wall time of the phase.
   Every reply must be 200 ``succeeded``; any other status is counted and reported.
4. Server-side time per command: after the server stops, ``completed_at - admitted_at`` of every
   measured command, read from its SQLite row (both stamped by the server's clock: admission to
   the start of the turn that persists the outcome, so it leaves out HTTP parsing, the reply, and
   the final commit). Server CPU per command is the server's utime + stime over the phase / count.
5. The device host reports how many times each write ran: every measured and warm-up write must
   have run exactly once.

What a command costs: a write is three transactions (admission with the idle-expiry update,
``write_ready`` -> granted, the result), a read two (admission, the result). Without group commit
each is a COMMIT, an fsync of the WAL under FULL; with it, the turns of one event-loop iteration
share one. The server's /metrics counts both, and each phase reports transactions and COMMITs per
command, and the SQL statements per command (BEGIN, SAVEPOINT and COMMIT left out; on PostgreSQL
each statement is a round trip).

Warm-up: ``warmup`` commands per phase, spread over its sessions (at least 2 each). Sample size:
``total`` commands per phase (level x command x setting).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import sqlite3
import time
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any, Final, Literal

from bench import fsync
from bench._proc import sample
from bench._profile import Profile, hops
from bench._report import Table, Target, fmt
from bench._server import Server, new_devices
from bench._stats import summary
from bench._workers import Worker

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from bench._context import Context
    from bench._http import HttpConnection
    from bench._proc import Sampled

# Name -> (synchronous, group commit). FULL with group commit is the default and the target's;
# the same setting committing every turn on its own shows what group commit buys, in one run.
VARIANTS: Final[dict[str, tuple[Literal["FULL", "NORMAL"], bool]]] = {
    "FULL": ("FULL", True),
    "FULL-per-turn": ("FULL", False),
    "NORMAL": ("NORMAL", True),
}
COMMANDS: Final[dict[str, dict[str, Any]]] = {
    "write": {"name": "click", "ref": "g1e1"},
    "read": {"name": "snapshot", "interactiveOnly": True},
}
SESSIONS_PER_DEVICE: Final = 2
READY_TIMEOUT_S: Final = 30.0
# The targets of issue 19 (server CPU per durable write, durable writes/s) and the level of each.
CPU_TARGET_LEVEL: Final = 10
CPU_TARGET_MS: Final = 1.0
THROUGHPUT_TARGET_LEVEL: Final = 100
THROUGHPUT_TARGET_PER_S: Final = 1000.0


async def run(
    data_root: Path,
    levels: list[int],
    total: int,
    warmup: int,
    fsync_seconds: float,
    profile_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure the fsync rate, both settings, and the fsync rate again; JSON-ready results."""
    results: dict[str, Any] = {
        "method": __doc__,
        "fsync_method": fsync.__doc__,
        "levels": levels,
        "total_per_phase": total,
        "warmup_per_phase": warmup,
        "fsync": [],
        "settings": {},
    }
    log("overhead: fsync rate ...")
    results["fsync"].append(fsync.measure(data_root, fsync_seconds))
    for setting in VARIANTS:
        log(f"overhead: {setting} ...")
        results["settings"][setting] = await _setting(
            data_root / f"overhead-{setting.lower()}",
            setting,
            levels,
            total,
            warmup,
            profile_dir,
            log,
        )
    log("overhead: fsync rate again ...")
    results["fsync"].append(fsync.measure(data_root, fsync_seconds))
    rates = [probe["transactions_per_s"] for probe in results["fsync"]]
    results["fsync_transactions_per_s"] = sum(rates) / len(rates)
    top = max(levels)
    writes = results["settings"]["FULL"]["phases"][f"{top}:write"]["commands_per_s"]
    results["durable_writes_per_s_at_top_level"] = writes
    results["durable_writes_to_fsync_ratio"] = writes / results["fsync_transactions_per_s"]
    return results


async def _setting(
    data_dir: Path,
    setting: str,
    levels: list[int],
    total: int,
    warmup: int,
    profile_dir: Path | None,
    log: Callable[[str], None],
) -> dict[str, Any]:
    _fresh(data_dir)
    sessions_needed = max(levels)
    devices = new_devices(math.ceil(sessions_needed / SESSIONS_PER_DEVICE))
    server = Server(
        data_dir,
        VARIANTS[setting][0],
        devices,
        group_commit=VARIANTS[setting][1],
        # FULL runs under the switchable profiler (off, so free, in the measured phases) for the
        # hop breakdown measured after them.
        profile=setting == "FULL",
    )
    await server.start()
    host: Worker | None = None
    connections: list[HttpConnection] = []
    phases: dict[str, Any] = {}
    measured_ids: dict[str, list[tuple[str, str]]] = {}
    device_report: dict[str, Any] = {}
    hop_report: dict[str, Any] | None = None
    hop_writes = 0
    hops_total = max(200, total // 4)
    try:
        host = await Worker.start(
            "bench._devicehost",
            {"base_url": server.base_url, "credentials": list(devices.values())},
        )
        await host.receive()  # connected
        device_ids = list(devices)
        sessions = await _create_sessions(server, device_ids, sessions_needed)
        connections = [server.connection() for _ in sessions]
        await _until_ready(connections, sessions)
        for level in levels:
            for kind, command in COMMANDS.items():
                key = f"{level}:{kind}"
                profiled = profile_dir is not None and setting == "FULL" and level == max(levels)
                profile = Profile(
                    server, (profile_dir or data_dir) / f"overhead-{level}-{kind}.pstats"
                )
                async with profile if profiled else contextlib.nullcontext(profile):
                    phase, ids = await _phase(
                        server,
                        host.pid,
                        connections[:level],
                        sessions[:level],
                        command,
                        total,
                        warmup,
                    )
                if profiled:
                    phase["profile"] = profile.summary()
                phases[key] = phase
                measured_ids[key] = ids
                log(
                    f"overhead: {setting} {level:>3} sessions {kind:<5}: "
                    f"p50 {phase['latency_ms']['p50']:.2f} ms, "
                    f"p99 {phase['latency_ms']['p99']:.2f} ms, "
                    f"{phase['commands_per_s']:.0f}/s"
                )
        if setting == "FULL" and CPU_TARGET_LEVEL in levels:
            level = CPU_TARGET_LEVEL
            out = (profile_dir or data_dir) / f"overhead-hops-{level}-write.pstats"
            async with Profile(server, out):
                hop_phase, _ = await _phase(
                    server,
                    host.pid,
                    connections[:level],
                    sessions[:level],
                    COMMANDS["write"],
                    hops_total,
                    warmup,
                )
            hop_writes = hop_phase["commands"] + hop_phase["warmup_commands"]
            hop_report = {**hops(out), "writes": hop_writes, "sessions": level}
            log(f"overhead: {setting} hop profile of {hop_writes} writes at {level} sessions")
        device_report = await host.ask({"op": "stop"})
    finally:
        for connection in connections:
            await connection.close()
        if host is not None:
            await host.stop()
        await server.stop()
    _add_server_side_times(server.db_path, phases, measured_ids)
    writes = hop_writes + sum(
        phase["commands"] + phase["warmup_commands"]
        for key, phase in phases.items()
        if key.endswith(":write")
    )
    return {
        "hop_profile": hop_report,
        "synchronous": VARIANTS[setting][0],
        "group_commit": VARIANTS[setting][1],
        "devices": len(devices),
        "sessions": sessions_needed,
        "phases": phases,
        "device_executions": device_report,
        "writes_acknowledged": writes,
        "every_write_ran_once": device_report.get("executions") == writes
        and device_report.get("distinct_writes") == writes
        and device_report.get("max_executions_per_write") == 1,
    }


async def _create_sessions(server: Server, device_ids: list[str], count: int) -> list[str]:
    connection = server.connection()
    sessions = []
    try:
        for index in range(count):
            body = {
                "mode": "unattended",
                "deviceId": device_ids[index // SESSIONS_PER_DEVICE],
                "allowedOrigins": [f"https://s{index}.bench.example"],
                "profileStateKey": f"bench-profile-{index}",
            }
            reply = await connection.post_json(
                "/v1/sessions", body, {"Idempotency-Key": str(uuid.uuid4())}
            )
            if reply.status != 201:
                raise RuntimeError(f"session {index}: POST /v1/sessions answered {reply.status}")
            sessions.append(reply.json()["sessionId"])
    finally:
        await connection.close()
    return sessions


async def _until_ready(connections: list[HttpConnection], sessions: list[str]) -> None:
    """Each session answers a read once its device opened the session socket (503 until then)."""

    async def one(connection: HttpConnection, session: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            reply = await _send(connection, session, {"name": "hello"})
            if reply.status == 200:
                return
            if reply.status != 503 or time.monotonic() > deadline:
                raise RuntimeError(f"session not ready: {reply.status} {reply.body[:200]!r}")
            await asyncio.sleep(0.02)

    await asyncio.gather(*(one(c, s) for c, s in zip(connections, sessions, strict=True)))


async def _send(connection: HttpConnection, session: str, command: dict[str, Any]) -> Any:
    body = json.dumps({"commandId": str(uuid.uuid4()), "command": command}).encode()
    return await connection.request("POST", f"/v1/sessions/{session}/commands", body)


async def _sqlite_counters(connection: HttpConnection) -> tuple[float, float, float]:
    """(transactions, commits, statements) since the server started, from its /metrics (NaN
    statements from a server that does not count them)."""
    reply = await connection.request("GET", "/metrics")
    found = dict.fromkeys(("understudy_sqlite_transactions", "understudy_sqlite_commits"), 0.0)
    found["understudy_sqlite_statements"] = math.nan
    for line in reply.body.decode().splitlines():
        name, _, value = line.partition(" ")
        name = name.removesuffix("_total")  # the text exposition names a counter `…_total`
        if name in found:
            found[name] = float(value)
    return (
        found["understudy_sqlite_transactions"],
        found["understudy_sqlite_commits"],
        found["understudy_sqlite_statements"],
    )


async def _phase(
    server: Sampled,
    host_pid: int,
    connections: list[HttpConnection],
    sessions: list[str],
    command: dict[str, Any],
    total: int,
    warmup: int,
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    per_session_warmup = max(2, math.ceil(warmup / len(sessions)))
    statuses: Counter[int] = Counter()

    async def warm(connection: HttpConnection, session: str) -> None:
        for _ in range(per_session_warmup):
            statuses[(await _send(connection, session, command)).status] += 1

    await asyncio.gather(*(warm(c, s) for c, s in zip(connections, sessions, strict=True)))
    warm_statuses = dict(statuses)
    statuses.clear()
    latencies: list[float] = []
    ids: list[tuple[str, str]] = []
    remaining = total

    async def loop(connection: HttpConnection, session: str) -> None:
        nonlocal remaining
        path = f"/v1/sessions/{session}/commands"
        while remaining > 0:
            remaining -= 1
            command_id = str(uuid.uuid4())
            body = json.dumps({"commandId": command_id, "command": command}).encode()
            started = time.perf_counter_ns()
            reply = await connection.request("POST", path, body)
            elapsed_ms = (time.perf_counter_ns() - started) / 1e6
            statuses[reply.status] += 1
            if reply.status == 200 and reply.json().get("status") == "succeeded":
                latencies.append(elapsed_ms)
                ids.append((session, command_id))

    load_before = os.getloadavg()[0]
    sqlite_before = await _sqlite_counters(connections[0])
    before = server.sample()
    host_before = sample(host_pid).cpu_s
    client_before = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(loop(c, s) for c, s in zip(connections, sessions, strict=True)))
    wall = time.perf_counter() - started
    after = server.sample()
    sqlite_after = await _sqlite_counters(connections[0])
    host_cpu = sample(host_pid).cpu_s - host_before
    server_cpu = after.cpu_s - before.cpu_s
    per_command_n = max(len(latencies), 1)
    per_command = 1000 / per_command_n
    client_cpu = time.process_time() - client_before
    return (
        {
            "sessions": len(sessions),
            "command": command["name"],
            "commands": len(latencies),
            "warmup_commands": warm_statuses.get(200, 0),
            "warmup_statuses": {str(k): v for k, v in warm_statuses.items()},
            "statuses": {str(k): v for k, v in statuses.items()},
            "seconds": round(wall, 3),
            "commands_per_s": len(latencies) / wall if wall else 0.0,
            "latency_ms": summary(latencies),
            "server_cpu_ms_per_command": server_cpu * per_command,
            "server_user_ms_per_command": (after.user_s - before.user_s) * per_command,
            "server_system_ms_per_command": (after.system_s - before.system_s) * per_command,
            "server_cpu_share": server_cpu / wall if wall else 0.0,
            "devices_cpu_ms_per_command": host_cpu * per_command,
            "loadgen_cpu_ms_per_command": client_cpu * per_command,
            "loadavg_1m": [load_before, os.getloadavg()[0]],
            # From /metrics: transactions and COMMITs (fsyncs under FULL) per measured command.
            "transactions_per_command": (sqlite_after[0] - sqlite_before[0]) / per_command_n,
            "commits_per_command": (sqlite_after[1] - sqlite_before[1]) / per_command_n,
            # SQL statements (transaction control left out; /metrics reads add a few).
            "statements_per_command": (sqlite_after[2] - sqlite_before[2]) / per_command_n,
        },
        ids,
    )


def _add_server_side_times(
    db_path: Path, phases: dict[str, Any], measured: dict[str, list[tuple[str, str]]]
) -> None:
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        for key, ids in measured.items():
            durations = []
            for session, command_id in ids:
                row = connection.execute(
                    "SELECT admitted_at, completed_at FROM commands "
                    "WHERE session_id = ? AND command_id = ?",
                    (session, command_id),
                ).fetchone()
                if row is not None and row[1] is not None:
                    durations.append((row[1] - row[0]) * 1000)
            phases[key]["server_side_ms"] = summary(durations)
    finally:
        connection.close()


# -- the suite's interface ---------------------------------------------------------------------

FULL_LEVELS: Final = [1, 10, 100]
QUICK_LEVELS: Final = [1, 10, 100]


async def suite(ctx: Context) -> dict[str, Any]:
    """The full run or the quick slice: 1, 10 and 100 sessions, 2,000 or 200 per phase."""
    if ctx.quick:
        return await run(ctx.data_root, QUICK_LEVELS, 200, 20, 1.0, ctx.profile_dir, ctx.log)
    return await run(ctx.data_root, FULL_LEVELS, 2000, 200, 3.0, ctx.profile_dir, ctx.log)


def tables(result: dict[str, Any]) -> list[Table]:
    table = Table(
        "Backend overhead: HTTP command round trip to instant simulated devices",
        [
            "SQLite",
            "sessions",
            "command",
            "n",
            "p50 ms",
            "p99 ms",
            "commands/s",
            "server p50 ms",
            "server p99 ms",
            "server CPU ms/cmd",
            "txn/cmd",
            "commits/cmd",
            "statements/cmd",
        ],
    )
    for setting, data in result["settings"].items():
        for phase in data["phases"].values():
            latency, server = phase["latency_ms"], phase.get("server_side_ms", {})
            table.rows.append(
                [
                    setting,
                    str(phase["sessions"]),
                    phase["command"],
                    str(phase["commands"]),
                    fmt(latency.get("p50", math.nan)),
                    fmt(latency.get("p99", math.nan)),
                    fmt(phase["commands_per_s"], 0),
                    fmt(server.get("p50", math.nan)),
                    fmt(server.get("p99", math.nan)),
                    fmt(phase["server_cpu_ms_per_command"]),
                    fmt(phase.get("transactions_per_command", math.nan)),
                    fmt(phase.get("commits_per_command", math.nan)),
                    fmt(phase.get("statements_per_command", math.nan)),
                ]
            )
        table.notes.append(
            f"{setting}: every write ran exactly once on its device: {data['every_write_ran_once']}"
            f" ({data['writes_acknowledged']} writes)"
        )
    rates = ", ".join(fmt(p["transactions_per_s"], 0) for p in result["fsync"])
    fs = result["fsync"][0]["filesystem"]
    table.notes.append(
        f"single-transaction fsync rate (SQLite WAL, synchronous=FULL) on {fs['device']} "
        f"({fs['type']}), before and after: {rates} transactions/s"
    )
    table.notes.append(
        f"durable writes/s at {max(result['levels'])} sessions (FULL): "
        f"{fmt(result['durable_writes_per_s_at_top_level'], 0)} = "
        f"{fmt(result['durable_writes_to_fsync_ratio'], 3)} x the fsync rate"
    )
    table.notes.append(
        "server p50/p99: admission to the outcome's turn, from the command rows (server clock)"
    )
    per_turn = result["settings"].get("FULL-per-turn")
    if per_turn is not None:
        top = f"{max(result['levels'])}:write"
        grouped = result["settings"]["FULL"]["phases"][top]["commands_per_s"]
        single = per_turn["phases"][top]["commands_per_s"]
        table.notes.append(
            f"group commit at {max(result['levels'])} sessions (FULL): {fmt(grouped, 0)} "
            f"durable writes/s, against {fmt(single, 0)}/s committing every turn on its own "
            f"(x {fmt(grouped / single if single else math.nan, 2)})"
        )
    return [table, *_hop_tables(result)]


def _hop_tables(result: dict[str, Any]) -> list[Table]:
    full = result["settings"]["FULL"]
    profile = full.get("hop_profile")
    phase = full["phases"].get(f"{CPU_TARGET_LEVEL}:write")
    if not profile or "hops" not in profile or phase is None:
        return []
    measured_ms = phase["server_cpu_ms_per_command"]
    profiled_ms = profile["cpu_s"] * 1000 / max(profile["writes"], 1)
    table = Table(
        f"Server CPU per durable write by hop ({profile['sessions']} sessions, FULL, "
        f"{profile['writes']} profiled writes)",
        ["hop", "share", "ms/write"],
    )
    for hop, data in sorted(profile["hops"].items(), key=lambda item: -item[1]["share"]):
        table.rows.append([hop, f"{data['share'] * 100:.1f}%", fmt(data["share"] * measured_ms)])
    table.notes.append(
        f"shares of the CPU a deterministic profiler (cProfile, CPU clock) saw in a separate phase "
        f"after the measured ones ({fmt(profiled_ms)} ms/write under the profiler); ms/write "
        f"applies each share to the unprofiled {fmt(measured_ms)} ms/write of the "
        f"{CPU_TARGET_LEVEL}-session write phase. The profiler inflates hops made of many small "
        "Python calls (the event loop, h11) more than those spent in C (SQLite, pydantic-core)."
    )
    table.notes.append(
        "each hop is the code's own time; builtins and generic standard-library code (copy, enum, "
        "uuid, contextlib, re) count towards the hop that called them"
    )
    return [table]


def targets(result: dict[str, Any]) -> list[Target]:
    found: list[Target] = []
    full = result["settings"]["FULL"]["phases"]
    cpu = full.get(f"{CPU_TARGET_LEVEL}:write")
    if cpu is not None:
        ms = cpu["server_cpu_ms_per_command"]
        found.append(
            Target(
                f"server CPU per durable write at {CPU_TARGET_LEVEL} sessions (FULL)",
                f"<= {fmt(CPU_TARGET_MS)} ms",
                f"{fmt(ms)} ms (user {fmt(cpu['server_user_ms_per_command'])}, system "
                f"{fmt(cpu['server_system_ms_per_command'])}), "
                f"{fmt(cpu.get('statements_per_command', math.nan), 1)} SQL statements per "
                "write; hops in the table above",
                ms <= CPU_TARGET_MS,
            )
        )
    top = full.get(f"{THROUGHPUT_TARGET_LEVEL}:write")
    ceiling = result["fsync_transactions_per_s"]
    found.append(
        Target(
            f"durable writes/s at {THROUGHPUT_TARGET_LEVEL} sessions (FULL)",
            f">= {fmt(THROUGHPUT_TARGET_PER_S, 0)}/s",
            f"{fmt(top['commands_per_s'], 0)}/s, beside a fsync ceiling of {fmt(ceiling, 0)} "
            f"single-transaction COMMITs/s ({fmt(top.get('commits_per_command', math.nan))} "
            f"COMMITs per write)"
            if top is not None
            else "not run at this level",
            top["commands_per_s"] >= THROUGHPUT_TARGET_PER_S if top is not None else None,
        )
    )
    phase = result["settings"]["FULL"]["phases"].get("10:write")
    if phase is not None:
        p50, p99 = phase["latency_ms"]["p50"], phase["latency_ms"]["p99"]
        found.append(
            Target(
                "durable write at 10 sessions (FULL)",
                "p50 <= 3 ms and p99 <= 15 ms",
                f"p50 {fmt(p50)} ms, p99 {fmt(p99)} ms",
                p50 <= 3 and p99 <= 15,
            )
        )
    top = max(result["levels"])
    ratio = result["durable_writes_to_fsync_ratio"]
    found.append(
        Target(
            "durable writes/s at 100+ sessions (FULL) vs single-transaction fsync rate",
            "ratio >= 1.0",
            f"{fmt(result['durable_writes_per_s_at_top_level'], 0)}/s at {top} sessions vs "
            f"{fmt(result['fsync_transactions_per_s'], 0)}/s = {fmt(ratio, 3)}",
            ratio >= 1.0 if top >= 100 else None,
        )
    )
    return found


def _fresh(directory: Path, keep: bool = False) -> None:
    """An empty directory (or, with ``keep``, an existing one left as it is)."""
    if directory.exists() and not keep:
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
