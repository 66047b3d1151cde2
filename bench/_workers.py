"""Helper processes driven over JSON lines on stdin/stdout (the swarm and the device host)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

# A job carries thousands of credentials and a reply thousands of latency samples, on one line.
LINE_LIMIT = 64 * 1024 * 1024


class Worker:
    """A ``python -m <module>`` child that answers one JSON line per JSON line it is sent."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, module: str, job: dict[str, Any]) -> Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
            start_new_session=True,  # Ctrl-C reaches the bench, which stops its workers itself
        )
        worker = cls(process)
        await worker.send(job)
        return worker

    @property
    def pid(self) -> int:
        return self.process.pid

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None  # noqa: S101 - piped
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None  # noqa: S101 - piped
        line = await self.process.stdout.readline()
        if not line:
            code = await self.process.wait()
            raise RuntimeError(f"worker {self.pid} exited with {code} before answering")
        reply: dict[str, Any] = json.loads(line)
        if reply.get("op") == "error":
            raise RuntimeError(f"worker {self.pid}: {reply.get('message')}")
        return reply

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        await self.send(message)
        return await self.receive()

    async def stop(self, timeout_s: float = 30.0) -> None:
        """Close its stdin and wait; kill it (by its own pid) if it does not exit in time."""
        if self.process.returncode is not None:
            return
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), timeout_s)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
