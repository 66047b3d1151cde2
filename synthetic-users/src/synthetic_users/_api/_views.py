"""Store records as the spec's response bodies, each checked by its generated model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from synthetic_users._store import rfc3339
from synthetic_users.generated import models

if TYPE_CHECKING:
    from synthetic_users._store import (
        PersonaRecord,
        ReactionRecord,
        RunRecord,
        SessionRecord,
    )


def run_path(run_id: str) -> str:
    return f"/runs/{run_id}"


def session_path(run_id: str, session_id: str) -> str:
    return f"/runs/{run_id}/sessions/{session_id}"


def run_links(run_id: str) -> dict[str, str]:
    base = run_path(run_id)
    return {
        "self": base,
        "report_json": f"{base}/report.json",
        "report_md": f"{base}/report.md",
        "report_html": f"{base}/report.html",
    }


def session_links(run_id: str, session_id: str) -> dict[str, str]:
    base = session_path(run_id, session_id)
    return {
        "self": base,
        "transcript": f"{base}/transcript.json.gz",
        "report_json": f"{base}/report.json",
        "report_md": f"{base}/report.md",
        "report_html": f"{base}/report.html",
        "screenshots": f"{base}/screenshots",
    }


def _times(record: Any, *names: str) -> dict[str, str]:
    return {n: rfc3339(getattr(record, n)) for n in names if getattr(record, n) is not None}


def session_summary(session: SessionRecord, reactions: list[ReactionRecord]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "session_id": session.session_id,
        "persona_name": session.persona_name,
        "status": session.status.value,
        "turn": session.turn,
        "generation": session.generation,
        "reactions": [r.to_wire() for r in reactions],
        **_times(session, "started_at", "ended_at"),
        "links": session_links(session.run_id, session.session_id),
    }
    if session.failure_reason:
        body["failure_reason"] = session.failure_reason
    if session.inbox_address:
        body["inbox_address"] = session.inbox_address
    return body


def run_view(
    run: RunRecord, sessions: list[SessionRecord], reactions: list[ReactionRecord]
) -> dict[str, Any]:
    """The spec's `Run`: the run, and each session's progress with its reactions so far."""
    by_session: dict[str, list[ReactionRecord]] = {}
    for reaction in reactions:
        by_session.setdefault(reaction.session_id, []).append(reaction)
    body: dict[str, Any] = {
        "run_id": run.run_id,
        "status": run.status.value,
        "target_url": run.target_url,
        "task": run.task,
        "turn_budget": run.turn_budget,
        "model": run.model,
        **({"credential_id": run.credential_id} if run.credential_id else {}),
        **_times(run, "created_at", "started_at", "ended_at"),
        **({"failure_reason": run.failure_reason} if run.failure_reason else {}),
        "sessions": [session_summary(s, by_session.get(s.session_id, [])) for s in sessions],
        "links": run_links(run.run_id),
    }
    return models.Run.model_validate(body).to_wire()


def run_summary(run: RunRecord, persona_count: int) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "status": run.status.value,
        "target_url": run.target_url,
        "task": run.task,
        "persona_count": persona_count,
        **_times(run, "created_at", "ended_at"),
    }


def run_list(items: list[tuple[RunRecord, int]], next_cursor: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"runs": [run_summary(run, count) for run, count in items]}
    if next_cursor:
        body["next_cursor"] = next_cursor
    return models.RunList.model_validate(body).to_wire()


def session_detail(
    session: SessionRecord, reactions: list[ReactionRecord], turns: list[dict[str, Any]]
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "session_id": session.session_id,
        "run_id": session.run_id,
        "persona": session.persona,
        "status": session.status.value,
        "turn": session.turn,
        "generation": session.generation,
        **({"failure_reason": session.failure_reason} if session.failure_reason else {}),
        **({"inbox_address": session.inbox_address} if session.inbox_address else {}),
        **_times(session, "started_at", "ended_at"),
        "reactions": [r.to_wire() for r in reactions],
        "turns": turns,
        "links": session_links(session.run_id, session.session_id),
    }
    return models.SessionDetail.model_validate(body).to_wire()


def saved_persona(record: PersonaRecord) -> dict[str, Any]:
    body = {
        "persona_id": record.persona_id,
        **record.persona,
        "created_at": rfc3339(record.created_at),
    }
    return models.SavedPersona.model_validate(body).to_wire()


def persona_list(records: list[PersonaRecord], next_cursor: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"personas": [saved_persona(r) for r in records]}
    if next_cursor:
        body["next_cursor"] = next_cursor
    return body
