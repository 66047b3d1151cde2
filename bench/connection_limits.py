"""A normal request under slow-client pressure: ``GET /healthz`` while connections trickle their
headers and device sockets never say hello.

Method:

1. Set-up: an `understudy serve` subprocess (SQLite ``synchronous=FULL``) with ``hello_less``
   devices enrolled through ``DEVICE_TOKENS``; two variants in the same run, each on a fresh
   server: the default connection limits (a request head within 10 s, a ``hello`` within 10 s),
   and the limits relaxed to 600 s, which holds every slow client open for the whole run, as
   before the limits existed.
2. One sample: ``GET /healthz`` on one keep-alive HTTP/1.1 connection (``bench._http``), timed
   from the request written to the reply read, one every ``pace_ms``.
3. Three phases per variant, ``samples`` each: *idle* (no other client); *under load*
   (``trickling`` connections each write ``GET /healthz HTTP/1.1`` and then one header byte every
   ``trickle_interval_s``, reconnecting when the server closes them, as an attacker would; and
   ``hello_less`` device sockets opened with a fresh ticket and then silent, reopened when closed;
   all opened before the first sample); *after* (the load stopped and its sockets closed).
4. Reported: p50/p99/max per phase, and what the server did to the slow clients during the load
   phase (``408 request_timeout`` replies, silent closes, ``4408`` closes).

The under-load phase lasts longer than the limits, so closes and reconnects happen while it is
measured. The load generator runs in the runner's process and event loop; its cost (a byte a
second per connection) is small next to one request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import websockets

from bench._http import HttpConnection
from bench._report import Table, Target, fmt
from bench._server import Server, new_devices
from bench._stats import summary

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from bench._context import Context

TARGET_P99_RATIO: Final = 2.0  # p99 under load at most twice the idle p99, or within 5 ms of it
TARGET_P99_SLACK_MS: Final = 5.0
RELAXED: Final = json.dumps({"requestHeadTimeoutS": 600, "helloTimeoutS": 600})
_TRICKLE_HEAD: Final = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@dataclass
class SlowClients:
    """Trickling HTTP connections and hello-less device sockets against one server.

    Args:
        host: Server address.
        port: Server port.
        trickling: How many connections trickle a request head.
        devices: Device id to credential; one hello-less socket per device.
        trickle_interval_s: Seconds between two bytes of a trickled head.
    """

    host: str
    port: int
    trickling: int
    devices: Mapping[str, str]
    trickle_interval_s: float = 1.0
    counts: Counter[str] = field(default_factory=Counter)
    close_codes: Counter[int] = field(default_factory=Counter)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _opened: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(0))

    async def start(self) -> None:
        """Open every slow client; returns once each has opened its first connection."""
        self._tasks = [asyncio.create_task(self._trickle()) for _ in range(self.trickling)]
        self._tasks += [
            asyncio.create_task(self._hello_less(credential))
            for credential in self.devices.values()
        ]
        for _ in self._tasks:
            await self._opened.acquire()

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _trickle(self) -> None:
        first = True
        while not self._stop.is_set():
            reader, writer = await asyncio.open_connection(self.host, self.port)
            self.counts["trickle_opened"] += 1
            if first:
                self._opened.release()
                first = False
            try:
                answer = await self._dribble(reader, writer)
            finally:
                writer.close()
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.wait_closed()
            if answer.startswith(b"HTTP/1.1 408 "):
                self.counts["trickle_408"] += 1
            elif answer:
                self.counts["trickle_other_reply"] += 1
            else:
                self.counts["trickle_closed_silently"] += 1

    async def _dribble(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """Write the head a byte at a time until the server answers or closes."""
        head = _TRICKLE_HEAD + b"a" * 100_000  # never finished
        reading = asyncio.ensure_future(reader.read())
        try:
            for byte in head:
                if reading.done():
                    break
                try:
                    writer.write(bytes([byte]))
                    await writer.drain()
                except (ConnectionError, OSError):
                    break
                await asyncio.wait({reading}, timeout=self.trickle_interval_s)
            return await reading
        except (ConnectionError, OSError):
            return b""
        finally:
            reading.cancel()

    async def _hello_less(self, credential: str) -> None:
        first = True
        while not self._stop.is_set():
            connection = HttpConnection(self.host, self.port)
            try:
                reply = await connection.post_json(
                    "/v1/device/connect-ticket",
                    {"browserEpoch": str(uuid.uuid4())},
                    {"Authorization": f"Bearer {credential}"},
                )
            finally:
                await connection.close()
            if reply.status != 200:
                self.counts[f"hello_less_ticket_{reply.status}"] += 1
                await asyncio.sleep(1.0)
                continue
            socket = await websockets.connect(reply.json()["socketUrl"], open_timeout=10)
            self.counts["hello_less_opened"] += 1
            if first:
                self._opened.release()
                first = False
            try:
                await socket.wait_closed()
            finally:
                await socket.close()
            if socket.close_code is not None:
                self.close_codes[socket.close_code] += 1


async def healthz_latencies(
    connection: HttpConnection, samples: int, pace_ms: float
) -> tuple[list[float], Counter[int]]:
    """``samples`` sequential ``GET /healthz``, one every ``pace_ms``; milliseconds, statuses."""
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    for _ in range(samples):
        started = time.perf_counter()
        reply = await connection.request("GET", "/healthz")
        elapsed = (time.perf_counter() - started) * 1000
        latencies.append(elapsed)
        statuses[reply.status] += 1
        await asyncio.sleep(max(0.0, pace_ms - elapsed) / 1000)
    return latencies, statuses


async def _variant(
    data_dir: Path,
    *,
    relaxed: bool,
    samples: int,
    pace_ms: float,
    trickling: int,
    hello_less: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    devices = new_devices(hello_less, prefix="slow")
    server = Server(
        data_dir,
        devices=devices,
        extra_env={"UNDERSTUDY_CONNECTION_LIMITS": RELAXED} if relaxed else {},
    )
    await server.start()
    phases: dict[str, Any] = {}
    statuses: Counter[int] = Counter()
    clients = SlowClients(server.host, server.port, trickling, devices)
    connection = HttpConnection(server.host, server.port)
    try:
        await healthz_latencies(connection, 50, pace_ms)  # warm-up, not recorded
        for phase in ("idle", "under_load", "after"):
            if phase == "under_load":
                await clients.start()
                log(f"  {trickling} trickling connections and {hello_less} hello-less sockets open")
            elif phase == "after":
                await clients.stop()
                await server.settle()
            latencies, seen = await healthz_latencies(connection, samples, pace_ms)
            statuses.update(seen)
            phases[phase] = summary(latencies)
            log(f"  {phase}: p50 {phases[phase]['p50']} ms, p99 {phases[phase]['p99']} ms")
    finally:
        await clients.stop()
        await connection.close()
        await server.stop()
    return {
        "limits": "relaxed to 600 s" if relaxed else "defaults (10 s)",
        "healthz_ms": phases,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "slow_clients": dict(sorted(clients.counts.items())),
        "socket_close_codes": {str(k): v for k, v in sorted(clients.close_codes.items())},
    }


async def run(
    data_root: Path,
    *,
    samples: int,
    pace_ms: float,
    trickling: int,
    hello_less: int,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "samples": samples,
        "pace_ms": pace_ms,
        "trickling": trickling,
        "hello_less": hello_less,
        "method": __doc__,
        "variants": {},
    }
    for name, relaxed in (("defaults", False), ("relaxed", True)):
        log(f"connection_limits: {name}")
        result["variants"][name] = await _variant(
            data_root / f"limits-{name}",
            relaxed=relaxed,
            samples=samples,
            pace_ms=pace_ms,
            trickling=trickling,
            hello_less=hello_less,
            log=log,
        )
    return result


async def suite(ctx: Context) -> dict[str, Any]:
    """3,000 samples per phase at 5 ms (15 s, longer than the limits), 200 trickling
    connections and 50 hello-less sockets (quick: 2,400 samples, 100 and 20)."""
    if ctx.quick:
        return await run(
            ctx.data_root, samples=2400, pace_ms=5, trickling=100, hello_less=20, log=ctx.log
        )
    return await run(
        ctx.data_root, samples=3000, pace_ms=5, trickling=200, hello_less=50, log=ctx.log
    )


def tables(result: dict[str, Any]) -> list[Table]:
    table = Table(
        f"GET /healthz under slow clients ({result['trickling']} trickling connections, "
        f"{result['hello_less']} hello-less sockets; ms)",
        ["limits", "phase", "n", "p50", "p95", "p99", "max"],
    )
    for variant in result["variants"].values():
        for phase, figures in variant["healthz_ms"].items():
            table.rows.append(
                [
                    variant["limits"],
                    phase.replace("_", " "),
                    str(figures["n"]),
                    fmt(figures["p50"]),
                    fmt(figures["p95"]),
                    fmt(figures["p99"]),
                    fmt(figures["max"]),
                ]
            )
    for variant in result["variants"].values():
        clients = ", ".join(f"{k} {v}" for k, v in variant["slow_clients"].items())
        codes = ", ".join(f"{k} x {v}" for k, v in variant["socket_close_codes"].items()) or "none"
        replies = ", ".join(f"{v} x {k}" for k, v in variant["statuses"].items())
        table.notes.append(
            f"{variant['limits']}: healthz replies {replies}; slow clients: {clients}; "
            f"hello-less socket closes: {codes}"
        )
    table.notes.append(f"one sample every {fmt(result['pace_ms'], 0)} ms on one connection")
    return [table]


def targets(result: dict[str, Any]) -> list[Target]:
    figures = result["variants"]["defaults"]["healthz_ms"]
    idle, loaded = figures["idle"]["p99"], figures["under_load"]["p99"]
    bound = max(idle * TARGET_P99_RATIO, idle + TARGET_P99_SLACK_MS)
    return [
        Target(
            "GET /healthz p99 under trickling and hello-less clients (default limits)",
            f"p99 <= max({TARGET_P99_RATIO:g} x idle p99, idle p99 + {TARGET_P99_SLACK_MS:g} ms)",
            f"idle p99 {fmt(idle)} ms, under load {fmt(loaded)} ms, after "
            f"{fmt(figures['after']['p99'])} ms",
            loaded <= bound,
        )
    ]
