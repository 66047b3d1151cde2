"""Friction points: where a persona struggled, from what it said and what the loop observed.

Two sources feed the same list of *signals* (a kind, a page, the steps, the evidence):

- **Reactions.** A reaction that carries a friction `kind` (the reaction's own, or the `react`
  action's `kind` argument) is a signal of that kind, whatever its sentiment (`other` counts as
  no kind). A reaction without one counts when its sentiment is negative (`confused`,
  `frustrated`, `angry`), its kind read from the persona's words (`classify_note`: a problem
  named outright in `PROBLEM_NAMES`, the earliest named winning, else the first of
  `PROBLEM_CUES` that matches, else `negative_reaction`); a neutral one counts only when its
  words name a known problem; a positive one never.
- **Observation.** What the turns show without asking the persona: a step that took longer than
  `SLOW_STEP_MS` (`slow_load`, on the page where the step was taken, as is a persona's
  complaint about the wait after a step), an action that failed with a code about the site
  (`failed_action`), a page whose title says it is an error (`error_page`, or `dead_link` when a
  click led there), a page the persona kept arriving back at (`LOOP_ARRIVALS` times or more in
  one generation) or the same action repeated `REPEATED_ACTIONS` times in a row on one page
  (`dead_end`).

Signals are grouped by kind and URL path into friction points (`group_key`), so a persona that
meets the same unlabeled field three times has one friction point with three steps, and the
aggregate groups the same point across personas by the same key. `error_page` and `dead_link` on
one page are one problem, reported as `dead_link` when a click led there. Titles are plain words
built from the kind and the path, so the same problem reads the same in every persona's report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

SLOW_STEP_MS: Final = 2_000.0  # a person notices a wait past about two seconds
LOOP_ARRIVALS: Final = 3  # arriving back at one page this often in a generation is going round
REPEATED_ACTIONS: Final = 3  # the same action on one page this often in a row did nothing useful

NEGATIVE_SENTIMENTS: Final = frozenset({"confused", "frustrated", "angry"})
_KIND = re.compile(r"^[a-z][a-z0-9_]{1,63}$")

# Actions whose time is the site's (a page load, a submit), not the persona's own bookkeeping.
_SITE_ACTIONS: Final = frozenset(
    {"click", "type", "fill", "select_option", "press_key", "scroll", "navigate"}
)
# Failure codes about the model's own call rather than the site: not friction a team can fix.
AGENT_CODES: Final = frozenset({"malformed_tool_call", "invalid_request", "invalid_frame"})

_ERROR_TITLE = re.compile(
    r"\b(?:404|410|500|502|503|504)\b|not found|server error|internal error|bad gateway"
    r"|service unavailable|page (?:does not|doesn't) exist",
    re.IGNORECASE,
)

# A reaction note's kind, from its words (case-insensitive), in two tiers. `PROBLEM_NAMES` are
# the problems named outright ("Unlabeled field (Email): ..."); the one named earliest in the note
# wins, so a note that starts with its problem is never re-read from a later word (a task about a
# "slow cooker"). `PROBLEM_CUES` are softer signs, tried in order, more specific kinds first: "the
# link went to a 404" is a dead link before it is an error page.
PROBLEM_NAMES: Final[tuple[tuple[str, str], ...]] = (
    ("dead_link", r"dead link|broken link"),
    ("error_page", r"error page"),
    ("http_error", r"http error"),
    ("slow_load", r"slow (?:step|page|load(?:ing)?)"),
    ("unlabeled_control", r"unlabell?ed|no label|without (?:a )?label|missing label"),
    ("missing_alt_text", r"alt(?:ernative)? text"),
    ("validation_message", r"validation (?:message|error)"),
    ("confusing_error", r"confusing (?:error|message)"),
    ("dead_end", r"dead end"),
)
PROBLEM_CUES: Final[tuple[tuple[str, str], ...]] = (
    ("dead_link", r"link\b.{0,40}(?:\b404\b|not found|error|nowhere|broken)"),
    ("error_page", r"\b404\b|\b50[0-4]\b|not found|server error|page (?:does not|doesn't) exist"),
    ("http_error", r"status code"),
    ("slow_load", r"slow|loading|takes? (?:forever|ages)|took (?:forever|ages)|waited|spinner"),
    (
        "unlabeled_control",
        r"what (?:this|the) (?:field|box|button) (?:is|does)|what to (?:type|enter)",
    ),
    ("missing_alt_text", r"image (?:has no|without) (?:a )?description"),
    (
        "validation_message",
        r"validation|invalid|required field|is required|must be|not accepted|rejected",
    ),
    ("confusing_error", r"error|went wrong|makes no sense|cryptic"),
    ("dead_end", r"stuck|going (?:round|around) in circles|no way (?:back|forward|on)|nowhere to"),
)
REACTION_KEYWORDS: Final = PROBLEM_NAMES + PROBLEM_CUES
"""Every keyword rule, names first: `(kind, regular expression)`."""

_NAMES = tuple((kind, re.compile(rx, re.IGNORECASE)) for kind, rx in PROBLEM_NAMES)
_CUES = tuple((kind, re.compile(rx, re.IGNORECASE)) for kind, rx in PROBLEM_CUES)
# Kinds the persona may state that say nothing about which friction it met.
_UNSTATED: Final = frozenset({"other"})
# One problem seen two ways: the persona says "error page" where the loop saw the link that led
# there. They group together, under the more telling kind when any signal has it.
_FAMILY: Final = {"dead_link": "error_page"}
_TELLING: Final = {"error_page": "dead_link"}

TITLES: Final[dict[str, str]] = {
    "slow_load": "Slow to respond on {page}",
    "http_error": "The server answered with an error on {page}",
    "error_page": "An error page at {page}",
    "dead_link": "A link leads to an error page ({page})",
    "dead_end": "Going round in circles on {page}",
    "unlabeled_control": "A control without a label on {page}",
    "missing_alt_text": "An image without a text alternative on {page}",
    "validation_message": "A form rejected the input on {page}",
    "confusing_error": "A hard-to-understand error on {page}",
    "negative_reaction": "A bad experience on {page}",
    "failed_action": "Actions that did not work on {page}",
}


@dataclass(frozen=True)
class Signal:
    """One piece of evidence of friction at one page."""

    kind: str
    url: str
    steps: tuple[int, ...]
    evidence: str
    screenshot: str | None = None


def page_key(url: str) -> str:
    """The part of a URL that names a page for grouping: its path, without a trailing slash."""
    path = urlsplit(url).path.rstrip("/")
    return path or "/"


def group_key(kind: str, url: str) -> tuple[str, str]:
    """What makes two signals (or two personas' friction points) the same problem."""
    return _FAMILY.get(kind, kind), page_key(url)


def merged_kind(kinds: list[str]) -> str:
    """The kind a group of one family is reported under: the more telling one when present."""
    family = _FAMILY.get(kinds[0], kinds[0])
    telling = _TELLING.get(family)
    return telling if telling is not None and telling in kinds else family


def title_for(kind: str, url: str) -> str:
    """The plain-words title of a friction kind on a page (the same in every report)."""
    template = TITLES.get(kind, kind.replace("_", " ").capitalize() + " on {page}")
    return template.format(page=page_key(url))


def classify_note(note: str) -> str:
    """The friction kind a persona's words point at (`negative_reaction` when none fits)."""
    named = [(m.start(), i, kind) for i, (kind, rx) in enumerate(_NAMES) if (m := rx.search(note))]
    if named:
        return min(named)[2]
    for kind, pattern in _CUES:
        if pattern.search(note):
            return kind
    return "negative_reaction"


def reaction_kind(reaction: dict[str, Any], action: dict[str, Any] | None) -> str | None:
    """The friction kind of a reaction, or None when it is not friction.

    A stated kind (on the reaction, or the `react` action's `kind` argument) wins whatever the
    sentiment, unless it is `other`. Otherwise a negative sentiment is friction of the kind its
    words name (`negative_reaction` when they name none); a neutral one only when its words name
    a known problem ("The page told me 'Enter a valid postcode'" is a validation message however
    calmly it is said); a positive one never.
    """
    stated = reaction.get("kind")
    if stated is None and action is not None and action.get("name") == "react":
        stated = action.get("arguments", {}).get("kind")
    if isinstance(stated, str) and _KIND.fullmatch(stated) and stated not in _UNSTATED:
        return stated
    sentiment = reaction.get("sentiment")
    if sentiment in NEGATIVE_SENTIMENTS:
        return classify_note(str(reaction.get("note", "")))
    if sentiment == "neutral":
        kind = classify_note(str(reaction.get("note", "")))
        return None if kind == "negative_reaction" else kind
    return None


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f} s"


def signals(turns: list[dict[str, Any]]) -> list[Signal]:
    """Every friction signal of a session's turns (sorted by turn), in step order."""
    found: list[Signal] = []
    found += _reaction_signals(turns)
    found += _slow_steps(turns)
    found += _failed_actions(turns)
    found += _error_pages(turns)
    found += _loops(turns)
    return sorted(found, key=lambda s: (s.steps[0], s.kind, s.url, s.evidence))


def _reaction_signals(turns: list[dict[str, Any]]) -> list[Signal]:
    out = []
    for i, turn in enumerate(turns):
        for reaction in turn.get("reactions", []):
            kind = reaction_kind(reaction, turn.get("action"))
            if kind is None:
                continue
            about = f" about {reaction['element']}" if reaction.get("element") else ""
            url = reaction["url"]
            if kind == "slow_load":
                # "I waited for the page" is about the step before, where the wait began.
                step = _last_site_action(turns, i)
                url = step["observation"]["url"] if step is not None else url
            out.append(
                Signal(
                    kind,
                    url,
                    (reaction["step"],),
                    f"Step {reaction['step']}, {reaction['sentiment']}{about}: "
                    f'"{reaction["note"]}"',
                    reaction.get("screenshot"),
                )
            )
    return out


def _slow_steps(turns: list[dict[str, Any]]) -> list[Signal]:
    out = []
    for turn in turns:
        outcome, action = turn["outcome"], turn["action"]
        elapsed = float(outcome.get("elapsed_ms", 0.0))
        if action["name"] not in _SITE_ACTIONS or elapsed <= SLOW_STEP_MS:
            continue
        # The wait belongs to the page where the step was taken: "Continue to payment" on the
        # shipping form is one slow step whether it ends on the payment page or back on the form.
        out.append(
            Signal(
                "slow_load",
                turn["observation"]["url"],
                (turn["turn"],),
                f"Step {turn['turn']} ({outcome['summary']}) took {_seconds(elapsed)}.",
            )
        )
    return out


def _last_site_action(turns: list[dict[str, Any]], i: int) -> dict[str, Any] | None:
    """The last turn before `turns[i]` that acted on the site, past reactions, in its browser."""
    generation = turns[i]["generation"]
    for j in range(i - 1, -1, -1):
        before: dict[str, Any] = turns[j]
        if before["generation"] != generation:
            return None
        if before["action"]["name"] in _SITE_ACTIONS:
            return before
    return None


def _failed_actions(turns: list[dict[str, Any]]) -> list[Signal]:
    out = []
    for turn in turns:
        outcome = turn["outcome"]
        code = outcome.get("code")
        if outcome["ok"] or code in AGENT_CODES:
            continue
        summary = str(outcome["summary"])
        if code and code not in summary:
            summary += f" ({code})"
        out.append(
            Signal(
                "failed_action",
                turn["observation"]["url"],
                (turn["turn"],),
                f"Step {turn['turn']}: {summary}",
            )
        )
    return out


def _error_pages(turns: list[dict[str, Any]]) -> list[Signal]:
    out = []
    for i, turn in enumerate(turns):
        seen = turn["observation"]
        if not _ERROR_TITLE.search(seen.get("title", "")):
            continue
        before = turns[i - 1] if i > 0 else None
        if before is not None and before["observation"]["url"] == seen["url"]:
            continue  # still on the same error page: one arrival, one signal
        how = ""
        kind = "error_page"
        if before is not None:
            how = f" after step {before['turn']} ({before['outcome']['summary']})"
            if before["action"]["name"] == "click":
                kind = "dead_link"
        out.append(
            Signal(
                kind,
                seen["url"],
                (turn["turn"],),
                f'Step {turn["turn"]}: a page titled "{seen["title"]}" at {seen["url"]}{how}.',
            )
        )
    return out


def _loops(turns: list[dict[str, Any]]) -> list[Signal]:
    out = []
    arrivals: dict[tuple[int, str], list[int]] = {}
    urls: dict[tuple[int, str], str] = {}
    streak: list[dict[str, Any]] = []

    def close_streak() -> None:
        if len(streak) >= REPEATED_ACTIONS:
            first, last = streak[0], streak[-1]
            url = first["observation"]["url"]
            out.append(
                Signal(
                    "dead_end",
                    url,
                    tuple(t["turn"] for t in streak),
                    f"Steps {first['turn']}-{last['turn']}: {first['outcome']['summary']}, "
                    f"{len(streak)} times in a row on {page_key(url)} without getting further.",
                )
            )
        streak.clear()

    previous: dict[str, Any] | None = None
    for turn in turns:
        page = page_key(turn["observation"]["url"])
        new_generation = previous is not None and previous["generation"] != turn["generation"]
        moved = previous is not None and page_key(previous["observation"]["url"]) != page
        # A new generation reopens the browser: landing again is the crash's doing, not a loop.
        if previous is None or (moved and not new_generation):
            key = (turn["generation"], page)
            arrivals.setdefault(key, []).append(turn["turn"])
            urls.setdefault(key, turn["observation"]["url"])
        repeats = (
            bool(streak)
            and not moved
            and not new_generation
            and _action_key(streak[-1]) == _action_key(turn)
        )
        if not repeats:
            close_streak()
        if turn["action"]["name"] in _SITE_ACTIONS:
            streak.append(turn)
        previous = turn
    close_streak()
    for key, steps in arrivals.items():
        if len(steps) >= LOOP_ARRIVALS:
            out.append(
                Signal(
                    "dead_end",
                    urls[key],
                    tuple(steps),
                    f"The persona arrived at {key[1]} {len(steps)} times "
                    f"(steps {', '.join(map(str, steps))}).",
                )
            )
    return out


def _action_key(turn: dict[str, Any]) -> tuple[str, str]:
    # Refs change with every snapshot; the outcome summary names the element the way a person
    # would ("clicked button 'Continue'"), so it is what repeats when the persona repeats itself.
    return turn["action"]["name"], str(turn["outcome"]["summary"])


def friction_points(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's friction points: signals grouped by kind and page, in order of first step."""
    groups: dict[tuple[str, str], list[Signal]] = {}
    for signal in signals(turns):
        groups.setdefault(group_key(signal.kind, signal.url), []).append(signal)
    ordered = sorted(groups.items(), key=lambda item: (min(s.steps[0] for s in item[1]), item[0]))
    per_kind: dict[str, int] = {}
    points = []
    for _key, group in ordered:
        kind = merged_kind([s.kind for s in group])
        per_kind[kind] = per_kind.get(kind, 0) + 1
        steps = sorted({step for s in group for step in s.steps})
        shots = []
        for s in sorted(group, key=lambda s: s.steps[0]):
            if s.screenshot and s.screenshot not in shots:
                shots.append(s.screenshot)
        evidence = []
        for s in group:
            if s.evidence not in evidence:
                evidence.append(s.evidence)
        points.append(
            {
                "id": f"{kind}-{per_kind[kind]}",
                "kind": kind,
                "title": title_for(kind, group[0].url),
                "detail": "\n".join(evidence)[:4000],
                "url": group[0].url,
                "steps": steps,
                "screenshots": shots,
            }
        )
    return points
