"""What the live view of a run shows, read from the store and the artifact store."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from synthetic_users._artifacts import ArtifactNotFound, run_prefix, session_prefix

if TYPE_CHECKING:
    from synthetic_users._api._routes import ApiState
    from synthetic_users._store import ReactionRecord, RunRecord, SessionRecord

REPORT_JSON = "report.json"
SCREENSHOTS = "screenshots/"


@dataclass
class SessionLive:
    """One persona's progress: turn, generation, last screenshot, reactions so far."""

    session: SessionRecord
    reactions: list[ReactionRecord] = field(default_factory=list)
    screenshots: list[str] = field(default_factory=list)
    has_report: bool = False

    @property
    def last_screenshot(self) -> str | None:
        return self.screenshots[-1] if self.screenshots else None

    @property
    def last_screenshot_alt(self) -> str:
        name = self.last_screenshot
        for reaction in reversed(self.reactions):
            if reaction.screenshot == name:
                return f"{self.session.persona_name} at step {reaction.step}: {reaction.note}"
        return f"The page {self.session.persona_name} saw last"

    @property
    def restarts(self) -> int:
        """Browser generations after the first: each one a crash (or a service restart)."""
        return max(self.session.generation - 1, 0)


@dataclass
class RunLive:
    run: RunRecord
    sessions: list[SessionLive]
    has_report: bool

    @property
    def done(self) -> bool:
        return self.run.status.terminal

    @property
    def turns_done(self) -> int:
        return sum(s.session.turn for s in self.sessions)


def run_live(state: ApiState, run: RunRecord) -> RunLive:
    by_session: dict[str, list[ReactionRecord]] = {}
    for reaction in state.store.reactions(run_id=run.run_id):
        by_session.setdefault(reaction.session_id, []).append(reaction)
    sessions = []
    for session in state.store.sessions(run.run_id):
        prefix = session_prefix(run.customer_id, run.run_id, session.session_id) + "/"
        names = [key.removeprefix(prefix) for key in state.artifacts.list(prefix.rstrip("/"))]
        sessions.append(
            SessionLive(
                session,
                by_session.get(session.session_id, []),
                sorted(n.removeprefix(SCREENSHOTS) for n in names if n.startswith(SCREENSHOTS)),
                REPORT_JSON in names,
            )
        )
    return RunLive(run, sessions, aggregate(state, run) is not None)


def aggregate(state: ApiState, run: RunRecord) -> dict[str, Any] | None:
    """The run's aggregate `report.json`, None until the run ended and it was written."""
    try:
        data = state.artifacts.get(f"{run_prefix(run.customer_id, run.run_id)}/{REPORT_JSON}")
    except ArtifactNotFound:
        return None
    value: dict[str, Any] = json.loads(data)
    return value
