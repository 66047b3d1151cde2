"""The report of one persona session (`report.json`), synthesized from its transcript."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from synthetic_users._reports._friction import friction_points

TERMINAL_STATUSES = ("completed", "failed", "cancelled")


class FinishLike(Protocol):
    """How the persona ended the session (the loop's `Finish`)."""

    @property
    def success(self) -> bool: ...

    @property
    def summary(self) -> str: ...


def parse_time(value: str) -> datetime:
    """An RFC 3339 timestamp as an aware datetime (UTC when it names no zone)."""
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def format_time(moment: datetime) -> str:
    """A datetime as the reports write it: RFC 3339 in UTC, `Z`, whole milliseconds at most."""
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    text = text.removesuffix("+00:00")
    return text.removesuffix(".000") + "Z"


def median(values: list[int]) -> float | None:
    """The median of `values` (None when empty), as a number JSON keeps exactly."""
    if not values:
        return None
    return float(statistics.median(values))


def _task_success(
    turns: list[dict[str, Any]],
    status: str,
    failure_reason: str | None,
    finish: FinishLike | Mapping[str, Any] | None,
) -> dict[str, Any]:
    if finish is None:
        # A finish the caller did not pass is still in the transcript when the persona called it.
        last = turns[-1]["action"] if turns else None
        if last is not None and last["name"] == "finish":
            finish = last["arguments"]
    if isinstance(finish, Mapping):
        return {"success": bool(finish["success"]), "summary": str(finish["summary"])}
    if finish is not None:
        return {"success": bool(finish.success), "summary": str(finish.summary)}
    if failure_reason:
        summary = f"The session ended before the persona finished: {failure_reason}"
    elif status == "cancelled":
        summary = "The run was cancelled before the persona finished."
    else:
        summary = "The persona did not finish the task."
    return {"success": False, "summary": summary[:4000]}


def _time_on_task(transcript: Mapping[str, Any], turns: list[dict[str, Any]]) -> float:
    if turns:
        start, end = turns[0]["started_at"], max(t["ended_at"] for t in turns)
    elif transcript.get("started_at") and transcript.get("ended_at"):
        start, end = transcript["started_at"], transcript["ended_at"]
    else:
        return 0.0
    seconds = (parse_time(end) - parse_time(start)).total_seconds()
    return round(max(seconds, 0.0), 1)


def _tokens(turns: list[dict[str, Any]]) -> dict[str, int]:
    total = {"input_tokens": 0, "output_tokens": 0}
    for turn in turns:
        usage = turn.get("usage") or {}
        total["input_tokens"] += int(usage.get("input_tokens", 0))
        total["output_tokens"] += int(usage.get("output_tokens", 0))
    return total


def ease_per_step(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Single Ease rating of every step that has one, in step order."""
    out = []
    for turn in turns:
        ease = turn["action"].get("arguments", {}).get("ease")
        if isinstance(ease, int) and not isinstance(ease, bool) and 1 <= ease <= 7:
            out.append(
                {
                    "step": turn["turn"],
                    "ease": ease,
                    "url": turn["observation"]["url"],
                    "action": turn["action"]["name"],
                }
            )
    return out


def synthesize_session(
    transcript: Mapping[str, Any],
    *,
    status: str,
    failure_reason: str | None = None,
    finish: FinishLike | Mapping[str, Any] | None = None,
    generated_at: datetime | None = None,
) -> dict[str, Any]:
    """The `report.json` object of a persona session.

    Args:
        transcript: The session's transcript (`transcript.json`), possibly partial (a cancelled
            or failed session keeps the turns it took).
        status: How the session ended: `completed`, `failed` or `cancelled`.
        failure_reason: Why it failed or stopped early; kept in the report unless it completed.
        finish: The persona's `finish` (`success`, `summary`), as the loop returned it or a
            mapping; when absent, a `finish` action on the last turn counts.
        generated_at: When the report is made (now when absent).

    Returns:
        A dict shaped like `report.json`, with its lists in step order.

    Raises:
        ValueError: `status` is not a terminal session status.
    """
    if status not in TERMINAL_STATUSES:
        raise ValueError(f"a report needs a terminal session status, not {status!r}")
    turns = sorted(transcript.get("turns", []), key=lambda t: (t["turn"], t["generation"]))
    reactions = sorted(
        (dict(r) for t in turns for r in t.get("reactions", [])),
        key=lambda r: (r["step"], r["generation"], r["created_at"]),
    )
    generations = max(
        [int(transcript.get("generations", 1)), *(int(t["generation"]) for t in turns)]
    )
    report: dict[str, Any] = {
        "run_id": transcript["run_id"],
        "session_id": transcript["session_id"],
        "persona": dict(transcript["persona"]),
        "model": transcript["model"],
        "task": transcript["task"],
        "target_url": transcript["target_url"],
        "status": status,
        "task_success": _task_success(turns, status, failure_reason, finish),
        "time_on_task_seconds": _time_on_task(transcript, turns),
        "turns": len(turns),
        "generations": generations,
        "tokens": _tokens(turns),
        "ease_per_step": ease_per_step(turns),
        "reactions": reactions,
        "friction_points": friction_points(turns),
        "generated_at": format_time(generated_at or datetime.now(UTC)),
    }
    if failure_reason and status != "completed":
        report["failure_reason"] = failure_reason[:2000]
    return report
