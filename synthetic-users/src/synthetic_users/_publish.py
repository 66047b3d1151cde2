"""Reports land when work ends: a persona session's files when it ends, the aggregate last.

The transcript is rebuilt from the store (every turn of every generation, as persisted), the
report synthesised from it, and both written under the session's artifact prefix; the run's
aggregate is synthesised from the session reports of the run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from synthetic_users._artifacts import ArtifactNotFound, session_prefix
from synthetic_users._reports import (
    synthesize_aggregate,
    synthesize_session,
    write_aggregate_artifacts,
    write_session_artifacts,
)
from synthetic_users._store import rfc3339

if TYPE_CHECKING:
    from synthetic_users._artifacts import ArtifactStore
    from synthetic_users._store import Store


class Publisher:
    """Writes a session's transcript and reports, and a run's aggregate, to the artifacts."""

    def __init__(self, store: Store, artifacts: ArtifactStore) -> None:
        self._store = store
        self._artifacts = artifacts

    def transcript(self, session_id: str, model_label: str) -> dict[str, Any]:
        """The session's `transcript.json` as the store holds it now."""
        session = self._store.get_session(session_id)
        run = self._store.get_run(session.run_id)
        turns = self._store.turns(session_id)
        transcript: dict[str, Any] = {
            "run_id": run.run_id,
            "session_id": session_id,
            "persona": session.persona,
            "model": model_label,
            "task": run.task,
            "target_url": run.target_url,
            "generations": max([session.generation, *(t["generation"] for t in turns)]),
            "turns": turns,
        }
        if session.started_at is not None:
            transcript["started_at"] = rfc3339(session.started_at)
        if session.ended_at is not None:
            transcript["ended_at"] = rfc3339(session.ended_at)
        return transcript

    def session_ended(self, run_id: str, session_id: str, model_label: str) -> None:
        session = self._store.get_session(session_id)
        run = self._store.get_run(run_id)
        transcript = self.transcript(session_id, model_label)
        report = synthesize_session(
            transcript, status=session.status.value, failure_reason=session.failure_reason
        )
        write_session_artifacts(
            self._artifacts, run.customer_id, run_id, session_id, transcript, report
        )

    def run_ended(self, run_id: str) -> None:
        run = self._store.get_run(run_id)
        sessions = self._store.sessions(run_id)
        reports = []
        for session in sessions:
            key = f"{session_prefix(run.customer_id, run_id, session.session_id)}/report.json"
            try:
                reports.append(json.loads(self._artifacts.get(key)))
            except ArtifactNotFound:
                continue  # cancelled before it started: nothing to report
        aggregate = synthesize_aggregate(
            {
                "run_id": run_id,
                "task": run.task,
                "target_url": run.target_url,
                "status": run.status.value,
                "sessions": [s.session_id for s in sessions],
            },
            reports,
        )
        write_aggregate_artifacts(self._artifacts, run.customer_id, run_id, aggregate)
