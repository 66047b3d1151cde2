"""Storage engines side by side: governed writes on SQLite and on PostgreSQL, in one run.

Method:

1. Start a throwaway PostgreSQL cluster (``tests.support.pgcluster``: Debian's binaries,
   ``initdb`` into a temporary directory on this machine's disk, a free port) with ``fsync=on``,
   ``full_page_writes=on`` and ``synchronous_commit=on``: the settings under which a COMMIT is on
   disk when it returns, as SQLite's ``synchronous=FULL`` promises. The settings in force are read
   back from the server (``SHOW``) and reported.
2. Start the deployments with the overhead benchmark's harness (``bench._server.Server``,
   ``bench._devicehost``): one ``understudy serve`` on SQLite (``FULL``, group commit, the default)
   in a fresh data directory; one with ``UNDERSTUDY_DATABASE_URL`` pointing at a fresh database of
   the cluster; and three on one other database of the same cluster (PostgreSQL three nodes: the
   first migrates and makes the key, the others join it). Each deployment gets its own simulated
   devices (ceil(max level / 2)), its own unattended sessions (two per device, all created
   through the first node) and one keep-alive HTTP connection per session. On three nodes,
   device ``d`` connects to node ``d mod 3`` and session ``k``'s connection goes to node
   ``k mod 3``, with no balancer in between (the one-node rows have none either): most
   commands are admitted on one node and reach their session's socket on another.
3. Phases alternate between the deployments, in one run: for each round and level (10, 100
   sessions) one write phase on each, the order flipped every phase (ABBA), so drift in the load
   of the shared machine falls on all. A phase is ``bench.overhead``'s: warm-up, then closed loops,
   one per session, of ``POST /v1/sessions/{id}/commands`` with a ``click`` until the phase's
   total is reached; latency is the client's round trip. Rows report the phases of every round
   pooled: writes/s = writes / summed wall time; p50 and p99 the mean of the rounds' (each phase
   keeps its own in the JSON).
4. Where the time goes per hop, for each measured write: the client round trip splits into the
   server's admission-to-outcome span (``completed_at - admitted_at`` of the command row, the
   server's clock, read from SQLite or PostgreSQL after the phase) and the rest (HTTP parsing, the
   final turn that persists the outcome and its COMMIT, the reply). On three nodes the server
   span is also split by whether the command's HTTP node held its session socket (same node) or
   not (cross-node: the outbox and its wake-up are on the path).
   Per acknowledged write (warm-up included), from the servers' ``/metrics``: transactions and
   COMMITs (summed over the nodes); for PostgreSQL also the WAL flushes and their time
   (``pg_stat_wal`` with ``track_wal_io_timing=on``, cluster-wide: the phases do not overlap),
   the part of a write spent waiting for the disk. Server CPU is the nodes' sum.
5. Each engine's commit rate on its own: one connection committing one-row transactions in a loop
   (SQLite through ``bench.fsync``, PostgreSQL the same with psycopg), before the phases.
6. Each device host reports how many times each write ran: every acknowledged write must have run
   exactly once.

When the three nodes cannot start (a build where a second ``understudy serve`` on one database
is refused), their row says why and the other two are measured as before.
"""

from __future__ import annotations

import asyncio
import base64
import math
import secrets
import time
from typing import TYPE_CHECKING, Any, Final

from tests.support.pgcluster import PgCluster

from bench import fsync, overhead
from bench._proc import ProcSample, filesystem_of
from bench._report import Table, Target, fmt
from bench._server import Server, new_devices
from bench._stats import summary
from bench._workers import Worker

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from bench._context import Context
    from bench._http import HttpConnection

THREE_NODES: Final = "PostgreSQL three nodes"
ENGINES: Final = ("SQLite", "PostgreSQL", THREE_NODES)
LABELS: Final = {
    "SQLite": "SQLite one node",
    "PostgreSQL": "PostgreSQL one node",
    THREE_NODES: THREE_NODES,
}
NODES: Final = 3
# A COMMIT is durable when it returns, as under SQLite's synchronous=FULL (the cluster helper's
# defaults turn fsync off: its tests check decisions, not the disk).
DURABLE_SETTINGS: Final = {
    "fsync": "on",
    "full_page_writes": "on",
    "synchronous_commit": "on",
    "track_wal_io_timing": "on",  # pg_stat_wal's sync time: the WAL flushes' share of a write
}
REPORTED_SETTINGS: Final = (
    "server_version",
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_sync_method",
    "wal_level",
    "commit_delay",
    "track_wal_io_timing",
)
WRITE: Final = overhead.COMMANDS["write"]
_MASTER_KEY: Final = base64.b64encode(secrets.token_bytes(32)).decode()  # the three nodes' one


class _Engine:
    """One deployment (one node, or several on one database) with its devices, sessions and
    connections (the overhead benchmark's private helpers drive it: the same phase, not a copy
    of it)."""

    def __init__(self, name: str, servers: list[Server], url: str | None = None) -> None:
        self.name = name
        self.servers = servers
        self.url = url  # PostgreSQL's, for its WAL statistics and the command rows
        self.host: Worker | None = None
        self.sessions: list[str] = []
        self.connections: list[HttpConnection] = []
        self.probes: list[HttpConnection] = []  # one per node, for /metrics
        self.phases: list[dict[str, Any]] = []
        self.ids: list[list[tuple[str, str]]] = []

    @property
    def server(self) -> Server:
        """The first node: it migrated, made the key and created the sessions."""
        return self.servers[0]

    def sample(self) -> ProcSample:
        """The nodes' CPU and memory, summed (what the phase bills per write)."""
        samples = [server.sample() for server in self.servers]
        return ProcSample(
            *(
                sum(getattr(one, name) for one in samples)
                for name in ProcSample.__dataclass_fields__
            )
        )

    def node_of_connection(self, index: int) -> int:
        return self.servers[index % len(self.servers)].port

    async def start(self, devices: dict[str, str], sessions: int) -> None:
        first, *others = self.servers
        await first.start()
        for other in others:
            other.api_key = first.api_key
        await asyncio.gather(*(other.start(setup=False) for other in others))
        count = len(self.servers)
        self.host = await Worker.start(
            "bench._devicehost",
            {
                "base_url": first.base_url,
                "base_urls": [self.servers[i % count].base_url for i in range(len(devices))],
                "credentials": list(devices.values()),
            },
        )
        await self.host.receive()  # connected
        self.sessions = await overhead._create_sessions(first, list(devices), sessions)
        self.connections = [self.servers[k % count].connection() for k in range(len(self.sessions))]
        self.probes = [server.connection() for server in self.servers]
        await overhead._until_ready(self.connections, self.sessions)

    async def phase(self, level: int, total: int, warmup: int) -> dict[str, Any]:
        assert self.host is not None  # noqa: S101 - started
        counters = await _counters(self.probes)
        wal = await asyncio.to_thread(_wal, self.url) if self.url else None
        phase, ids = await overhead._phase(
            self,
            self.host.pid,
            self.connections[:level],
            self.sessions[:level],
            WRITE,
            total,
            warmup,
        )
        # Per acknowledged write (warm-up included: its turns commit in the same span).
        writes = max(phase["commands"] + phase["warmup_commands"], 1)
        after = await _counters(self.probes)
        phase["transactions_per_write"] = (after[0] - counters[0]) / writes
        phase["commits_per_write"] = (after[1] - counters[1]) / writes
        if wal is not None and self.url:
            syncs, sync_ms = await asyncio.to_thread(_wal, self.url)
            phase["wal_syncs_per_write"] = (syncs - wal[0]) / writes
            phase["wal_sync_ms_per_write"] = (sync_ms - wal[1]) / writes
        self.phases.append(phase)
        self.ids.append(ids)
        return phase

    async def stop(self) -> dict[str, Any]:
        report: dict[str, Any] = {}
        try:
            if self.host is not None:
                report = await self.host.ask({"op": "stop"})
        finally:
            for connection in [*self.connections, *self.probes]:
                await connection.close()
            if self.host is not None:
                await self.host.stop()
            for server in self.servers:
                await server.stop()
        return report


async def run(
    data_root: Path,
    levels: list[int],
    total: int,
    warmup: int,
    rounds: int,
    probe_seconds: float,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every deployment, phases interleaved; JSON-ready results."""
    results: dict[str, Any] = {
        "method": __doc__,
        "levels": levels,
        "rounds": rounds,
        "total_per_phase": total,
        "warmup_per_phase": warmup,
        "engines": {},
        "not_measured": {},
    }
    log("engines: starting a PostgreSQL cluster (fsync=on) ...")
    cluster = await asyncio.to_thread(PgCluster.start, None, DURABLE_SETTINGS)
    try:
        url = await asyncio.to_thread(cluster.create_database, "bench")
        url3 = await asyncio.to_thread(cluster.create_database, "bench_three_nodes")
        results["postgresql"] = await asyncio.to_thread(_settings, url)
        results["postgresql"]["data_dir_filesystem"] = filesystem_of(cluster.root)
        log("engines: commit rates ...")
        results["commit_rates"] = {
            "SQLite": fsync.measure(data_root, probe_seconds),
            "PostgreSQL": await asyncio.to_thread(_pg_commit_rate, url, probe_seconds),
        }
        device_count = math.ceil(max(levels) / overhead.SESSIONS_PER_DEVICE)
        engines = _engines(data_root, device_count, url, url3)
        try:
            for name, engine in list(engines.items()):
                log(f"engines: {name}: {len(engine.servers)} server(s), {device_count} devices ...")
                try:
                    await engine.start(dict(engine.server.devices), max(levels))
                except RuntimeError as exc:
                    if name != THREE_NODES:
                        raise
                    log(f"engines: {name} not measured: {exc}")
                    results["not_measured"][name] = str(exc)
                    await engines.pop(name).stop()
            flip = False
            for round_ in range(rounds):
                for level in levels:
                    order = [name for name in ENGINES if name in engines]
                    order = list(reversed(order)) if flip else order
                    flip = not flip
                    for name in order:
                        phase = await engines[name].phase(level, total, warmup)
                        phase["round"] = round_
                        latency = phase["latency_ms"]
                        log(
                            f"engines: round {round_ + 1} {name:<22} {level:>3} sessions: "
                            f"p50 {latency.get('p50', math.nan):.2f} ms, "
                            f"p99 {latency.get('p99', math.nan):.2f} ms, "
                            f"{phase['commands_per_s']:.0f} writes/s"
                            + (
                                ""
                                if phase["statuses"] == {"200": total}
                                else f"; statuses {phase['statuses']}"
                            )
                        )
        finally:
            reports = {}
            for name, engine in engines.items():
                reports[name] = await engine.stop()
        for name, engine in engines.items():
            if name == "SQLite":
                spans = _sqlite_spans(engine.server.db_path, engine.ids)
            else:
                spans = await asyncio.to_thread(_pg_spans, engine.url or url, engine.ids)
            for phase, phase_spans in zip(engine.phases, spans, strict=True):
                phase["server_side_ms"] = summary(list(phase_spans.values()))
                if len(engine.servers) > 1:
                    _split_by_hop(engine, reports[name], phase, phase_spans)
            results["engines"][name] = _engine_result(engine, reports[name], levels)
    finally:
        await asyncio.to_thread(cluster.stop)
    results["ratios"] = {
        str(level): {
            name: _ratios(results["engines"], name, level)
            for name in results["engines"]
            if name != "SQLite"
        }
        for level in levels
    }
    return results


def _engines(data_root: Path, devices: int, url: str, url3: str) -> dict[str, _Engine]:
    three = new_devices(devices, "t")
    return {
        "SQLite": _Engine(
            "SQLite",
            [Server(_fresh(data_root / "engines-sqlite"), "FULL", new_devices(devices, "s"))],
        ),
        "PostgreSQL": _Engine(
            "PostgreSQL",
            [
                Server(
                    _fresh(data_root / "engines-postgresql"),
                    "FULL",
                    new_devices(devices, "p"),
                    extra_env={"UNDERSTUDY_DATABASE_URL": url},
                )
            ],
            url,
        ),
        # Every node enrolls the same devices (DEVICE_TOKENS) and needs the same master key.
        THREE_NODES: _Engine(
            THREE_NODES,
            [
                Server(
                    _fresh(data_root / f"engines-three-nodes-{i}"),
                    "FULL",
                    three,
                    extra_env={
                        "UNDERSTUDY_DATABASE_URL": url3,
                        "UNDERSTUDY_NODE_ID": f"node-{i}",
                        "UNDERSTUDY_MASTER_KEY": _MASTER_KEY,
                    },
                )
                for i in range(NODES)
            ],
            url3,
        ),
    }


def _split_by_hop(
    engine: _Engine,
    report: dict[str, Any],
    phase: dict[str, Any],
    spans: dict[tuple[str, str], float],
) -> None:
    """Split a phase's server spans by whether the command's HTTP node held its session socket."""
    socket_ports = report.get("session_ports", {})
    index = {session: k for k, session in enumerate(engine.sessions)}
    same: list[float] = []
    cross: list[float] = []
    for (session, _), span in spans.items():
        http_port = engine.node_of_connection(index[session])
        (same if socket_ports.get(session) == http_port else cross).append(span)
    phase["same_node_server_ms"] = summary(same)
    phase["cross_node_server_ms"] = summary(cross)
    phase["cross_node_share"] = len(cross) / len(spans) if spans else math.nan


def _engine_result(engine: _Engine, report: dict[str, Any], levels: list[int]) -> dict[str, Any]:
    writes = sum(p["commands"] + p["warmup_commands"] for p in engine.phases)
    pooled = {}
    for level in levels:
        mine = [p for p in engine.phases if p["sessions"] == level]
        seconds = sum(p["seconds"] for p in mine)
        count = sum(p["commands"] for p in mine)

        def mean(key: str, field: str, phases: list[dict[str, Any]] = mine) -> float:
            values = [p[key].get(field, math.nan) for p in phases if key in p]
            return sum(values) / len(values) if values else math.nan

        pooled[str(level)] = {
            "sessions": level,
            "writes": count,
            "writes_per_s": count / seconds if seconds else 0.0,
            "p50_ms": mean("latency_ms", "p50"),
            "p99_ms": mean("latency_ms", "p99"),
            "server_p50_ms": mean("server_side_ms", "p50"),
            "server_p99_ms": mean("server_side_ms", "p99"),
            "server_cpu_ms_per_write": _mean_of(mine, "server_cpu_ms_per_command"),
            "commits_per_write": _mean_of(mine, "commits_per_write"),
            "wal_syncs_per_write": _mean_of(mine, "wal_syncs_per_write"),
            "wal_sync_ms_per_write": _mean_of(mine, "wal_sync_ms_per_write"),
            "same_node_server_p50_ms": mean("same_node_server_ms", "p50"),
            "cross_node_server_p50_ms": mean("cross_node_server_ms", "p50"),
            "cross_node_server_p99_ms": mean("cross_node_server_ms", "p99"),
            "cross_node_share": _mean_of(mine, "cross_node_share"),
            "statuses": [p["statuses"] for p in mine],
        }
    return {
        "levels": pooled,
        "phases": engine.phases,
        "device_executions": report,
        "writes_acknowledged": writes,
        "every_write_ran_once": report.get("executions") == writes
        and report.get("distinct_writes") == writes
        and report.get("max_executions_per_write") == 1,
    }


def _mean_of(phases: list[dict[str, Any]], key: str) -> float:
    values = [p[key] for p in phases if key in p]
    return sum(values) / len(values) if values else math.nan


def _ratios(engines: dict[str, Any], name: str, level: int) -> dict[str, float]:
    lite, pg = engines["SQLite"]["levels"][str(level)], engines[name]["levels"][str(level)]

    def ratio(a: float, b: float) -> float:
        return a / b if b else math.nan

    return {
        "writes_per_s": ratio(pg["writes_per_s"], lite["writes_per_s"]),
        "p50": ratio(pg["p50_ms"], lite["p50_ms"]),
        "p99": ratio(pg["p99_ms"], lite["p99_ms"]),
    }


async def _counters(probes: list[HttpConnection]) -> tuple[float, float]:
    """(transactions, COMMITs) since the servers started, summed over the nodes' /metrics (both
    engines)."""
    found = dict.fromkeys(
        ("understudy_sqlite_transactions_total", "understudy_sqlite_commits_total"), 0.0
    )
    for connection in probes:
        reply = await connection.request("GET", "/metrics")
        for line in reply.body.decode().splitlines():
            name, _, value = line.partition(" ")
            if name in found:
                found[name] += float(value)
    return found["understudy_sqlite_transactions_total"], found["understudy_sqlite_commits_total"]


def _wal(url: str) -> tuple[float, float]:
    """The cluster's WAL flushes and their milliseconds so far (``pg_stat_wal``). Backends report
    at most once a second, so a phase's delta may miss its last second."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT wal_sync, wal_sync_time FROM pg_stat_wal").fetchone()
    assert row is not None  # noqa: S101 - one row, always
    return float(row[0]), float(row[1])


def _settings(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in REPORTED_SETTINGS
        }


def _pg_commit_rate(url: str, seconds: float) -> dict[str, Any]:
    """One connection, one-row INSERT transactions for ``seconds``: commits per second."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (n integer)")
        count = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            conn.execute("INSERT INTO bench_commit_probe VALUES (%s)", (count,))
            count += 1
        elapsed = time.perf_counter() - started
        conn.execute("DROP TABLE bench_commit_probe")
    return {"transactions": count, "seconds": elapsed, "transactions_per_s": count / elapsed}


Spans = dict[tuple[str, str], float]  # (session, command id) -> admission to outcome, ms


def _sqlite_spans(db_path: Path, phases: list[list[tuple[str, str]]]) -> list[Spans]:
    import sqlite3

    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return [
            _spans(lambda q, p: connection.execute(q, p).fetchone(), "?", ids) for ids in phases
        ]
    finally:
        connection.close()


def _pg_spans(url: str, phases: list[list[tuple[str, str]]]) -> list[Spans]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [_spans(lambda q, p: conn.execute(q, p).fetchone(), "%s", ids) for ids in phases]


_SPAN_QUERY: Final = {
    "?": "SELECT admitted_at, completed_at FROM commands WHERE session_id = ? AND command_id = ?",
    "%s": "SELECT admitted_at, completed_at FROM commands "
    "WHERE session_id = %s AND command_id = %s",
}


def _spans(
    one: Callable[[str, tuple[str, str]], Any], marker: str, ids: list[tuple[str, str]]
) -> Spans:
    query = _SPAN_QUERY[marker]
    spans = {}
    for session, command_id in ids:
        row = one(query, (session, command_id))
        if row is not None and row[1] is not None:
            spans[session, command_id] = (float(row[1]) - float(row[0])) * 1000
    return spans


def _fresh(directory: Path) -> Path:
    overhead._fresh(directory)
    return directory


# -- the suite's interface ---------------------------------------------------------------------

FULL_LEVELS: Final = [10, 100]
QUICK_LEVELS: Final = [1, 10]


async def suite(ctx: Context) -> dict[str, Any]:
    """The full run (10 and 100 sessions, two rounds) or the quick slice (1 and 10, one round)."""
    if ctx.quick:
        return await run(ctx.data_root, QUICK_LEVELS, 200, 20, 1, 1.0, ctx.log)
    return await run(ctx.data_root, FULL_LEVELS, 2000, 200, 2, 3.0, ctx.log)


def tables(result: dict[str, Any]) -> list[Table]:
    table = Table(
        "Storage engines: governed writes (click) through HTTP to instant simulated devices",
        [
            "deployment",
            "sessions",
            "n",
            "writes/s",
            "p50 ms",
            "p99 ms",
            "server p50 ms",
            "server p99 ms",
            "rest p50 ms",
            "server CPU ms/write",
            "commits/write",
            "WAL fsyncs/write",
            "WAL fsync ms/write",
            "x SQLite writes/s",
            "x SQLite p50",
            "x SQLite p99",
        ],
    )
    missing = result.get("not_measured", {})
    for level in result["levels"]:
        for name in ENGINES:
            if name in missing:
                table.rows.append(
                    [LABELS[name], str(level), f"not measured: {missing[name]}"] + [""] * 13
                )
                continue
            row = result["engines"][name]["levels"][str(level)]
            ratios = result["ratios"][str(level)].get(name)
            table.rows.append(
                [
                    LABELS[name],
                    str(level),
                    str(row["writes"]),
                    fmt(row["writes_per_s"], 0),
                    fmt(row["p50_ms"]),
                    fmt(row["p99_ms"]),
                    fmt(row["server_p50_ms"]),
                    fmt(row["server_p99_ms"]),
                    fmt(row["p50_ms"] - row["server_p50_ms"]),
                    fmt(row["server_cpu_ms_per_write"]),
                    fmt(row["commits_per_write"]),
                    fmt(row["wal_syncs_per_write"]) if name != "SQLite" else "",
                    fmt(row["wal_sync_ms_per_write"]) if name != "SQLite" else "",
                    fmt(ratios["writes_per_s"]) if ratios else "1.00",
                    fmt(ratios["p50"]) if ratios else "1.00",
                    fmt(ratios["p99"]) if ratios else "1.00",
                ]
            )
    settings = result["postgresql"]
    fs = settings["data_dir_filesystem"]
    table.notes.append(
        f"PostgreSQL {settings['server_version']}: fsync={settings['fsync']}, "
        f"synchronous_commit={settings['synchronous_commit']}, "
        f"full_page_writes={settings['full_page_writes']}, "
        f"wal_sync_method={settings['wal_sync_method']}, commit_delay={settings['commit_delay']}; "
        f"data on {fs['device']} ({fs['type']}). SQLite: synchronous=FULL, group commit"
    )
    rates = result["commit_rates"]
    table.notes.append(
        "one connection's one-row commits/s: SQLite "
        f"{fmt(rates['SQLite']['transactions_per_s'], 0)}, PostgreSQL "
        f"{fmt(rates['PostgreSQL']['transactions_per_s'], 0)}"
    )
    if THREE_NODES in result["engines"]:
        for level in result["levels"]:
            row = result["engines"][THREE_NODES]["levels"][str(level)]
            table.notes.append(
                f"{THREE_NODES}, {level} sessions: {fmt(row['cross_node_share'] * 100, 0)}% of "
                "writes admitted on another node than their session socket's; server p50 "
                f"same node {fmt(row['same_node_server_p50_ms'])} ms, cross-node "
                f"{fmt(row['cross_node_server_p50_ms'])} ms (p99 "
                f"{fmt(row['cross_node_server_p99_ms'])} ms)"
            )
    for name in result["engines"]:
        data = result["engines"][name]
        table.notes.append(
            f"{LABELS[name]}: every write ran exactly once on its device: "
            f"{data['every_write_ran_once']} ({data['writes_acknowledged']} writes)"
        )
    table.notes.append(
        f"phases interleaved ABBA over {result['rounds']} round(s) of {result['total_per_phase']} "
        "writes; p50/p99 are the mean of the rounds'. server = admission to the outcome's turn "
        "(command rows, server clock); rest = client p50 - server p50 (HTTP, the final turn and "
        "its COMMIT, the reply). Three nodes: CPU and COMMITs summed over the nodes"
    )
    return [table]


def targets(result: dict[str, Any]) -> list[Target]:
    found = []
    for name in result["engines"]:
        data = result["engines"][name]
        found.append(
            Target(
                f"every governed write ran exactly once ({name})",
                "device executions = acknowledged writes",
                f"{data['device_executions'].get('executions')} executions, "
                f"{data['writes_acknowledged']} writes",
                bool(data["every_write_ran_once"]),
            )
        )
    return found
