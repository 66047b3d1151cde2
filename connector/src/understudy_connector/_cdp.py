"""A minimal Chrome DevTools Protocol client: just enough to enroll the extension and look.

Nothing here attaches a browser-wide client (Playwright does, and then Chromium answers dialogs
and delays popup closing differently). Each call talks to one target over its own
`webSocketDebuggerUrl`, once, and closes the connection again, so nothing stays attached to the
browser between looks. Public through `understudy_connector.local_chromium`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any

import httpx
import websockets

_ids = itertools.count(1)


class CdpError(RuntimeError):
    """A DevTools call failed or the evaluated expression threw; the message says which."""


@dataclass(frozen=True)
class Target:
    """One row of `/json/list`."""

    id: str
    type: str
    url: str
    ws_url: str


class DevTools:
    """The DevTools HTTP endpoint of one running Chromium (`--remote-debugging-port`)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    async def targets(self) -> list[Target]:
        async with httpx.AsyncClient(timeout=5) as http:
            rows = (await http.get(f"{self.base}/json/list")).json()
        return [
            Target(row["id"], row["type"], row["url"], row.get("webSocketDebuggerUrl", ""))
            for row in rows
        ]

    async def pages(self) -> list[Target]:
        return [t for t in await self.targets() if t.type == "page"]

    async def open_page(self, url: str) -> Target:
        """Open a new tab on `url` (`/json/new`); nothing stays attached to it."""
        async with httpx.AsyncClient(timeout=5) as http:
            row = (await http.put(f"{self.base}/json/new?{url}")).json()
        return Target(row["id"], row["type"], row["url"], row["webSocketDebuggerUrl"])

    async def close_page(self, target_id: str) -> None:
        async with httpx.AsyncClient(timeout=5) as http:
            await http.get(f"{self.base}/json/close/{target_id}")


async def call(ws_url: str, method: str, params: dict[str, Any] | None = None) -> Any:
    """One DevTools call on one target; the connection is closed afterwards."""
    async with websockets.connect(ws_url, max_size=None, open_timeout=5) as ws:
        ident = next(_ids)
        await ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), timeout=15))
            if message.get("id") != ident:
                continue  # an event
            if "error" in message:
                raise CdpError(f"{method}: {message['error']}")
            return message["result"]


async def evaluate(ws_url: str, expression: str) -> Any:
    """Evaluate `expression` (awaiting a promise) on a target and return its JSON value."""
    result = await call(
        ws_url,
        "Runtime.evaluate",
        {"expression": expression, "awaitPromise": True, "returnByValue": True},
    )
    if "exceptionDetails" in result:
        details = result["exceptionDetails"]
        text = details.get("exception", {}).get("description") or details.get("text")
        raise CdpError(f"evaluate failed: {text}")
    return result["result"].get("value")
