"""The aggregate report of a run (`report.json` under the run), from its sessions' reports.

Issues are the sessions' friction points grouped by the same key as within a session — kind
(`error_page` and `dead_link` as one) and URL path — so "a control without a label on
/checkout" met by three personas is one issue with three personas. They are ranked by how many
personas met them, then by how many times they happened, then by kind and page so the order
never depends on the input's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from synthetic_users._reports._friction import group_key, merged_kind, title_for
from synthetic_users._reports._session import format_time, median


def _ordered(run: Mapping[str, Any], reports: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The reports in the run's session order (`run["sessions"]`), else as given."""
    order = run.get("sessions")
    if not order:
        return list(reports)
    ids = [s["session_id"] if isinstance(s, Mapping) else str(s) for s in order]
    rank = {sid: i for i, sid in enumerate(ids)}
    return sorted(reports, key=lambda r: rank.get(r["session_id"], len(rank)))


def _outcome(report: Mapping[str, Any]) -> dict[str, Any]:
    outcome: dict[str, Any] = {
        "session_id": report["session_id"],
        "persona_name": report["persona"]["name"],
        "model": report["model"],
        "status": report["status"],
        "success": report["task_success"]["success"],
        "summary": report["task_success"]["summary"],
        "turns": report["turns"],
        "time_on_task_seconds": report["time_on_task_seconds"],
        "reactions": len(report["reactions"]),
        "tokens": dict(report["tokens"]),
    }
    ease = median([s["ease"] for s in report["ease_per_step"]])
    if ease is not None:
        outcome["median_ease"] = ease
    return outcome


def _occurrences(report: Mapping[str, Any], point: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One occurrence per step of a friction point, with that step's screenshot if it has one."""
    shots = set(point["screenshots"])
    by_step = {
        r["step"]: r["screenshot"]
        for r in reversed(report["reactions"])
        if r.get("screenshot") in shots
    }
    out = []
    for step in point["steps"]:
        occurrence: dict[str, Any] = {
            "session_id": report["session_id"],
            "persona_name": report["persona"]["name"],
            "step": step,
        }
        if step in by_step:
            occurrence["screenshot"] = by_step[step]
        out.append(occurrence)
    return out


def issues(reports: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The run's issues, most personas first, then most occurrences."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for report in reports:
        for point in report["friction_points"]:
            url = point.get("url") or report["target_url"]
            group = groups.setdefault(
                group_key(point["kind"], url),
                {"url": url, "kinds": [], "sessions": [], "names": [], "occurrences": []},
            )
            group["kinds"].append(point["kind"])
            if report["session_id"] not in group["sessions"]:
                group["sessions"].append(report["session_id"])
                group["names"].append(report["persona"]["name"])
            seen = {(o["session_id"], o["step"]) for o in group["occurrences"]}
            group["occurrences"] += [
                o for o in _occurrences(report, point) if (o["session_id"], o["step"]) not in seen
            ]
    ranked = sorted(
        groups.items(),
        key=lambda item: (-len(item[1]["sessions"]), -len(item[1]["occurrences"]), item[0]),
    )
    out = []
    for _key, group in ranked:
        kind = merged_kind(group["kinds"])
        out.append(
            {
                "kind": kind,
                "title": title_for(kind, group["url"]),
                "personas": group["names"],
                "count": len(group["sessions"]),
                "occurrences": group["occurrences"],
            }
        )
    return out


def synthesize_aggregate(
    run: Mapping[str, Any],
    session_reports: Sequence[Mapping[str, Any]],
    *,
    generated_at: datetime | None = None,
) -> dict[str, Any]:
    """The `aggregate.json` object of a run.

    Args:
        run: The run: `run_id`, `task`, `target_url`, `status`, and optionally `sessions` (its
            session ids, or objects with `session_id`, in the run's order).
        session_reports: The `report.json` of each persona session that has one.
        generated_at: When the report is made (now when absent).

    Returns:
        A dict shaped like `aggregate.json`.
    """
    reports = _ordered(run, session_reports)
    aggregate: dict[str, Any] = {
        "run_id": run["run_id"],
        "task": run["task"],
        "target_url": run["target_url"],
        "status": run["status"],
        "personas": [_outcome(r) for r in reports],
        "task_success_rate": (
            round(sum(1 for r in reports if r["task_success"]["success"]) / len(reports), 4)
            if reports
            else 0.0
        ),
        "issues": issues(reports),
        "generated_at": format_time(generated_at or datetime.now(UTC)),
    }
    ease = median([s["ease"] for r in reports for s in r["ease_per_step"]])
    if ease is not None:
        aggregate["median_ease"] = ease
    return aggregate
