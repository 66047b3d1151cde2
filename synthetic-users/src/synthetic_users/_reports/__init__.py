"""Report synthesis: a persona session's report and a run's aggregate, as JSON, Markdown, HTML.

`synthesize_session` turns a transcript into `report.json`; `synthesize_aggregate` turns the
session reports of a run into `aggregate.json`; the renderers make `report.md` and a
self-contained `report.html` of each; the writers put them in an `ArtifactStore`.

Exceptions: none of its own. Bad input (a transcript or report that is not shaped like its
schema) raises `KeyError`/`TypeError`/`ValueError` from the code that reads it; `ValueError`
when a report is asked for a session that has not ended.
"""

from __future__ import annotations

from synthetic_users._reports._aggregate import synthesize_aggregate
from synthetic_users._reports._friction import (
    LOOP_ARRIVALS,
    REACTION_KEYWORDS,
    REPEATED_ACTIONS,
    SLOW_STEP_MS,
    classify_note,
)
from synthetic_users._reports._render import (
    render_aggregate_html,
    render_aggregate_markdown,
    render_session_html,
    render_session_markdown,
    report_environment,
)
from synthetic_users._reports._session import synthesize_session
from synthetic_users._reports._write import (
    read_transcript,
    write_aggregate_artifacts,
    write_session_artifacts,
)

__all__ = [
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
