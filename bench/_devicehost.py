"""Simulated devices for the overhead benchmark, in their own process (``python -m
bench._devicehost``).

It runs :class:`tests.support.simdevice.SimulatedDevice` objects (the extension stand-in that
executes every command instantly) so the server, the load generator and the devices are three
processes.
Each device heartbeats every 22 s as the extension does, so a long run never sees a device go
offline. Control protocol, JSON lines: the first stdin line is the job ``{"base_url",
"credentials": [credential, ...]}`` (optionally ``"base_urls"``, one per credential: the nodes
the devices connect to); the host answers ``{"op": "connected"}`` once every
device has its welcome, and on ``{"op": "stop"}`` answers with the execution counts and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

from tests.support.simdevice import SimulatedDevice

from bench._workers import LINE_LIMIT
from understudy.generated.protocol import HEARTBEAT_INTERVAL_MS


async def _heartbeats(devices: list[SimulatedDevice]) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_INTERVAL_MS / 1000)
        for device in devices:
            with contextlib.suppress(Exception):  # a dropped socket shows up in the results
                await device.heartbeat()


async def _main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def answer(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    job = json.loads(await reader.readline())
    # One base URL per device (several nodes), or one for all.
    urls = job.get("base_urls") or [job["base_url"]] * len(job["credentials"])
    devices = [
        SimulatedDevice(url, credential)
        for url, credential in zip(urls, job["credentials"], strict=True)
    ]
    for device in devices:
        await device.connect()
    beating = asyncio.create_task(_heartbeats(devices))
    answer({"op": "connected", "devices": len(devices)})
    while line := await reader.readline():
        if json.loads(line).get("op") == "stop":
            break
    beating.cancel()
    counts = [count for device in devices for count in device.executions.values()]
    answer(
        {
            "op": "stopped",
            "executions": sum(counts),
            "distinct_writes": len(counts),
            "max_executions_per_write": max(counts, default=0),
            "session_errors": [e for device in devices for e in device.session_errors][:5],
            # Where each session's socket is (the node's port), for the per-hop split.
            "session_ports": {
                lease.session_id: lease.session_socket.remote_address[1]
                for device in devices
                for lease in device.leases.values()
                if lease.session_socket is not None
            },
        }
    )
    for device in devices:
        with contextlib.suppress(Exception):
            await device.stop()


if __name__ == "__main__":
    asyncio.run(_main())
