"""The rows the store hands out, as frozen dataclasses (times are Unix seconds, UTC)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from synthetic_users._store._states import RunState, SessionState

if TYPE_CHECKING:
    from synthetic_users._store._db import Row


def rfc3339(ts: float) -> str:
    """Unix seconds as the spec's `Timestamp`: RFC 3339 in UTC, milliseconds, `Z`."""
    text = datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


@dataclass(frozen=True)
class NewRun:
    """What `Store.create_run` writes: the validated request with its personas resolved."""

    target_url: str
    task: str
    turn_budget: int
    model: str
    personas: list[dict[str, Any]]  # `Persona` snapshots, in the request's order
    request_hash: str  # SHA-256 of the canonical request, for idempotent replays
    credential_id: str | None = None


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    customer_id: str
    status: RunState
    target_url: str
    task: str
    turn_budget: int
    model: str
    credential_id: str | None
    cancel_requested: bool
    failure_reason: str | None
    created_at: float
    started_at: float | None
    ended_at: float | None

    @classmethod
    def from_row(cls, row: Row) -> RunRecord:
        return cls(
            run_id=row["run_id"],
            customer_id=row["customer_id"],
            status=RunState(row["status"]),
            target_url=row["target_url"],
            task=row["task"],
            turn_budget=row["turn_budget"],
            model=row["model"],
            credential_id=row["credential_id"],
            cancel_requested=bool(row["cancel_requested"]),
            failure_reason=row["failure_reason"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            ended_at=row["ended_at"],
        )


@dataclass(frozen=True)
class SessionRecord:
    session_id: str
    run_id: str
    position: int  # the persona's index in the run's request
    persona: dict[str, Any]  # the `Persona` snapshot the session runs
    status: SessionState
    generation: int
    turn: int  # the last turn recorded (0 before the first)
    understudy_session_id: str | None
    device_id: str | None
    failure_reason: str | None
    started_at: float | None
    ended_at: float | None
    inbox_address: str | None = None  # assigned by the inbox when the session first starts

    @property
    def persona_name(self) -> str:
        return str(self.persona["name"])

    @classmethod
    def from_row(cls, row: Row) -> SessionRecord:
        return cls(
            session_id=row["session_id"],
            run_id=row["run_id"],
            position=row["position"],
            persona=json.loads(row["persona"]),
            status=SessionState(row["status"]),
            generation=row["generation"],
            turn=row["turn"],
            understudy_session_id=row["understudy_session_id"],
            device_id=row["device_id"],
            failure_reason=row["failure_reason"],
            started_at=row["started_at"],
            ended_at=row["ended_at"],
            inbox_address=row["inbox_address"] if "inbox_address" in row.keys() else None,
        )


@dataclass(frozen=True)
class PersonaRecord:
    persona_id: str
    customer_id: str
    persona: dict[str, Any]  # the `Persona` fields (without `persona_id`)
    created_at: float


@dataclass(frozen=True)
class ReactionRecord:
    session_id: str
    run_id: str
    generation: int
    step: int
    sentiment: str
    note: str
    url: str
    ref: str | None
    screenshot: str | None
    created_at: float
    kind: str | None = None  # the spec's `ReactionKind`, when the persona named it
    element: str | None = None  # the element `ref` named, as the persona saw it

    def to_wire(self) -> dict[str, Any]:
        """The spec's `Reaction`."""
        wire: dict[str, Any] = {
            "step": self.step,
            "generation": self.generation,
            "sentiment": self.sentiment,
            "note": self.note,
            "url": self.url,
        }
        if self.ref is not None:
            wire["ref"] = self.ref
        if self.kind is not None:
            wire["kind"] = self.kind
        if self.element is not None:
            wire["element"] = self.element
        if self.screenshot is not None:
            wire["screenshot"] = self.screenshot
        wire["created_at"] = rfc3339(self.created_at)
        return wire

    @classmethod
    def from_row(cls, row: Row) -> ReactionRecord:
        return cls(
            session_id=row["session_id"],
            run_id=row["run_id"],
            generation=row["generation"],
            step=row["step"],
            sentiment=row["sentiment"],
            note=row["note"],
            url=row["url"],
            ref=row["ref"],
            screenshot=row["screenshot"],
            created_at=row["created_at"],
            kind=row["kind"],
            element=row["element"],
        )


@dataclass(frozen=True)
class SessionProgress:
    """Where one persona session is, for `GET /runs/{run_id}` and the orchestrator."""

    session_id: str
    persona_name: str
    status: SessionState
    turn: int
    generation: int
    reactions: int


@dataclass(frozen=True)
class ResumableRun:
    """A run that was `queued` or `running` when the service started, with all its sessions."""

    run: RunRecord
    sessions: list[SessionRecord]


@dataclass(frozen=True)
class Page:
    """One page of a listing, newest first; `next_cursor` is None on the last page."""

    items: list[Any]
    next_cursor: str | None
