"""A run's aggregate: success rate, median ease, and issues ranked by how many personas met them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from synthetic_users._reports import synthesize_aggregate, synthesize_session
from synthetic_users.generated.models import Aggregate
from tests.synthetic_users.reports._build import (
    RUN_ID,
    SITE,
    react,
    schema_errors,
    session_id,
    transcript,
    turn,
)

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
RUN = {"run_id": RUN_ID, "task": "Buy a kettle", "target_url": SITE + "/", "status": "completed"}


def session(
    n: int, name: str, turns: list[dict[str, Any]], *, success: bool = True
) -> dict[str, Any]:
    finish = {"success": success, "summary": f"{name} {'did' if success else 'gave up'}."}
    return synthesize_session(
        transcript(turns, sid=n, name=name), status="completed", finish=finish, generated_at=NOW
    )


def aggregate_of(reports: list[dict[str, Any]], run: dict[str, Any] | None = None) -> Any:
    value = synthesize_aggregate(run or RUN, reports, generated_at=NOW)
    assert schema_errors("Aggregate", value) == []
    Aggregate.model_validate(value)
    return value


def unlabeled(step: int) -> dict[str, Any]:
    return react(step, "confused", "This field has no label.", path="/checkout")


def dead_link(step: int) -> list[dict[str, Any]]:
    return [
        turn(step, "click", path="/product", result="clicked link 'Delivery info'"),
        turn(step + 1, "scroll", path="/delivery", title="404 Not Found"),
    ]


def test_success_rate_and_median_ease_across_personas() -> None:
    reports = [
        session(1, "Margaret", [turn(1, ease=2), turn(2, ease=3)], success=False),
        session(2, "Dev", [turn(1, ease=6), turn(2, ease=7), turn(3, ease=5)]),
        session(3, "Ana", [turn(1, ease=4)]),
    ]
    aggregate = aggregate_of(reports)
    assert aggregate["task_success_rate"] == 0.6667
    assert aggregate["median_ease"] == 4.5  # of 2, 3, 4, 5, 6, 7
    assert [p["success"] for p in aggregate["personas"]] == [False, True, True]
    assert [p["median_ease"] for p in aggregate["personas"]] == [2.5, 6.0, 4.0]
    assert aggregate["generated_at"] == "2026-12-01T10:00:00Z"


def test_each_persona_outcome_carries_its_numbers() -> None:
    turns = [turn(1, usage=(100, 5)), unlabeled(2), turn(3, "finish")]
    (outcome,) = aggregate_of([session(1, "Margaret", turns)])["personas"]
    assert outcome == {
        "session_id": session_id(1),
        "persona_name": "Margaret",
        "model": "heuristic-persona v1 (seed 7)",
        "status": "completed",
        "success": True,
        "summary": "Margaret did.",
        "turns": 3,
        "time_on_task_seconds": 22.0,
        "median_ease": 6.0,
        "reactions": 1,
        "tokens": {"input_tokens": 100, "output_tokens": 5},
    }


def test_personas_follow_the_run_order() -> None:
    reports = [session(2, "Dev", [turn(1)]), session(1, "Margaret", [turn(1)])]
    run = {**RUN, "sessions": [session_id(1), {"session_id": session_id(2)}]}
    names = [p["persona_name"] for p in aggregate_of(reports, run)["personas"]]
    assert names == ["Margaret", "Dev"]


def test_without_rated_steps_there_is_no_median_ease() -> None:
    aggregate = aggregate_of([session(1, "Margaret", [])])
    assert "median_ease" not in aggregate
    assert "median_ease" not in aggregate["personas"][0]
    empty = aggregate_of([])
    assert empty["task_success_rate"] == 0.0
    assert empty["personas"] == []
    assert empty["issues"] == []


def test_issues_are_ranked_by_personas_then_occurrences() -> None:
    reports = [
        # Margaret meets the unlabeled field twice and the dead link once.
        session(
            1, "Margaret", [unlabeled(1), turn(2, path="/checkout"), unlabeled(3), *dead_link(4)]
        ),
        # Dev meets the dead link only; Ana the dead link and a slow step.
        session(2, "Dev", dead_link(1)),
        session(3, "Ana", [*dead_link(1), turn(3, "click", path="/", elapsed_ms=3000.0)]),
    ]
    issues = aggregate_of(reports)["issues"]
    assert [(i["kind"], i["count"], len(i["occurrences"])) for i in issues] == [
        ("dead_link", 3, 3),
        ("unlabeled_control", 1, 2),
        ("slow_load", 1, 1),
    ]
    dead = issues[0]
    assert dead["personas"] == ["Margaret", "Dev", "Ana"]
    assert dead["title"] == "A link leads to an error page (/delivery)"
    assert [(o["session_id"], o["step"]) for o in dead["occurrences"]] == [
        (session_id(1), 5),
        (session_id(2), 2),
        (session_id(3), 2),
    ]


def test_occurrences_link_each_step_to_its_screenshot() -> None:
    reports = [
        session(1, "Margaret", [unlabeled(1), turn(2, path="/checkout"), unlabeled(3)]),
        session(2, "Dev", [turn(1), unlabeled(2)]),
    ]
    (issue,) = aggregate_of(reports)["issues"]
    assert issue["occurrences"] == [
        {
            "session_id": session_id(1),
            "persona_name": "Margaret",
            "step": 1,
            "screenshot": "step-001.png",
        },
        {
            "session_id": session_id(1),
            "persona_name": "Margaret",
            "step": 3,
            "screenshot": "step-003.png",
        },
        {
            "session_id": session_id(2),
            "persona_name": "Dev",
            "step": 2,
            "screenshot": "step-002.png",
        },
    ]


def test_an_occurrence_without_a_screenshot_has_none() -> None:
    reports = [session(1, "Margaret", [turn(1, "click", path="/", elapsed_ms=2500.0)])]
    (issue,) = aggregate_of(reports)["issues"]
    assert issue["occurrences"] == [
        {"session_id": session_id(1), "persona_name": "Margaret", "step": 1}
    ]


def test_the_same_kind_on_different_pages_is_different_issues() -> None:
    reports = [
        session(1, "Margaret", [react(1, "confused", "No label.", path="/checkout")]),
        session(2, "Dev", [react(1, "confused", "No label.", path="/account")]),
    ]
    titles = [i["title"] for i in aggregate_of(reports)["issues"]]
    assert sorted(titles) == [
        "A control without a label on /account",
        "A control without a label on /checkout",
    ]


def test_the_ranking_does_not_depend_on_the_order_of_the_reports() -> None:
    reports = [
        session(1, "Margaret", [unlabeled(1)]),
        session(2, "Dev", [turn(1, "click", path="/", elapsed_ms=3000.0)]),
    ]
    forward = aggregate_of(reports)["issues"]
    backward = aggregate_of(list(reversed(reports)))["issues"]
    assert [i["kind"] for i in forward] == [i["kind"] for i in backward]


def test_one_persona_s_dead_link_and_another_s_error_page_are_one_issue() -> None:
    reports = [
        session(1, "Margaret", dead_link(1)),
        session(2, "Dev", [react(1, "angry", "Error page: nothing here.", path="/delivery")]),
    ]
    (issue,) = aggregate_of(reports)["issues"]
    assert issue["kind"] == "dead_link"
    assert issue["personas"] == ["Margaret", "Dev"]
    assert issue["title"] == "A link leads to an error page (/delivery)"
