"""A minimal keep-alive HTTP/1.1 client on asyncio streams, for load generation.

The load generator shares two cores with the server it measures, so it must cost as little CPU per
request as possible: this client writes one request, reads the status line, the headers and a
``Content-Length`` (or chunked) body, and keeps the connection open. Nothing else (no redirects,
no TLS, no pooling beyond one connection per object).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any


class HttpError(Exception):
    """The server sent something this client does not understand, or closed the connection."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class HttpConnection:
    """One keep-alive connection to ``host:port``; one request at a time.

    Args:
        host: Server address.
        port: Server port.
        headers: Headers sent with every request (e.g. ``Authorization``).
    """

    def __init__(self, host: str, port: int, headers: dict[str, str] | None = None) -> None:
        self.host = host
        self.port = port
        fixed = {"Host": f"{host}:{port}", **(headers or {})}
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """Send one request and read its whole reply; reconnects once if the socket was closed."""
        for attempt in (1, 2):
            if self._writer is None:
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
            try:
                return await self._exchange(method, path, body, headers)
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _exchange(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str] | None
    ) -> Reply:
        assert self._reader is not None and self._writer is not None  # noqa: S101 - connected
        head = f"{method} {path} HTTP/1.1\r\n{self._fixed}"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self._writer.write(head.encode("latin-1") + b"\r\n" + (body or b""))
        await self._writer.drain()
        raw = await self._reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise HttpError(f"not an HTTP/1.x status line: {lines[0]!r}")
        reply_headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                reply_headers[name.strip().lower()] = value.strip()
        if "content-length" in reply_headers:
            content = await self._reader.readexactly(int(reply_headers["content-length"]))
        elif reply_headers.get("transfer-encoding", "").lower() == "chunked":
            content = await self._chunked()
        else:
            raise HttpError("a reply without Content-Length or chunked encoding")
        if reply_headers.get("connection", "").lower() == "close":
            await self.close()
        return Reply(int(parts[1]), reply_headers, content)

    async def _chunked(self) -> bytes:
        assert self._reader is not None  # noqa: S101 - connected
        chunks: list[bytes] = []
        while True:
            size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self._reader.readuntil(b"\r\n")
                return b"".join(chunks)
            chunks.append(await self._reader.readexactly(size))
            await self._reader.readexactly(2)

    async def post_json(
        self, path: str, payload: Any, headers: dict[str, str] | None = None
    ) -> Reply:
        return await self.request("POST", path, json.dumps(payload).encode(), headers)

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass
