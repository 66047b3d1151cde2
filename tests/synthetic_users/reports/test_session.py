"""A persona session's report from its transcript: outcome, numbers, reactions, friction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from codegen._bundle import load_synthetic_users
from synthetic_users._reports import synthesize_session
from synthetic_users.generated.models import Report, Transcript
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


@dataclass(frozen=True)
class Finish:
    success: bool
    summary: str


def report_of(turns: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
    source = transcript(turns, generations=kwargs.pop("generations", 1))
    assert schema_errors("Transcript", source) == []
    kwargs.setdefault("status", "completed")
    report = synthesize_session(source, generated_at=NOW, **kwargs)
    assert schema_errors("Report", report) == []
    Report.model_validate(report)
    return report


def kinds(report: dict[str, Any]) -> list[str]:
    return [p["kind"] for p in report["friction_points"]]


def test_a_finished_session_reports_the_persona_outcome_time_turns_and_ease() -> None:
    turns = [
        turn(1, "click", path="/", ease=6, usage=(1000, 40)),
        turn(2, "fill", path="/checkout", ease=4, usage=(1200, 30)),
        turn(3, "finish", path="/done", ease=5, usage=(1300, 20)),
    ]
    report = report_of(turns, finish=Finish(True, "Ordered the kettle."))

    assert report["run_id"] == RUN_ID
    assert report["session_id"] == session_id(1)
    assert report["persona"]["name"] == "Margaret"
    assert report["model"] == "heuristic-persona v1 (seed 7)"
    assert report["status"] == "completed"
    assert report["task_success"] == {"success": True, "summary": "Ordered the kettle."}
    assert "failure_reason" not in report
    # First turn starts at 0 s, the last (the third, 20 s in) ends 2 s later.
    assert report["time_on_task_seconds"] == 22.0
    assert report["turns"] == 3
    assert report["generations"] == 1
    assert report["tokens"] == {"input_tokens": 3500, "output_tokens": 90}
    assert report["ease_per_step"] == [
        {"step": 1, "ease": 6, "url": SITE + "/", "action": "click"},
        {"step": 2, "ease": 4, "url": SITE + "/checkout", "action": "fill"},
        {"step": 3, "ease": 5, "url": SITE + "/done", "action": "finish"},
    ]
    assert report["friction_points"] == []
    assert report["generated_at"] == "2026-12-01T10:00:00Z"


def test_the_finish_in_the_transcript_counts_when_none_is_passed() -> None:
    turns = [turn(1), turn(2, "finish", success=False, summary="No kettle under 40 euros.")]
    report = report_of(turns)
    assert report["task_success"] == {"success": False, "summary": "No kettle under 40 euros."}


def test_a_mapping_finish_is_accepted() -> None:
    report = report_of([turn(1)], finish={"success": True, "summary": "Done."})
    assert report["task_success"] == {"success": True, "summary": "Done."}


def test_a_failed_session_reports_its_reason_as_the_outcome() -> None:
    reason = "the model gave no valid action 3 times"
    report = report_of([turn(1), turn(2)], status="failed", failure_reason=reason)
    assert report["status"] == "failed"
    assert report["failure_reason"] == reason
    assert report["task_success"]["success"] is False
    assert reason in report["task_success"]["summary"]


def test_a_completed_session_does_not_repeat_its_finish_summary_as_a_failure() -> None:
    report = report_of(
        [turn(1, "finish")], failure_reason="Bought the kettle.", finish=Finish(True, "Bought")
    )
    assert "failure_reason" not in report


def test_a_session_cancelled_mid_way_keeps_its_partial_turns_and_reactions() -> None:
    turns = [turn(1), react(2, "frustrated", "Nothing happens when I press Pay.", path="/pay")]
    report = report_of(turns, status="cancelled", failure_reason="the run was cancelled")
    assert report["status"] == "cancelled"
    assert report["turns"] == 2
    assert report["task_success"]["success"] is False
    assert "cancelled" in report["task_success"]["summary"]
    assert [r["note"] for r in report["reactions"]] == ["Nothing happens when I press Pay."]
    assert report["time_on_task_seconds"] == 12.0


def test_a_cancelled_session_without_a_reason_still_says_it_was_cancelled() -> None:
    report = report_of([], status="cancelled")
    assert report["turns"] == 0
    assert report["time_on_task_seconds"] == 0.0
    assert report["task_success"] == {
        "success": False,
        "summary": "The run was cancelled before the persona finished.",
    }


def test_reactions_of_every_generation_are_kept_in_step_order() -> None:
    turns = [
        react(1, "confused", "Where is the basket?", generation=1),
        turn(2, generation=1),
        react(3, "satisfied", "Found it after the page came back.", generation=2),
        turn(4, "finish", generation=2),
    ]
    report = report_of(turns, generations=2)
    assert report["generations"] == 2
    assert [(r["step"], r["generation"]) for r in report["reactions"]] == [(1, 1), (3, 2)]


def test_generations_come_from_the_turns_when_the_transcript_undercounts() -> None:
    report = report_of([turn(1, generation=1), turn(2, generation=3)], generations=1)
    assert report["generations"] == 3


def test_turns_without_usage_add_no_tokens() -> None:
    report = report_of([turn(1, usage=(10, 2)), turn(2), turn(3, usage=(5, 1))])
    assert report["tokens"] == {"input_tokens": 15, "output_tokens": 3}


def test_a_report_needs_a_session_that_has_ended() -> None:
    with pytest.raises(ValueError, match="terminal"):
        synthesize_session(transcript([turn(1)]), status="running")


# --- friction points -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("note", "kind"),
    [
        ("The delivery link is a dead link.", "dead_link"),
        ("This page says 404, it doesn't exist.", "error_page"),
        ("It is so slow, still loading after ages.", "slow_load"),
        ("This field has no label; I don't know what to type.", "unlabeled_control"),
        ("The picture has no alt text at all.", "missing_alt_text"),
        ("It says my postcode is invalid.", "validation_message"),
        ("The page just says 'Error 17' and nothing else.", "confusing_error"),
        ("I am stuck and cannot see a way on.", "dead_end"),
        ("I don't like this colour.", "negative_reaction"),
    ],
)
def test_a_negative_reaction_is_classified_by_its_words(note: str, kind: str) -> None:
    report = report_of([react(1, "confused", note, path="/checkout")])
    assert kinds(report) == [kind]
    point = report["friction_points"][0]
    assert point["id"] == f"{kind}-1"
    assert point["url"] == SITE + "/checkout"
    assert point["steps"] == [1]
    assert point["screenshots"] == ["step-001.png"]
    assert note in point["detail"]


def test_positive_and_neutral_reactions_are_not_friction() -> None:
    turns = [
        react(1, "delighted", "Lovely pictures."),
        react(2, "neutral", "A list of kettles."),
        react(3, "satisfied", "That error message was clear."),
    ]
    assert kinds(report_of(turns)) == []


def test_a_kind_the_persona_stated_wins_over_the_words_and_the_sentiment() -> None:
    # The `react` action's `kind` argument labels the reaction itself.
    source = transcript([react(1, "neutral", "The field next to Name is empty.", path="/form")])
    source["turns"][0]["action"]["arguments"]["kind"] = "unlabeled_control"
    report = synthesize_session(source, status="completed", generated_at=NOW)
    assert schema_errors("Report", report) == []
    assert kinds(report) == ["unlabeled_control"]


def test_a_kind_on_the_reaction_itself_is_honoured() -> None:
    source = transcript([react(1, "frustrated", "This page is slow.", path="/pay")])
    source["turns"][0]["reactions"][0]["kind"] = "http_error"
    report = synthesize_session(source, status="completed", generated_at=NOW)
    assert kinds(report) == ["http_error"]


def test_a_malformed_stated_kind_falls_back_to_the_words() -> None:
    source = transcript([react(1, "frustrated", "This page is slow.", path="/pay")])
    source["turns"][0]["action"]["arguments"]["kind"] = "Not A Kind!"
    report = synthesize_session(source, status="completed", generated_at=NOW)
    assert kinds(report) == ["slow_load"]


def test_a_slow_step_is_a_slow_load_of_the_page_where_it_was_taken() -> None:
    turns = [
        turn(1, "click", path="/basket", elapsed_ms=3400.0, result="clicked button 'Checkout'"),
        turn(2, "fill", path="/checkout"),
    ]
    (point,) = report_of(turns)["friction_points"]
    assert point["kind"] == "slow_load"
    assert point["url"] == SITE + "/basket"
    assert point["steps"] == [1]
    assert point["title"] == "Slow to respond on /basket"
    assert "clicked button 'Checkout'" in point["detail"]
    assert "3.4 s" in point["detail"]


def test_one_slow_step_is_one_point_wherever_it_ends() -> None:
    # Submitting the shipping form is slow whether it goes on to payment or comes back with an
    # error; the persona complains on the page it lands on.
    pay = "clicked button 'Continue to payment'"
    turns = [
        turn(1, "click", path="/shipping", elapsed_ms=2600.0, result=pay),
        react(2, "frustrated", "Slow step: I waited 2.6 s.", path="/shipping"),
        turn(3, "click", path="/shipping", elapsed_ms=2500.0, result=pay),
        react(4, "neutral", "Slow step: I waited 2.5 s.", path="/payment"),
    ]
    (point,) = report_of(turns)["friction_points"]
    assert (point["kind"], point["url"]) == ("slow_load", SITE + "/shipping")
    assert point["steps"] == [1, 2, 3, 4]
    assert point["screenshots"] == ["step-002.png", "step-004.png"]


def test_a_step_at_the_threshold_is_not_slow_and_a_slow_reaction_step_is_ignored() -> None:
    turns = [turn(1, elapsed_ms=2000.0), turn(2, "react", elapsed_ms=9000.0, sentiment="neutral")]
    turns[1]["action"]["arguments"]["note"] = "ok"
    assert kinds(report_of(turns)) == []


def test_a_failed_action_is_friction_with_its_code() -> None:
    turns = [
        turn(
            1,
            "click",
            path="/checkout",
            ok=False,
            code="not_actionable",
            result="click failed: covered by another element",
        )
    ]
    (point,) = report_of(turns)["friction_points"]
    assert point["kind"] == "failed_action"
    assert "not_actionable" in point["detail"]
    assert point["title"] == "Actions that did not work on /checkout"


def test_a_malformed_model_call_is_not_the_site_s_friction() -> None:
    turns = [turn(1, ok=False, code="malformed_tool_call", result="not one valid action")]
    assert kinds(report_of(turns)) == []


def test_an_error_page_reached_by_a_link_is_a_dead_link() -> None:
    turns = [
        turn(1, "click", path="/product", result="clicked link 'Delivery info'"),
        turn(2, "scroll", path="/delivery", title="404 Not Found"),
        turn(3, "scroll", path="/delivery", title="404 Not Found"),
    ]
    (point,) = report_of(turns)["friction_points"]
    assert point["kind"] == "dead_link"
    assert point["url"] == SITE + "/delivery"
    assert point["steps"] == [2]  # staying on the page is one arrival, not three
    assert "clicked link 'Delivery info'" in point["detail"]


@pytest.mark.parametrize("title", ["Internal Server Error", "502 Bad Gateway", "Page not found"])
def test_an_error_page_reached_otherwise_is_an_error_page(title: str) -> None:
    turns = [turn(1, "navigate", path="/"), turn(2, "scroll", path="/orders", title=title)]
    assert kinds(report_of(turns)) == ["error_page"]


def test_coming_back_to_one_page_again_and_again_is_a_dead_end() -> None:
    paths = ["/", "/a", "/", "/b", "/", "/c"]
    (point,) = report_of([turn(i + 1, path=p) for i, p in enumerate(paths)])["friction_points"]
    assert point["kind"] == "dead_end"
    assert point["steps"] == [1, 3, 5]
    assert point["url"] == SITE + "/"


def test_coming_back_twice_is_not_yet_a_dead_end() -> None:
    paths = ["/", "/a", "/", "/b"]
    assert kinds(report_of([turn(i + 1, path=p) for i, p in enumerate(paths)])) == []


def test_landing_again_in_a_new_browser_generation_is_not_a_loop() -> None:
    turns = [
        turn(1, path="/", generation=1),
        turn(2, path="/a", generation=1),
        turn(3, path="/", generation=1),
        turn(4, path="/", generation=2),
        turn(5, path="/b", generation=2),
    ]
    assert kinds(report_of(turns, generations=2)) == []


def test_the_same_action_repeated_on_one_page_is_a_dead_end() -> None:
    turns = [
        turn(n, "click", path="/checkout", result="clicked button 'Continue'") for n in (1, 2, 3)
    ]
    turns.append(turn(4, "click", path="/checkout", result="clicked link 'Help'"))
    (point,) = report_of(turns)["friction_points"]
    assert point["kind"] == "dead_end"
    assert point["steps"] == [1, 2, 3]
    assert "clicked button 'Continue'" in point["detail"]


def test_filling_a_form_field_by_field_is_not_a_dead_end() -> None:
    turns = [
        turn(n, "fill", path="/checkout", result=f"filled textbox 'Field {n}'") for n in (1, 2, 3)
    ]
    assert kinds(report_of(turns)) == []


def test_signals_of_one_kind_on_one_page_are_one_friction_point() -> None:
    turns = [
        react(1, "confused", "No label on this box.", path="/checkout"),
        turn(2, "fill", path="/checkout/"),
        react(3, "frustrated", "Another field without a label.", path="/checkout?step=2"),
        react(4, "confused", "Unlabelled button here.", path="/account"),
    ]
    points = report_of(turns)["friction_points"]
    assert [(p["id"], p["steps"], p["screenshots"]) for p in points] == [
        ("unlabeled_control-1", [1, 3], ["step-001.png", "step-003.png"]),
        ("unlabeled_control-2", [4], ["step-004.png"]),
    ]
    assert points[0]["title"] == "A control without a label on /checkout"
    assert "No label on this box." in points[0]["detail"]
    assert "Another field without a label." in points[0]["detail"]


def test_a_slow_step_and_the_persona_s_complaint_about_it_are_one_point() -> None:
    turns = [
        turn(1, "click", path="/basket", elapsed_ms=4100.0),
        react(2, "frustrated", "That took forever to load.", path="/delivery"),
    ]
    (point,) = report_of(turns)["friction_points"]
    assert point["kind"] == "slow_load"
    assert point["steps"] == [1, 2]
    assert point["screenshots"] == ["step-002.png"]


def test_friction_points_come_in_order_of_their_first_step() -> None:
    turns = [
        turn(1, "click", path="/", result="clicked link 'Delivery info'"),
        turn(2, "navigate", path="/delivery", title="404 Not Found"),
        react(3, "confused", "There is no label here.", path="/"),
        turn(4, "click", path="/", elapsed_ms=5000.0),
        turn(5, "fill", path="/pay", ok=False, code="not_actionable"),
    ]
    report = report_of(turns)
    assert kinds(report) == ["dead_link", "unlabeled_control", "slow_load", "failed_action"]
    ids = [p["id"] for p in report["friction_points"]]
    assert len(set(ids)) == len(ids)


def test_the_same_transcript_gives_the_same_report() -> None:
    turns = [react(1, "confused", "No label.", path="/a"), turn(2, elapsed_ms=3000.0)]
    assert report_of(turns) == report_of(turns)


def test_the_generated_transcript_model_reads_the_built_transcripts() -> None:
    # Guards the test data itself: what these tests feed in is what the loop's store emits.
    Transcript.model_validate(transcript([turn(1), react(2, "angry", "Why?")]))


@pytest.mark.parametrize(
    ("note", "kind"),
    [
        # Notes that name their problem first, as the heuristic persona writes them.
        ("Slow step (/checkout): I waited 3.1 s for the page; it felt stuck.", "slow_load"),
        ("Error page (/delivery): I followed a link and got '404'.", "error_page"),
        ("Unlabeled field (Email): A box has no label, so I had to guess.", "unlabeled_control"),
        ("Image without alt text (hero.jpg): a screen reader says nothing.", "missing_alt_text"),
        (
            "Validation message (/pay): The page told me 'Card number is invalid'.",
            "validation_message",
        ),
        ("Confusing error (/pay): The page says 'E-17' but not what to fix.", "confusing_error"),
        ("Dead end (/basket): Nothing here gets me closer to: buy a slow cooker", "dead_end"),
        # Without a named problem, the cues decide.
        ("I clicked the link and it went to a page that was not found.", "dead_link"),
    ],
)
def test_a_problem_named_in_the_note_wins_over_later_words(note: str, kind: str) -> None:
    report = report_of([react(1, "frustrated", note, path="/x")])
    assert kinds(report) == [kind]


def test_a_neutral_reaction_counts_only_when_it_names_a_known_problem() -> None:
    turns = [
        react(
            1, "neutral", "The page told me 'Enter a valid postcode; it is required'.", path="/a"
        ),
        react(2, "neutral", "There are twelve kettles.", path="/b"),
    ]
    report = report_of(turns)
    assert kinds(report) == ["validation_message"]
    assert report["friction_points"][0]["steps"] == [1]


def test_a_stated_kind_of_other_is_read_from_the_words() -> None:
    turns = [react(1, "angry", "It is so slow.", path="/a", kind="other")]
    turns[0]["reactions"][0]["kind"] = "other"
    assert kinds(report_of(turns)) == ["slow_load"]
    calm = [react(1, "satisfied", "Nice.", path="/a", kind="other")]
    calm[0]["reactions"][0]["kind"] = "other"
    assert kinds(report_of(calm)) == []


def test_a_stated_kind_in_the_spec_is_kept_through_the_report() -> None:
    turns = [
        react(1, "neutral", "Second box next to Name.", path="/form", kind="unlabeled_control")
    ]
    turns[0]["reactions"][0]["kind"] = "unlabeled_control"
    turns[0]["reactions"][0]["element"] = "an unnamed textbox"
    report = report_of(turns)
    assert kinds(report) == ["unlabeled_control"]
    assert report["reactions"][0]["kind"] == "unlabeled_control"
    assert "about an unnamed textbox" in report["friction_points"][0]["detail"]


def test_the_persona_s_error_page_and_the_loop_s_dead_link_are_one_point() -> None:
    turns = [
        turn(1, "click", path="/product", result="clicked link 'Delivery info'"),
        turn(2, "scroll", path="/delivery", title="Page not found"),
        react(3, "angry", "Error page (/delivery): I got 'Page not found'.", path="/delivery"),
    ]
    (point,) = report_of(turns)["friction_points"]
    assert point["kind"] == "dead_link"
    assert point["steps"] == [2, 3]
    assert point["screenshots"] == ["step-003.png"]


def test_the_spec_s_own_transcript_example_gives_a_valid_report() -> None:
    (example,) = load_synthetic_users().defs["Transcript"]["examples"]
    report = synthesize_session(example, status="completed", generated_at=NOW)
    assert schema_errors("Report", report) == []
    assert report["turns"] == len(example["turns"])
    assert report["time_on_task_seconds"] == 2.0
