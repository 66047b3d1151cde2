"""Reports for people: Markdown and self-contained HTML, from Jinja2 templates.

The templates live in `templates/` beside this module. The HTML is built for two homes: the
downloadable `report.html` (one file, inline CSS, screenshots embedded as `data:` URIs, no
script, a Content-Security-Policy that allows nothing else) and the dashboard's report pages,
which reuse the same markup. For that the body of each report is a macro in
`_report_macros.html` (`session_body`, `aggregate_body`) that takes its links from the context
instead of building them:

- `src(name)` (session) or `src(session_id, name)` (aggregate): the `src` of a screenshot, or
  None when there is none to show;
- `href(session_id)` (aggregate): where a persona's report is.

`report_environment()` hands out the environment (autoescape on for `.html`, strict undefined)
so a dashboard can load these templates beside its own. Every text that comes from the page or
the model reaches the HTML through autoescaping; nothing is marked safe but the stylesheet.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jinja2

from synthetic_users._reports._session import median

ScreenshotSource = Mapping[str, bytes] | Callable[[str], bytes | None]
"""Screenshots of a session by file name: a mapping, or a loader returning None when missing."""

SessionScreenshots = Callable[[str, str], bytes | None]
"""Screenshots of a run's sessions: `(session_id, name) -> bytes`, None when missing."""

FILE_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STANDALONE = "_page.html"


@dataclass(frozen=True)
class ReportFrame:
    """A page around a report other than report.html's own: the dashboard's layout.

    The report renders from the same template, extending `template` (which defines the blocks
    `title` and `content`) instead of the standalone page, and links its screenshots and persona
    reports through `src` and `href` instead of embedding them.
    """

    environment: jinja2.Environment  # loads the report templates and `template`
    template: str
    src: Callable[..., str | None]  # as `src(name)` (session) or `src(session_id, name)`
    href: Callable[[str], str] | None = None  # a persona report's address (aggregate)
    context: Mapping[str, Any] = field(default_factory=dict)  # what `template` needs


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~])")
_MD_LINE_START = re.compile(r"^(?:([-+=])|(\d+)([.)]))")
_IMAGE_TYPES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"))


@cache
def report_environment() -> jinja2.Environment:
    """The Jinja2 environment of the report templates (autoescape on for HTML)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("synthetic_users._reports", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md"] = md_escape
    env.filters["duration"] = duration
    env.filters["ease"] = ease_text
    env.filters["lines"] = lambda text: [line for line in str(text).splitlines() if line]
    env.globals["ease_chart"] = ease_chart
    return env


def md_escape(text: object) -> str:
    """`text` as inline Markdown that renders as itself (no markup, no raw HTML, one line)."""
    flat = _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))
    # A value may open a line: keep it from starting a list or a heading underline.
    return _MD_LINE_START.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", flat)


def duration(seconds: float) -> str:
    """A time on task as people read it: `42.5 s`, `3 min 05 s`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def ease_text(value: float | None) -> str:
    """An ease rating or median: `5 / 7`, `4.5 / 7`, `not rated`."""
    if value is None:
        return "not rated"
    return f"{value:g} / 7"


def data_uri(data: bytes) -> str:
    """`data` as a `data:` URI of its image type (PNG unless it says otherwise)."""
    mime = next((m for magic, m in _IMAGE_TYPES if data.startswith(magic)), "image/png")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _embedder(screenshots: ScreenshotSource | None) -> Callable[[str], str | None]:
    cache_: dict[str, str | None] = {}

    def src(name: str) -> str | None:
        if name not in cache_:
            if screenshots is None:
                data = None
            elif isinstance(screenshots, Mapping):
                data = screenshots.get(name)
            else:
                data = screenshots(name)
            cache_[name] = data_uri(data) if data else None
        return cache_[name]

    return src


def ease_chart(steps: list[Mapping[str, Any]], label: str) -> dict[str, Any]:
    """The geometry of a small bar chart of ease per step, for the `chart` macro."""
    bar, gap, height = 12, 4, 70
    bars = []
    for i, s in enumerate(steps):
        h = s["ease"] * 10
        tone = "low" if s["ease"] <= 2 else "mid" if s["ease"] <= 4 else "high"
        bars.append({"x": i * (bar + gap), "y": height - h, "w": bar, "h": h, "tone": tone, **s})
    width = max(len(steps) * (bar + gap) - gap, bar)
    spoken = ", ".join(f"step {s['step']}: {s['ease']}" for s in steps)
    return {
        "bars": bars,
        "width": width,
        "height": height,
        "label": label,
        "description": f"Ease per step (1 very difficult, 7 very easy): {spoken or 'none'}.",
    }


def action_details(action: Mapping[str, Any]) -> str:
    """What an action was given, in a few words (`'rain jacket', then Enter`), or ''."""
    args = action.get("arguments", {})
    match action.get("name"):
        case "type":
            return repr(args.get("text", "")) + (", then Enter" if args.get("submit") else "")
        case "fill":
            return repr(args.get("value", ""))
        case "select_option":
            return ", ".join(repr(v) for v in args.get("values", []))
        case "press_key":
            return str(args.get("key", ""))
        case "navigate":
            return str(args.get("url", ""))
        case "scroll":
            return str(args.get("direction", ""))
        case "finish":
            verdict = "task done" if args.get("success") else "gave up"
            return f"{verdict}: {args.get('summary', '')}"
    return ""


def _step_views(
    report: Mapping[str, Any], transcript: Mapping[str, Any] | None
) -> list[dict[str, Any]] | None:
    """The timeline: one entry per turn with its reactions and the friction points it shows."""
    if transcript is None:
        return None
    points_at: dict[int, list[Mapping[str, Any]]] = {}
    for point in report["friction_points"]:
        for step in point["steps"]:
            points_at.setdefault(step, []).append(point)
    views = []
    for turn in sorted(transcript.get("turns", []), key=lambda t: t["turn"]):
        views.append(
            {
                "step": turn["turn"],
                "generation": turn["generation"],
                "url": turn["observation"]["url"],
                "title": turn["observation"].get("title", ""),
                "action": turn["action"]["name"],
                "details": action_details(turn["action"]),
                "ease": turn["action"].get("arguments", {}).get("ease"),
                "reason": turn.get("reason"),
                "outcome": turn["outcome"],
                "reactions": turn.get("reactions", []),
                "friction": points_at.get(turn["turn"], []),
            }
        )
    return views


def _session_context(
    report: Mapping[str, Any], transcript: Mapping[str, Any] | None
) -> dict[str, Any]:
    alt: dict[str, str] = {}
    for reaction in report["reactions"]:
        if reaction.get("screenshot"):
            alt.setdefault(reaction["screenshot"], f"Step {reaction['step']}: {reaction['note']}")
    return {
        "report": report,
        "median_ease": median([s["ease"] for s in report["ease_per_step"]]),
        "steps": _step_views(report, transcript),
        "shot_alt": alt,
    }


def render_session_markdown(report: Mapping[str, Any]) -> str:
    """`report.md` of a persona session; screenshots are linked as `screenshots/<name>`."""
    template = report_environment().get_template("session.md")
    return template.render(_session_context(report, None))


def render_session_html(
    report: Mapping[str, Any],
    screenshots: ScreenshotSource | None = None,
    *,
    transcript: Mapping[str, Any] | None = None,
    frame: ReportFrame | None = None,
) -> str:
    """`report.html` of a persona session: one self-contained page.

    Args:
        report: The session's `report.json`.
        screenshots: Its screenshots by name (a mapping or a loader); each one shown is embedded
            as a `data:` URI, and one that is missing is named instead.
        transcript: The session's transcript; when given, the report has a timeline of every
            step (action, outcome, ease, the model's reason, reactions).
        frame: Render inside this page instead (the dashboard); `screenshots` is not used.
    """
    context = _session_context(report, transcript)
    if frame is not None:
        template = frame.environment.get_template("session.html")
        return template.render(context, **frame.context, src=frame.src, frame=frame.template)
    template = report_environment().get_template("session.html")
    return template.render(context, src=_embedder(screenshots), csp=FILE_CSP, frame=STANDALONE)


def _aggregate_context(
    aggregate: Mapping[str, Any], session_reports: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    ease = {
        p["session_id"]: session_reports[p["session_id"]]["ease_per_step"]
        for p in aggregate["personas"]
        if p["session_id"] in session_reports
    }
    shots = []
    for issue in aggregate["issues"]:
        # One picture per persona who met the issue is enough to see it; the rest are linked.
        first: dict[str, dict[str, Any]] = {}
        for occurrence in issue["occurrences"]:
            sid = occurrence["session_id"]
            if occurrence.get("screenshot") and sid not in first:
                note = _note(session_reports.get(sid), occurrence["screenshot"])
                alt = f"{occurrence['persona_name']}, step {occurrence['step']}: "
                first[sid] = {**occurrence, "alt": alt + (note or issue["title"])}
        shots.append(list(first.values()))
    return {
        "aggregate": aggregate,
        "ease_by_session": ease,
        "succeeded": sum(1 for p in aggregate["personas"] if p["success"]),
        "issue_shots": shots,
    }


def _note(report: Mapping[str, Any] | None, screenshot: str) -> str | None:
    """The persona's words at the reaction a screenshot was taken for."""
    for reaction in report["reactions"] if report is not None else ():
        if reaction.get("screenshot") == screenshot:
            return str(reaction["note"])
    return None


def render_aggregate_markdown(aggregate: Mapping[str, Any]) -> str:
    """The run's `report.md`; persona reports are linked as `sessions/<session>/report.md`."""
    template = report_environment().get_template("aggregate.md")
    return template.render(_aggregate_context(aggregate, {}))


def render_aggregate_html(
    aggregate: Mapping[str, Any],
    session_reports: Mapping[str, Mapping[str, Any]] | None = None,
    screenshots: SessionScreenshots | None = None,
    *,
    frame: ReportFrame | None = None,
) -> str:
    """The run's `report.html`: one self-contained page linking each persona's report.

    Args:
        aggregate: The run's `aggregate.json`.
        session_reports: The sessions' `report.json` by session id, for the ease charts.
        screenshots: A loader of session screenshots; each issue shows the first screenshot of
            each persona who met it, embedded.
        frame: Render inside this page instead (the dashboard); `screenshots` is not used.
    """
    context = _aggregate_context(aggregate, session_reports or {})
    if frame is not None:
        template = frame.environment.get_template("aggregate.html")
        links = frame.href or _file_href
        return template.render(
            context, **frame.context, src=frame.src, href=links, frame=frame.template
        )
    template = report_environment().get_template("aggregate.html")

    def src(session_id: str, name: str) -> str | None:
        if screenshots is None:
            return None
        data = screenshots(session_id, name)
        return data_uri(data) if data else None

    return template.render(context, src=src, href=_file_href, csp=FILE_CSP, frame=STANDALONE)


def _file_href(session_id: str) -> str:
    return f"sessions/{session_id}/report.html"
