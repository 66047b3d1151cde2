"""The HTTP command API as an agent uses it, and readers for snapshot results."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

COMMAND_HTTP_TIMEOUT_S = 30  # the backend may hold a command request for 20 s


@dataclass
class Agent:
    """Submits commands over one API client; keeps the body of every answer it received."""

    http: httpx.AsyncClient
    transcript: list[str] = field(default_factory=list)

    async def submit(
        self,
        session_id: str,
        command: dict[str, Any],
        *,
        dry_run: bool = False,
        retry_for_s: float = 5,
    ) -> httpx.Response:
        """Submit one command as the spec tells a client to, until its outcome is durable.

        `202`: poll `Location`. `503 session_unavailable` (the tab's socket is not up yet, or is
        reconnecting) and `504` with `retry_same_command` (nothing ran): resubmit the same id
        and body, for at most `retry_for_s`, sooner than `Retry-After` asks to keep tests short.
        """
        body: dict[str, Any] = {"commandId": str(uuid.uuid4()), "command": command}
        if dry_run:
            body["dryRun"] = True
        give_up = time.monotonic() + retry_for_s
        while True:
            response = await self.http.post(
                f"/v1/sessions/{session_id}/commands", json=body, timeout=COMMAND_HTTP_TIMEOUT_S
            )
            self.transcript.append(response.text)
            polls_until = time.monotonic() + COMMAND_HTTP_TIMEOUT_S
            while response.status_code == 202 and time.monotonic() < polls_until:
                await asyncio.sleep(float(response.headers.get("retry-after", "1")))
                response = await self.http.get(response.headers["location"])
                self.transcript.append(response.text)
            retry = response.status_code == 503 or (
                response.status_code == 504
                and response.json()["retryPolicy"] == "retry_same_command"
            )
            if not retry or time.monotonic() > give_up:
                return response
            await asyncio.sleep(0.2)

    async def run(
        self, session_id: str, command: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """A command that must succeed; returns its result."""
        response = await self.submit(session_id, command, dry_run=dry_run)
        assert response.status_code == 200, f"{command['name']}: {response.text}"
        outcome = response.json()
        assert outcome["status"] == "succeeded", outcome
        result: dict[str, Any] = outcome["result"]
        assert result["name"] == command["name"]
        return result

    async def failure(self, session_id: str, command: dict[str, Any]) -> dict[str, Any]:
        """A command that must end as a durable failure; returns its error."""
        response = await self.submit(session_id, command)
        assert response.status_code == 200, f"{command['name']}: {response.text}"
        outcome = response.json()
        assert outcome["status"] == "failed", outcome
        error: dict[str, Any] = outcome["error"]
        return error

    async def snapshot(self, session_id: str) -> dict[str, Any]:
        return await self.run(session_id, {"name": "snapshot"})

    async def wait_text(self, session_id: str, text: str) -> None:
        """`wait_for` a text to appear; it must."""
        result = await self.run(
            session_id, {"name": "wait_for", "condition": {"kind": "text_appears", "text": text}}
        )
        assert result["matched"] is True, f"{text!r} did not appear"

    async def open_page(self, session_id: str, url: str) -> dict[str, Any]:
        """Navigate, then snapshot the loaded page."""
        navigated = await self.run(session_id, {"name": "navigate", "url": url})
        assert navigated["url"] == url, navigated
        return await self.snapshot(session_id)


def ref(snap: dict[str, Any], role: str, name: str) -> str:
    """The ref of the one node with this role and accessible name."""
    return str(node(snap, role, name)["ref"])


def node(snap: dict[str, Any], role: str, name: str) -> dict[str, Any]:
    """The one node with this role and accessible name."""
    found: list[dict[str, Any]] = [
        n for n in snap["nodes"] if n["role"] == role and n["name"] == name
    ]
    assert len(found) == 1, f"{role} {name!r} in {[(n['role'], n['name']) for n in snap['nodes']]}"
    return found[0]


def shows(snap: dict[str, Any], text: str) -> bool:
    """Whether any node's accessible name contains `text`."""
    return any(text in n["name"] for n in snap["nodes"])
