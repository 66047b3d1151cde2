"""The reports package's public names are the ones the service and the dashboard use."""

from __future__ import annotations

import synthetic_users._reports as reports


def test_the_public_names_are_pinned() -> None:
    assert sorted(reports.__all__) == [
        "LOOP_ARRIVALS",
        "REACTION_KEYWORDS",
        "REPEATED_ACTIONS",
        "SLOW_STEP_MS",
        "classify_note",
        "read_transcript",
        "render_aggregate_html",
        "render_aggregate_markdown",
        "render_session_html",
        "render_session_markdown",
        "report_environment",
        "synthesize_aggregate",
        "synthesize_session",
        "write_aggregate_artifacts",
        "write_session_artifacts",
    ]
    assert all(hasattr(reports, name) for name in reports.__all__)


def test_the_dashboard_can_load_the_report_macros() -> None:
    env = reports.report_environment()
    macros = env.get_template("_report_macros.html").module
    assert callable(macros.session_body)  # type: ignore[attr-defined]
    assert callable(macros.aggregate_body)  # type: ignore[attr-defined]
    assert env.autoescape("x.html") is True  # type: ignore[operator]
