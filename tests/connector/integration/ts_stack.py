"""The running backend and simulated devices, remote-controlled for the TypeScript connector.

`python -m tests.connector.integration.ts_stack` (from the repository root) serves a small JSON
control API on 127.0.0.1 and prints one line, `{"control": "http://127.0.0.1:<port>"}`. The
TypeScript integration tests (packages/connector/test/integration) start it from their vitest
global setup, and ask it for what the Python tests of this folder do in-process: a fresh backend
for each test (its manual clock included), simulated devices with a `Behaviour`, moves of the
clock, releasing a held result, dropping and restoring the device's sockets.

The stack is the one of `conftest.py` (`start_backend` with a `ManualClock`, `LeaseArchive`), so
both connectors are proven against the same backend. It stops itself when its standard input
closes (the test runner exited) and binds only 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.backend.conftest import Backend, start_backend, stop_backend
from tests.support.simdevice import ALL_CAPABILITIES, Behaviour
from understudy.generated import models as m

from .conftest import WITHIN, LeaseArchive, session_frames

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from tests.support.simdevice import SimulatedDevice

MAX_BODY = 1 << 20
FRAME_TYPES: dict[str, type[Any]] = {
    "read": m.SessionServerRead,
    "write_prepare": m.SessionServerWritePrepare,
    "hello_ack": m.SessionServerHelloAck,
}


class ControlError(Exception):
    """A control request the stack cannot serve; answered with 400 and the message."""


@dataclass
class Stack:
    """The current backend (a fresh one per `reset`) and its devices by name."""

    backend: Backend | None = None
    tmp: tempfile.TemporaryDirectory[str] | None = None
    devices: dict[str, SimulatedDevice] = field(default_factory=dict)

    async def close(self) -> None:
        if self.backend is not None:
            await stop_backend(self.backend)
            self.backend = None
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None
        self.devices.clear()

    def running(self) -> Backend:
        if self.backend is None:
            raise ControlError("no backend: POST /reset first")
        return self.backend

    def device(self, body: dict[str, Any]) -> SimulatedDevice:
        name = body.get("name", "laptop-1")
        if name not in self.devices:
            raise ControlError(f"no device {name!r}: POST /device first")
        return self.devices[name]

    async def reset(self, body: dict[str, Any]) -> dict[str, Any]:
        await self.close()
        self.tmp = tempfile.TemporaryDirectory(prefix="understudy-ts-")
        self.backend = await start_backend(Path(self.tmp.name))
        return {"url": self.backend.url, "apiKey": self.backend.api_key()}

    async def add_device(self, body: dict[str, Any]) -> dict[str, Any]:
        backend = self.running()
        name = body.get("name", "laptop-1")
        behaviour = _behaviour(body.get("behaviour", {}))
        without = set(body.get("withoutCapabilities", []))
        if without:
            behaviour.capabilities = [c for c in ALL_CAPABILITIES if c not in without]
        device = await backend.device(device=name, behaviour=behaviour, connect=False)
        device.leases = LeaseArchive()
        self.devices[name] = device
        if body.get("connect", True):
            await device.connect()
        return {"name": name}

    async def behaviour(self, body: dict[str, Any]) -> dict[str, Any]:
        device = self.device(body)
        for key, value in body.get("set", {}).items():
            if key not in {f.name for f in fields(Behaviour)}:
                raise ControlError(f"Behaviour has no field {key!r}")
            setattr(device.behaviour, key, value)
        return {}

    async def advance(self, body: dict[str, Any]) -> dict[str, Any]:
        backend = self.running()
        await backend.clock.advance(float(body["seconds"]))
        await backend.settle()
        return {}

    async def granted(self, body: dict[str, Any]) -> dict[str, Any]:
        device = self.device(body)
        count = int(body.get("count", 1))
        await device.wait_for(lambda: sum(device.executions.values()) >= count, within=WITHIN)
        return {"commandId": list(device.executions)[-1]}

    async def release(self, body: dict[str, Any]) -> dict[str, Any]:
        device = self.device(body)
        command_id = body["commandId"]
        lease = next(
            (lease for lease in device.leases.values() if command_id in lease.journal_results),
            None,
        )
        if lease is None:
            raise ControlError(f"the device holds no result of {command_id}")
        await lease.session_socket.send(lease.journal_results[command_id].to_wire_json())
        await self.running().settle()
        return {}

    async def wait_frame(self, body: dict[str, Any]) -> dict[str, Any]:
        device = self.device(body)
        kind = FRAME_TYPES[body["frame"]]
        session_id = body["sessionId"]
        count = int(body.get("count", 1))

        def seen() -> bool:
            return len(self._frames(device, session_id, kind)) >= count

        await device.wait_for(seen, within=WITHIN)
        return {}

    async def provisioned(self, body: dict[str, Any]) -> dict[str, Any]:
        device = self.device(body)
        await device.wait_for(lambda: device.frames_of(m.DeviceServerProvision), within=WITHIN)
        return {}

    async def connect(self, body: dict[str, Any]) -> dict[str, Any]:
        await self.device(body).connect()
        return {}

    async def disconnect(self, body: dict[str, Any]) -> dict[str, Any]:
        await self.device(body).disconnect()
        return {}

    async def restart_extension(self, body: dict[str, Any]) -> dict[str, Any]:
        await self.device(body).restart_extension()
        return {}

    async def attach(self, body: dict[str, Any]) -> dict[str, Any]:
        result = await self.device(body).attach(body["sessionId"])
        return {"outcome": result.outcome}

    async def state(self, body: dict[str, Any]) -> dict[str, Any]:
        device = self.device(body)
        frames = []
        for frame in session_frames(device):
            command_id = getattr(frame, "command_id", None)
            frames.append(
                {"type": frame.type, "commandId": None if command_id is None else str(command_id)}
            )
        leases = device.leases
        ever = leases.ever if isinstance(leases, LeaseArchive) else list(leases.values())
        return {
            "executions": dict(device.executions),
            "frames": frames,
            "leases": [lease.session_id for lease in ever],
        }

    @staticmethod
    def _frames(device: SimulatedDevice, session_id: str, kind: type[Any]) -> list[Any]:
        return [
            frame
            for lease in list(device.leases.values())
            if lease.session_id == session_id
            for frame in lease.session_frames
            if isinstance(frame, kind)
        ]

    def routes(self) -> dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]]:
        return {
            "/reset": self.reset,
            "/device": self.add_device,
            "/behaviour": self.behaviour,
            "/advance": self.advance,
            "/granted": self.granted,
            "/release": self.release,
            "/wait-frame": self.wait_frame,
            "/wait-provision": self.provisioned,
            "/connect": self.connect,
            "/disconnect": self.disconnect,
            "/restart-extension": self.restart_extension,
            "/attach": self.attach,
            "/state": self.state,
        }


def _behaviour(values: dict[str, Any]) -> Behaviour:
    known = {f.name for f in fields(Behaviour)}
    unknown = set(values) - known
    if unknown:
        raise ControlError(f"Behaviour has no fields {sorted(unknown)}")
    return Behaviour(**values)


async def _serve_one(
    stack: Stack, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """One HTTP/1.1 request per connection: `POST <route>` with a JSON body, a JSON answer."""
    try:
        request_line = (await reader.readline()).decode("latin-1").split()
        headers: dict[str, str] = {}
        while (line := (await reader.readline()).decode("latin-1").strip()) != "":
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        if length > MAX_BODY:
            raise ControlError("body too large")
        raw = await reader.readexactly(length) if length else b""
        if len(request_line) < 2 or request_line[0] != "POST":
            raise ControlError("only POST is served")
        route = stack.routes().get(request_line[1])
        if route is None:
            raise ControlError(f"no route {request_line[1]}")
        status, answer = 200, await route(json.loads(raw) if raw else {})
    except ControlError as error:
        status, answer = 400, {"error": str(error)}
    except Exception as error:  # report to the test instead of dying: the next test needs us
        status, answer = 500, {"error": f"{type(error).__name__}: {error}"}
    payload = json.dumps(answer).encode()
    writer.write(
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
        + payload
    )
    try:
        await writer.drain()
    finally:
        writer.close()


async def main() -> None:
    # The test runner shows our stderr: keep it to warnings, not a line per simulated request.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    stack = Stack()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Requests are served concurrently: a test waits for a grant while it drives the connector.
        await _serve_one(stack, reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(json.dumps({"control": f"http://127.0.0.1:{port}"}), flush=True)
    loop = asyncio.get_running_loop()
    try:
        # Stop when the parent closes our standard input (or exits).
        await loop.run_in_executor(None, sys.stdin.read)
    finally:
        server.close()
        await server.wait_closed()
        await stack.close()


if __name__ == "__main__":
    asyncio.run(main())
