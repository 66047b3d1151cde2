"""Test doubles for the persona loop: an Understudy session over a scripted set of pages."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Any

from understudy_connector import (
    CommandFailed,
    CommandOutcomeUnknown,
    ProblemError,
    SessionTerminal,
)
from understudy_connector.generated.models import (
    CommandOutcome,
    Problem,
    ScreenshotResult,
    SnapshotResult,
    WriteResult,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()


def snapshot(
    url: str, title: str, nodes: list[dict[str, Any]], generation: int = 1
) -> SnapshotResult:
    return SnapshotResult.model_validate(
        {
            "name": "snapshot",
            "url": url,
            "title": title,
            "generation": generation,
            "truncated": False,
            "nodes": [{"depth": 1, **n} for n in nodes],
        }
    )


def failed(name: str, code: str, message: str) -> CommandFailed:
    return CommandFailed(
        CommandOutcome.model_validate(
            {
                "commandId": str(uuid.uuid4()),
                "name": name,
                "status": "failed",
                "dryRun": False,
                "error": {"code": code, "message": message},
                "completedAt": "2026-12-01T12:00:00Z",
            }
        )
    )


def problem(cls: type[ProblemError], status: int, code: str) -> ProblemError:
    return cls(
        Problem.model_validate(
            {
                "type": f"https://understudy.dev/problems/{code}",
                "title": code,
                "status": status,
                "code": code,
            }
        )
    )


@dataclass
class FakeSession:
    """Pages by URL; `click` on a ref follows `links[ref]`; `fail[name]` raises once."""

    pages: dict[str, SnapshotResult]
    links: dict[str, str] = field(default_factory=dict)
    url: str = "about:blank"
    calls: list[tuple[str, Any]] = field(default_factory=list)
    fail: dict[str, Exception] = field(default_factory=dict)
    screenshots: int = 0
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    closed: bool = False
    closed_waiting: bool | None = None

    def _raise(self, name: str) -> None:
        exc = self.fail.pop(name, None)
        if exc is not None:
            raise exc

    def _result(self, name: str) -> WriteResult:
        page = self.pages.get(self.url)
        return WriteResult.model_validate(
            {"name": name, "url": self.url, "title": page.title if page else "", "generation": 1}
        )

    async def open(self) -> FakeSession:
        return self

    async def close(self, *, wait: bool = False, wait_timeout: float | None = None) -> None:
        self.closed = True
        self.closed_waiting = wait

    async def snapshot(self, **_: Any) -> SnapshotResult:
        self._raise("snapshot")
        return self.pages[self.url]

    async def navigate(self, url: str) -> WriteResult:
        self.calls.append(("navigate", url))
        self._raise("navigate")
        self.url = url
        return self._result("navigate")

    async def click(self, ref: str) -> WriteResult:
        self.calls.append(("click", ref))
        self._raise("click")
        self.url = self.links.get(ref, self.url)
        return self._result("click")

    async def fill(self, ref: str, value: str) -> WriteResult:
        self.calls.append(("fill", (ref, value)))
        self._raise("fill")
        return self._result("fill")

    async def fill_secret(self, ref: str, secret_ref: str) -> WriteResult:
        """Records the reference only: resolving it is Understudy's business."""
        self.calls.append(("fill_secret", (ref, secret_ref)))
        self._raise("fill_secret")
        return self._result("fill_secret")

    async def type(self, ref: str, text: str, *, submit: bool = False) -> WriteResult:
        self.calls.append(("type", (ref, text, submit)))
        return self._result("type")

    async def select_option(self, ref: str, values: list[str]) -> WriteResult:
        self.calls.append(("select_option", (ref, values)))
        return self._result("select_option")

    async def press_key(self, key: str) -> WriteResult:
        self.calls.append(("press_key", key))
        return self._result("press_key")

    async def scroll(self, *, ref: str | None = None, delta_y: int = 0) -> WriteResult:
        self.calls.append(("scroll", (ref, delta_y)))
        return self._result("scroll")

    async def screenshot(self, **_: Any) -> ScreenshotResult:
        self._raise("screenshot")
        self.screenshots += 1
        return ScreenshotResult.model_validate(
            {"name": "screenshot", "mimeType": "image/png", "data": PNG, "width": 10, "height": 10}
        )


@dataclass
class MemoryRecorder:
    turns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    reactions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    shots: dict[tuple[str, str], bytes] = field(default_factory=dict)

    def record_turn(self, session_id: str, turn: dict[str, Any]) -> bool:
        rows = self.turns.setdefault(session_id, [])
        if any(t["turn"] == turn["turn"] for t in rows):
            return False
        rows.append(turn)
        self.reactions.setdefault(session_id, []).extend(turn["reactions"])
        return True

    def is_cancelled(self, run_id: str) -> bool:
        return run_id in self.cancelled

    def save(self, session_id: str, name: str, png: bytes) -> None:
        self.shots[(session_id, name)] = png


__all__ = [
    "PNG",
    "CommandOutcomeUnknown",
    "FakeSession",
    "MemoryRecorder",
    "SessionTerminal",
    "failed",
    "problem",
    "snapshot",
]
