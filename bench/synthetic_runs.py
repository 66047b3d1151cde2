"""Synthetic Users run creation: ``POST /runs`` to ``202``, and its idempotent replays.

Method:

1. Set-up: a ``synthetic-users serve --api-only`` subprocess on 127.0.0.1 (a free port) with a
   fresh data directory (SQLite ``synchronous=FULL``, WAL) and no orchestrator, so runs stay
   ``queued``: what is measured is the API's own work, not personas competing for the cores (a
   run's work happens after its answer in any case). The API key comes
   from ``synthetic-users keys create --customer bench``, as an operator makes one. The rate
   limits are off (``0``) and the target is a loopback address with loopback targets allowed:
   the machine has no DNS, and the service resolves every target's name before it writes a run.
2. One sample: ``POST /runs`` with three inline personas of different literacy, a target URL,
   a task and a fresh ``Idempotency-Key``, on a keep-alive HTTP/1.1 connection (``bench._http``),
   timed from the request written to the reply read. ``202`` means the body was validated against
   the generated models and the run and its three persona sessions were committed (one fsync).
3. Phases, in this order: sequential creates on one connection; concurrent creates, 8
   connections each sending back to back (the p99 a busy customer sees); replays of keys of the
   sequential phase (must answer ``200`` with the same ``run_id``: a lookup, no write).
4. Reported: p50/p95/p99/max (nearest rank) per phase, requests/s of the concurrent phase, the
   server's CPU per request (utime + stime over the phase), and the replies' statuses.

Warm-up: 20 creates, not recorded. Sample size: 300 sequential, 400 concurrent (8 x 50), 200
replays; quick: 100, 160 (8 x 20) and 50.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from bench._http import HttpConnection
from bench._proc import sample
from bench._report import Table, Target, fmt
from bench._server import answers_ok, serving_port
from bench._stats import summary

if TYPE_CHECKING:
    from bench._context import Context

TARGET_P99_MS: Final = 500.0
CONCURRENCY: Final = 8
CUSTOMER: Final = "bench"
BODY: Final = {
    "target_url": "https://127.0.0.1:8443/shop",
    "task": "Find a kettle under 40 euros, add it to the cart and check out as a guest.",
    "personas": [
        {"name": "Margaret", "background": "Retired teacher.", "digital_literacy": "low"},
        {"name": "Sam", "digital_literacy": "medium", "patience": "low", "device": "mobile"},
        {"name": "Dev", "digital_literacy": "high", "goals": ["Finish in under a minute"]},
    ],
}
_READY_TIMEOUT_S: Final = 60.0


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("synthetic-users")
    return [str(script)] if script.exists() else [sys.executable, "-m", "synthetic_users.cli"]


class Service:
    """One ``synthetic-users serve`` process with a fresh data directory and an API key."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = 0  # picked by the service itself, read from its output once it serves
        self.output = data_dir / "serve.log"
        self.env = {
            **os.environ,
            "SYNTHETIC_USERS_DATA_DIR": str(data_dir),
            "SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS": "1",
            "SYNTHETIC_USERS_RUNS_PER_MINUTE": "0",
            "SYNTHETIC_USERS_REQUESTS_PER_MINUTE": "0",
            "SYNTHETIC_USERS_MAX_ACTIVE_RUNS": "0",
        }
        self.proc: asyncio.subprocess.Process | None = None
        self.key = ""

    async def __aenter__(self) -> Service:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Our own CLI with fixed arguments.
        created = await asyncio.create_subprocess_exec(
            *_cli(),
            "keys",
            "create",
            "--customer",
            CUSTOMER,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await created.communicate()
        if created.returncode != 0:
            raise RuntimeError("synthetic-users keys create failed")
        self.key = out.decode().strip()
        with self.output.open("wb") as output:
            self.proc = await asyncio.create_subprocess_exec(
                *_cli(),
                *("serve", "--api-only", "--host", "127.0.0.1", "--port", "0"),
                env=self.env,
                stdout=output,
            )
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while True:
            self.port = self.port or serving_port(self.output) or 0
            if self.port and await answers_ok(self.port, "/healthz"):
                return self
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError("synthetic-users serve did not become healthy")
            await asyncio.sleep(0.1)

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout=30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def connection(self) -> HttpConnection:
        return HttpConnection("127.0.0.1", self.port, {"Authorization": f"Bearer {self.key}"})

    def cpu_s(self) -> float:
        assert self.proc is not None  # noqa: S101 - started
        return sample(self.proc.pid).cpu_s


async def _create(conn: HttpConnection, key: str, statuses: Counter[int]) -> tuple[float, Any]:
    body = json.dumps(BODY).encode()
    started = time.perf_counter()
    reply = await conn.request("POST", "/runs", body, {"Idempotency-Key": key})
    elapsed = (time.perf_counter() - started) * 1000
    statuses[reply.status] += 1
    return elapsed, reply.json() if reply.status < 300 else None


async def run(data_root: Path, sequential: int, concurrent: int, replays: int) -> dict[str, Any]:
    statuses: dict[str, Counter[int]] = {
        p: Counter() for p in ("sequential", "concurrent", "replay")
    }
    async with Service(data_root / f"synthetic-runs-{uuid.uuid4().hex[:8]}") as service:
        conn = service.connection()
        warm: Counter[int] = Counter()
        for _ in range(20):
            await _create(conn, str(uuid.uuid4()), warm)

        keys: list[tuple[str, str]] = []
        seq_ms: list[float] = []
        cpu = service.cpu_s()
        for _ in range(sequential):
            key = str(uuid.uuid4())
            elapsed, body = await _create(conn, key, statuses["sequential"])
            seq_ms.append(elapsed)
            if body is not None:
                keys.append((key, body["run_id"]))
        seq_cpu = (service.cpu_s() - cpu) * 1000 / max(1, sequential)

        per_client = concurrent // CONCURRENCY
        clients = [service.connection() for _ in range(CONCURRENCY)]
        conc_ms: list[float] = []

        async def client(c: HttpConnection) -> None:
            for _ in range(per_client):
                elapsed, _body = await _create(c, str(uuid.uuid4()), statuses["concurrent"])
                conc_ms.append(elapsed)

        cpu, started = service.cpu_s(), time.perf_counter()
        await asyncio.gather(*(client(c) for c in clients))
        wall = time.perf_counter() - started
        conc_cpu = (service.cpu_s() - cpu) * 1000 / max(1, len(conc_ms))
        for c in clients:
            await c.close()

        replay_ms: list[float] = []
        same = 0
        cpu = service.cpu_s()
        for key, run_id in keys[:replays]:
            elapsed, body = await _create(conn, key, statuses["replay"])
            replay_ms.append(elapsed)
            same += body is not None and body["run_id"] == run_id
        replay_cpu = (service.cpu_s() - cpu) * 1000 / max(1, len(replay_ms))
        await conn.close()
    return {
        "sequential_ms": summary(seq_ms),
        "concurrent_ms": summary(conc_ms),
        "replay_ms": summary(replay_ms),
        "concurrency": CONCURRENCY,
        "concurrent_per_s": round(len(conc_ms) / wall, 1) if wall else 0.0,
        "server_cpu_ms": {
            "sequential": round(seq_cpu, 3),
            "concurrent": round(conc_cpu, 3),
            "replay": round(replay_cpu, 3),
        },
        "replays_same_run": same,
        "statuses": {phase: dict(counts) for phase, counts in statuses.items()},
        "personas_per_run": len(BODY["personas"]),
    }


async def suite(ctx: Context) -> dict[str, Any]:
    """300 sequential, 400 concurrent and 200 replays (quick: 100, 160, 50)."""
    ctx.log("synthetic_runs: POST /runs against synthetic-users serve")
    if ctx.quick:
        return await run(ctx.data_root, 100, 160, 50)
    return await run(ctx.data_root, 300, 400, 200)


def tables(result: dict[str, Any]) -> list[Table]:
    table = Table(
        f"Synthetic Users POST /runs ({result['personas_per_run']} personas a run, SQLite FULL)",
        ["phase", "n", "p50 ms", "p95 ms", "p99 ms", "max ms", "server CPU ms", "replies"],
    )
    for phase, label in (
        ("sequential", "create, 1 connection"),
        ("concurrent", f"create, {result['concurrency']} connections"),
        ("replay", "idempotent replay"),
    ):
        cell = result[f"{phase}_ms"]
        replies = ", ".join(f"{n} x {s}" for s, n in sorted(result["statuses"][phase].items()))
        table.rows.append(
            [
                label,
                str(cell.get("n", 0)),
                fmt(cell.get("p50", float("nan"))),
                fmt(cell.get("p95", float("nan"))),
                fmt(cell.get("p99", float("nan"))),
                fmt(cell.get("max", float("nan"))),
                fmt(result["server_cpu_ms"][phase]),
                replies,
            ]
        )
    table.notes.append(
        f"{result['concurrent_per_s']} creates/s with {result['concurrency']} connections; "
        f"{result['replays_same_run']} of {result['replay_ms'].get('n', 0)} replays answered the "
        "same run_id; 20 warm-up creates not recorded"
    )
    return [table]


def targets(result: dict[str, Any]) -> list[Target]:
    worst = max(result[f"{p}_ms"].get("p99", float("inf")) for p in ("sequential", "concurrent"))
    replays_ok = result["replays_same_run"] == result["replay_ms"].get("n", -1)
    return [
        Target(
            "POST /runs answers {run_id, status: queued}",
            f"p99 < {TARGET_P99_MS:.0f} ms",
            f"p99 {fmt(worst)} ms (worst phase)",
            worst < TARGET_P99_MS,
        ),
        Target(
            "POST /runs idempotent replay",
            "every replay answers the same run_id",
            f"{result['replays_same_run']} of {result['replay_ms'].get('n', 0)}",
            replays_ok,
        ),
    ]
