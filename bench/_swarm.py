"""A swarm of lightweight simulated devices in one process (``python -m bench._swarm``).

Full :class:`tests.support.simdevice.SimulatedDevice` objects validate every frame with pydantic and
keep every frame they receive; 10,000 of them would make the client, not the server, the thing
measured. A swarm device keeps only what the scale benchmark needs, but speaks the real frames:
``POST /v1/device/connect-ticket`` with its device credential, the device socket at the returned
URL, a ``hello`` built with the generated models (so it is schema-valid), the server's
``welcome``, then ``heartbeat`` frames answered by ``heartbeat_ack``. Like Chromium, it offers
permessage-deflate and sends no WebSocket pings (the extension's keep-alive is the heartbeat).

Control protocol, one JSON object per line: the first stdin line is the job
``{"host", "port", "credentials": [...], "concurrency", "seed"}``; then the commands
``{"op": "connect"}``, ``{"op": "heartbeat", "interval_s", "rounds"}`` and ``{"op": "close"}``,
each answered by one line on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import resource
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bench._http import HttpConnection
from bench._workers import LINE_LIMIT
from understudy.generated import models as m

if TYPE_CHECKING:
    from collections.abc import Callable

HELLO_CAPABILITIES = ["safe_write_v2", "dialogs_v1", "attended_v1", "unattended_v1"]
ACK_TIMEOUT_S = 60.0


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the (soft, hard) now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


@dataclass
class SwarmDevice:
    credential: str
    browser_epoch: str = field(default_factory=lambda: str(uuid.uuid4()))
    socket: ClientConnection | None = None
    reader: asyncio.Task[None] | None = None
    welcome: asyncio.Future[None] | None = None
    seq: int = 0
    sent_at: dict[int, float] = field(default_factory=dict)
    ack_ms: list[float] = field(default_factory=list)
    other_frames: int = 0
    on_ack: Callable[[], None] = lambda: None

    def hello(self) -> str:
        return m.DeviceClientHello.model_validate(
            {
                "type": "hello",
                "protocolVersions": [1, 2],
                "capabilities": HELLO_CAPABILITIES,
                "browserEpoch": self.browser_epoch,
                "extensionVersion": "0.0.0-bench",
                "localOriginPolicy": {"mode": "any"},
                "capacity": {"total": 2, "free": 2},
                "leases": [],
            }
        ).to_wire_json()

    def heartbeat(self) -> str:
        self.seq += 1
        self.sent_at[self.seq] = time.perf_counter()
        return m.DeviceClientHeartbeat(
            type="heartbeat", seq=self.seq, free_capacity=2
        ).to_wire_json()

    async def read(self) -> None:
        assert self.socket is not None  # noqa: S101 - connected
        with contextlib.suppress(ConnectionClosed):
            async for raw in self.socket:
                frame = json.loads(raw)
                kind = frame.get("type")
                if kind == "heartbeat_ack":
                    sent = self.sent_at.pop(int(frame["seq"]), None)
                    if sent is not None:
                        self.ack_ms.append((time.perf_counter() - sent) * 1000)
                        self.on_ack()
                elif kind == "welcome":
                    if self.welcome is not None and not self.welcome.done():
                        self.welcome.set_result(None)
                else:
                    self.other_frames += 1


class Swarm:
    def __init__(self, job: dict[str, Any]) -> None:
        self.host: str = job["host"]
        self.port: int = job["port"]
        self.concurrency: int = job.get("concurrency", 32)
        # Only spreads heartbeats over the interval; seeded so runs are comparable.
        self.random = random.Random(job.get("seed", 0))  # noqa: S311
        self.devices = [SwarmDevice(credential) for credential in job["credentials"]]

    async def connect_all(self) -> dict[str, Any]:
        queue: asyncio.Queue[SwarmDevice] = asyncio.Queue()
        for device in self.devices:
            queue.put_nowait(device)
        latencies: list[float] = []
        errors: list[str] = []

        async def worker() -> None:
            http = HttpConnection(self.host, self.port)
            try:
                while not queue.empty():
                    device = queue.get_nowait()
                    started = time.perf_counter()
                    try:
                        await self._connect(http, device)
                    except Exception as exc:  # reported, not fatal: the count says how many
                        errors.append(f"{type(exc).__name__}: {exc}"[:200])
                        continue
                    latencies.append((time.perf_counter() - started) * 1000)
            finally:
                await http.close()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        return {
            "op": "connected",
            "ok": len(latencies),
            "failed": len(errors),
            "errors": errors[:5],
            "seconds": time.perf_counter() - started,
            "latency_ms": latencies,
        }

    async def _connect(self, http: HttpConnection, device: SwarmDevice) -> None:
        reply = await http.post_json(
            "/v1/device/connect-ticket",
            {"browserEpoch": device.browser_epoch},
            {"Authorization": f"Bearer {device.credential}"},
        )
        if reply.status != 200:
            raise RuntimeError(f"connect-ticket answered {reply.status}: {reply.body[:200]!r}")
        ticket = reply.json()
        device.socket = await connect(
            ticket["socketUrl"], open_timeout=60, ping_interval=None, close_timeout=5
        )
        device.welcome = asyncio.get_running_loop().create_future()
        device.reader = asyncio.create_task(device.read())
        await device.socket.send(device.hello())
        await asyncio.wait_for(device.welcome, 60)

    async def heartbeats(self, interval_s: float, rounds: int) -> dict[str, Any]:
        """Every device sends ``rounds`` heartbeats ``interval_s`` apart, first at a random offset
        within the interval, so the server sees a steady aggregate rate."""
        live = [d for d in self.devices if d.socket is not None]
        acked = 0
        all_acked = asyncio.Event()
        expected = len(live) * rounds

        def on_ack() -> None:
            nonlocal acked
            acked += 1
            if acked >= expected:
                all_acked.set()

        for device in live:
            device.ack_ms.clear()
            device.on_ack = on_ack

        async def beat(device: SwarmDevice) -> int:
            await asyncio.sleep(self.random.uniform(0, interval_s))
            sent = 0
            for round_ in range(rounds):
                assert device.socket is not None  # noqa: S101 - live
                try:
                    await device.socket.send(device.heartbeat())
                    sent += 1
                except ConnectionClosed:
                    return sent
                if round_ + 1 < rounds:
                    await asyncio.sleep(interval_s)
            return sent

        started = time.perf_counter()
        sent = sum(await asyncio.gather(*(beat(d) for d in live)))
        sending_s = time.perf_counter() - started
        if sent == expected:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_acked.wait(), ACK_TIMEOUT_S)
        else:  # some sockets closed: wait out the timeout for the acks that can still come
            await asyncio.sleep(ACK_TIMEOUT_S)
        acks = [ms for d in live for ms in d.ack_ms]
        return {
            "op": "heartbeats",
            "sent": sent,
            "acked": len(acks),
            "sending_s": sending_s,
            "seconds": time.perf_counter() - started,
            "ack_ms": acks,
            "other_frames": sum(d.other_frames for d in live),
        }

    async def close_all(self) -> dict[str, Any]:
        async def close(device: SwarmDevice) -> None:
            if device.socket is not None:
                with contextlib.suppress(Exception):
                    await device.socket.close()
            if device.reader is not None:
                device.reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await device.reader

        await asyncio.gather(*(close(d) for d in self.devices))
        return {"op": "closed"}


async def _main() -> None:
    limits = raise_open_file_limit()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def answer(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    job = json.loads(await reader.readline())
    swarm = Swarm(job)
    answer({"op": "ready", "devices": len(swarm.devices), "nofile": list(limits)})
    while line := await reader.readline():
        command = json.loads(line)
        if command["op"] == "connect":
            answer(await swarm.connect_all())
        elif command["op"] == "heartbeat":
            answer(await swarm.heartbeats(float(command["interval_s"]), int(command["rounds"])))
        elif command["op"] == "close":
            answer(await swarm.close_all())
            return
        else:
            answer({"op": "error", "message": f"unknown op {command['op']!r}"})
    await swarm.close_all()


if __name__ == "__main__":
    asyncio.run(_main())
