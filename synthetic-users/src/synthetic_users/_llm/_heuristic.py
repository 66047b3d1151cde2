"""The heuristic persona: a deterministic, offline stand-in for a language model.

`HeuristicPersona` is the embedded default `Model`. It reads the page the way a person of the
persona's digital literacy and patience might, and picks one action per turn:

1. `finish` when the budget is spent (`must_finish`) or the page confirms the task is done;
2. `react` once to each problem it can observe and has not reacted to yet: a slow step, an error
   page (404, 500, ...), an error message with a code and no hint which field is wrong, a
   validation message, an unlabeled field, an image without a text alternative, a dead end;
3. `fill` the next empty field it has data for (the persona's name, an address, a test card);
4. `click` the submit button of a form it has filled;
5. `click` the link or button that best matches the task's and the persona's goals' words (with a
   seeded chance of a random one: more for lower literacy), or `type` the task into a search box;
6. `navigate` back (or to the target) on an error page or when nothing on the page moves it
   forward.

It is stateless: everything it knows comes from the `TurnRequest` (the observation, this
generation's history and the prior reactions), and its random choices come from a generator
seeded with its seed, the turn and the URL. The same seed and request give the same decision, so
a loop that restarts it after a crash gets the behaviour it would have had.

Every reaction's note starts with the problem and where it is, `"Slow step (/checkout): ..."`;
that prefix is how the persona knows it already said so (`ISSUE_LABELS` lists the problems).
The page comes from the snapshot's structured nodes when it has them, otherwise from its compact
text or the connector's rendering of it (`render_snapshot`).
"""

from __future__ import annotations

import ast
import json
import random
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from synthetic_users._llm._base import Decision, ToolCall

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from synthetic_users._llm._base import PersonaProfile, TurnRequest
    from understudy_connector.generated.models import SnapshotResult

LABEL = "heuristic-persona v1 (offline, seeded; not a language model)"

# How long a step may take, from the action until the page settled, before it feels slow.
SLOW_STEP_MS = {"low": 1_000.0, "medium": 2_000.0, "high": 4_000.0}  # by patience
# Moves (clicks, navigations) on one URL that change nothing before the persona feels stuck.
STUCK_MOVES = {"low": 3, "medium": 4, "high": 6}  # by patience; one fewer for low literacy
# Negative reactions after which the persona gives up on the task.
GIVE_UP_AFTER_NEGATIVE = {"low": 5, "medium": 7, "high": 9}  # by patience
# Chance of clicking something at random instead of the best match, per navigation turn.
EXPLORE_CHANCE = {"low": 0.3, "medium": 0.1, "high": 0.0}  # by digital literacy

ISSUE_LABELS: dict[str, str] = {
    "slow": "Slow step",
    "error-page": "Error page",
    "confusing-error": "Confusing error",
    "validation": "Validation message",
    "unlabeled": "Unlabeled field",
    "missing-alt": "Image without alt text",
    "dead-end": "Dead end",
}
# How each problem is named in the spec's `ReactionKind`, so reports group it with the same
# problem met by other personas (whatever words their notes use).
REACTION_KINDS: dict[str, str] = {
    "slow": "slow_load",
    "error-page": "error_page",
    "confusing-error": "confusing_error",
    "validation": "validation_message",
    "unlabeled": "unlabeled_control",
    "missing-alt": "missing_alt_text",
    "dead-end": "dead_end",
}
NEGATIVE_SENTIMENTS = frozenset({"confused", "frustrated", "angry"})

FIELD_ROLES = frozenset({"textbox", "combobox", "spinbutton"})
SEARCH_ROLES = frozenset({"searchbox"})
CLICK_ROLES = frozenset({"link", "button", "menuitem", "tab"})
IMAGE_ROLES = frozenset({"image", "img"})  # Chromium's AX role is "image"; compact text says "img"
ACTIONABLE_ROLES = FIELD_ROLES | SEARCH_ROLES | CLICK_ROLES | IMAGE_ROLES | {"checkbox", "radio"}

ERROR_PAGE = re.compile(
    r"\b(404|not found|500|server error|internal error|403|forbidden|502|503|bad gateway)\b", re.I
)
DONE_PAGE = re.compile(
    r"\b(order confirmed|order (is )?(placed|complete)|thank you for your order|confirmation)\b",
    re.I,
)
ERROR_CODE = re.compile(r"\b[A-Z]{1,4}-?\d{3,}\b")
ERROR_WORDS = re.compile(
    r"\b(error|failed|could not|couldn't|invalid|please enter|required)\b", re.I
)
SUBMIT_WORDS = (
    "continue",
    "next",
    "place order",
    "pay",
    "submit",
    "save",
    "sign in",
    "log in",
    "send",
    "confirm",
    "buy",
    "register",
    "create account",
)
# Words on the way through a purchase or sign-up, worth following even when the task omits them.
FUNNEL_BONUS = {"add to cart": 5, "add to basket": 5, "checkout": 5, "buy now": 5, "proceed": 3}
ADDING = (
    "add to cart",
    "add to basket",
    "buy now",
)  # worth it only on the page of the thing wanted
SEARCH_WORDS = 3  # at most this many words go into a search box
CLICKED_PENALTY = 4  # per earlier click on an element of the same name
TASK_WORD_WEIGHT = 3
GOAL_WORD_WEIGHT = 4  # the persona's own goals come before the task's wording
STOP_WORDS = frozenset(
    "a an the and or to of for your you my me it in on at with from as is be this that have has"
    " get some one them their then want need can will would like about".split()
)
# Words of a task that say what to do rather than what to look for ("buy", "delivered home").
TASK_VERBS = frozenset(
    "buy order purchase find look search book get have deliver delivered home ship shipped send"
    " make try check".split()
)

# Which persona datum a field takes, by words in its label (all of a rule's words must appear).
FIELD_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("card", "number"), "card_number"),
    (("card", "name"), "card_name"),
    (("expir",), "expiry"),
    (("mm", "yy"), "expiry"),
    (("cvc",), "cvc"),
    (("cvv",), "cvc"),
    (("security", "code"), "cvc"),
    (("mail",), "email"),
    (("first", "name"), "first_name"),
    (("last", "name"), "last_name"),
    (("surname",), "last_name"),
    (("name",), "full_name"),
    (("street",), "street"),
    (("address",), "street"),
    (("city",), "city"),
    (("town",), "city"),
    (("postcode",), "postcode"),
    (("post", "code"), "postcode"),
    (("postal",), "postcode"),
    (("zip",), "postcode"),
    (("phone",), "phone"),
    (("country",), "country"),
)
POSTCODES = {"en-GB": "SW1A 1AA", "de-DE": "10115", "fr-FR": "75001", "en-US": "94107"}


# -- the page as the persona reads it ------------------------------------------------------------


@dataclass(frozen=True)
class Element:
    """Something on the page the persona can act on or look at."""

    role: str
    name: str
    ref: str
    value: str = ""
    context: str = ""  # the text just before it: a visual label when it has no name
    detail: str = ""  # what tells an unnamed image apart (its file name)


@dataclass(frozen=True)
class Page:
    """What one snapshot shows, in document order."""

    url: str
    title: str
    elements: tuple[Element, ...] = ()
    headings: tuple[str, ...] = ()
    alerts: tuple[str, ...] = ()  # text of alerts and of anything that reads like an error
    texts: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return urlsplit(self.url).path or "/"

    def by_ref(self, ref: str) -> Element | None:
        return next((e for e in self.elements if e.ref == ref), None)


@dataclass
class _PageBuilder:
    url: str
    title: str
    elements: list[Element] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    alert_depth: int | None = None

    def text(self, depth: int, text: str) -> None:
        text = " ".join(text.split())
        if self.alert_depth is not None and depth <= self.alert_depth:
            self.alert_depth = None
        if not text:
            return
        self.texts.append(text)
        if self.alert_depth is not None and depth > self.alert_depth:
            self.alerts[-1] = f"{self.alerts[-1]} {text}".strip()
        elif ERROR_WORDS.search(text) and ERROR_CODE.search(text):
            self.alerts.append(text)  # an error shown without role=alert is still an error

    def node(
        self, depth: int, role: str, name: str, ref: str | None, value: str, detail: str
    ) -> None:
        if self.alert_depth is not None and depth <= self.alert_depth:
            self.alert_depth = None
        if role in ("alert", "alertdialog"):
            self.alert_depth = depth
            self.alerts.append(name)
        elif role == "heading":
            self.headings.append(name)
        elif role == "StaticText":
            self.text(depth, name)
        if ref is not None and role in ACTIONABLE_ROLES:
            context = self.texts[-1] if self.texts else ""
            self.elements.append(Element(role, name, ref, value, context, detail))

    def build(self) -> Page:
        return Page(
            self.url,
            self.title,
            tuple(self.elements),
            tuple(self.headings),
            tuple(a for a in self.alerts if a),
            tuple(self.texts),
        )


def read_snapshot(url: str, title: str, snapshot: SnapshotResult, text: str) -> Page:
    """The page from a snapshot's nodes when it has them, otherwise from its text."""
    if not snapshot.nodes:
        return read_text(text, url, title)
    page = _PageBuilder(url, title)
    for n in snapshot.nodes:
        detail = str((n.attributes or {}).get("src", ""))
        page.node(n.depth, n.role, n.name, n.ref, n.value or "", detail)
    return page.build()


HEADER_URL = re.compile(r"(https?://[^\s)]+)")
LINK = re.compile(r"\[((?:[^\]\\]|\\.)*)\]\(([\w-]+)\)")
COMPACT_CONTROL = re.compile(
    r'^(?P<role>[A-Za-z-]+)(?: (?P<name>"(?:[^"\\]|\\.)*"))?(?: =(?P<value>"(?:[^"\\]|\\.)*"))?'
    r"(?P<rest>.*?) \[(?P<ref>[\w-]+)\]$"
)
CONTAINER_LINE = re.compile(
    r"^(navigation|main|banner|contentinfo|complementary|search|dialog|alertdialog|alert|status"
    r"|log|table|grid|treegrid|menu|menubar|listbox|tablist|tabpanel|tree|radiogroup|toolbar"
    r'|form|region|article|group)(?: ("(?:[^"\\]|\\.)*"))?$'
)
RENDERED_NODE = re.compile(
    r"^(?P<indent> *)- (?P<role>\S+) (?P<name>'.*?'|\".*?\")(?: \[(?P<d>.*)\])?$"
)


def _header(line: str) -> tuple[str, str]:
    """The URL and title of a header: compact `# <title> — <url> (g2s1)` or `# <url> (g2s1)` (a
    page whose title says no more than its URL), rendered `# <title> (<url>) generation 2`."""
    found = HEADER_URL.search(line)
    url = found.group(1) if found else ""
    if not line.startswith("#") or not url:
        return url, ""
    body = line.lstrip("# ")
    for marker in (f" — {url}", f" ({url})"):
        cut = body.rfind(marker)
        if cut >= 0:
            return url, body[:cut]
    return url, ""


def _unquote(literal: str | None, *, python: bool = False) -> str:
    """A quoted name or value as written (JSON in compact text, Python `repr` when rendered)."""
    if not literal:
        return ""
    try:
        return str(ast.literal_eval(literal) if python else json.loads(literal))
    except (ValueError, SyntaxError):  # json.JSONDecodeError is a ValueError
        return literal[1:-1]  # a page's odd text must not stop the persona


def _read_rendered(page: _PageBuilder, line: re.Match[str]) -> None:
    """One line of the connector's rendering: `  - textbox 'Email' [ref=g1e2, value='x']`."""
    details = line.group("d") or ""
    ref = re.search(r"ref=([\w-]+)", details)
    held = re.search(r"value=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", details)
    page.node(
        len(line.group("indent")) // 2,
        line.group("role"),
        _unquote(line.group("name"), python=True),
        ref.group(1) if ref else None,
        _unquote(held.group(1) if held else None, python=True),
        "",
    )


def _read_compact(page: _PageBuilder, line: str) -> None:
    """One line of the compact form: a control, a heading, a container or text with links."""
    depth = len(line) - len(line.lstrip(" "))
    body = line.strip()
    control = COMPACT_CONTROL.match(body)
    if control and control.group("role") in ACTIONABLE_ROLES:
        src = re.search(r"\bsrc=(\S+)", control.group("rest"))
        page.node(
            depth,
            control.group("role"),
            _unquote(control.group("name")),
            control.group("ref"),
            _unquote(control.group("value")),
            src.group(1) if src else "",
        )
    elif heading := re.match(r"^h\d\s+(.*)$", body):
        page.node(depth, "heading", heading.group(1), None, "", "")
    elif container := CONTAINER_LINE.match(body):
        page.node(depth, container.group(1), _unquote(container.group(2)), None, "", "")
    else:
        for name, ref in LINK.findall(body):
            page.node(depth, "link", name, ref, "", "")
        page.text(depth, LINK.sub(lambda m: m.group(1), body))


def read_text(text: str, url: str = "", title: str = "") -> Page:
    """The page from a compact snapshot text or the connector's indented rendering."""
    lines = text.splitlines()
    if lines and lines[0].startswith("#"):
        url, title = (url or _header(lines[0])[0]), (title or _header(lines[0])[1])
        lines = lines[1:]
    page = _PageBuilder(url, title)
    for line in lines:
        rendered = RENDERED_NODE.match(line)
        if rendered:
            _read_rendered(page, rendered)
        else:
            _read_compact(page, line)
    return page.build()


# -- what the persona remembers: only what the request carries ---------------------------------


@dataclass(frozen=True)
class Memory:
    """What this generation's history and the prior reactions tell the persona."""

    notes: tuple[str, ...]  # every reaction note so far
    negative: int  # reactions with a negative sentiment
    clicked: tuple[str, ...]  # names of the elements clicked, oldest first
    urls: tuple[str, ...]  # the URL each earlier turn started on, oldest first
    moves: tuple[str, ...]  # per earlier turn: the action's name
    searched: tuple[str, ...]  # paths where it already typed into a search box
    error_urls: frozenset[str] = frozenset()  # earlier turns' URLs that showed an error page

    def reacted(self, prefix: str) -> bool:
        return any(note.startswith(prefix) for note in self.notes)


def remember(request: TurnRequest) -> Memory:
    notes = [r.note for r in request.prior_reactions]
    negative = sum(r.sentiment in NEGATIVE_SENTIMENTS for r in request.prior_reactions)
    clicked: list[str] = []
    urls: list[str] = []
    searched: list[str] = []
    error_urls: set[str] = set()
    for exchange in request.history:
        page = read_text(exchange.observation_text)
        urls.append(page.url)
        if is_error_page(page):
            error_urls.add(page.url)
        args = exchange.call.arguments
        if exchange.call.name == "react":
            note = str(args.get("note", ""))
            if note not in notes:
                notes.append(note)
                negative += args.get("sentiment") in NEGATIVE_SENTIMENTS
        elif exchange.call.name == "click":
            element = page.by_ref(str(args.get("ref", "")))
            clicked.append(element.name if element else str(args.get("ref", "")))
        elif exchange.call.name == "type":
            searched.append(page.path)
    return Memory(
        tuple(notes),
        negative,
        tuple(clicked),
        tuple(urls),
        tuple(e.call.name for e in request.history),
        tuple(searched),
        frozenset(error_urls),
    )


# -- the persona's data --------------------------------------------------------------------------


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.casefold()).strip("-") or "persona"


def persona_data(persona: PersonaProfile) -> dict[str, str]:
    """Plausible, obviously fake details for forms.

    The email is the session's own inbox when it has one (so a site's mail reaches it), else an
    address at a domain reserved for tests.
    """
    first, _, last = persona.name.partition(" ")
    return {
        "full_name": persona.name,
        "first_name": first,
        "last_name": last or first,
        "email": persona.email or f"{slug(persona.name)}@example.test",
        "street": "12 Garden Street",
        "city": "Springfield",
        "postcode": POSTCODES.get(persona.locale, POSTCODES["en-US"]),
        "phone": "555 0100",
        "country": "United States",
        "card_name": persona.name,
        "card_number": "4242 4242 4242 4242",
        "expiry": "12/30",
        "cvc": "123",
    }


def field_kind(label: str) -> str | None:
    words = label.casefold()
    for needles, kind in FIELD_RULES:
        if all(n in words for n in needles):
            return kind
    return None


def words(text: str) -> set[str]:
    """Content words, lightly stemmed, so "returns" meets "return" and "shipping" "ship"."""
    found = set()
    for word in re.findall(r"[a-z0-9]+", text.casefold()):
        if word in STOP_WORDS or len(word) < 3:
            continue
        for suffix in ("ping", "ing", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        found.add(word)
    return found


# -- one turn ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """Something observable worth a reaction."""

    kind: str  # a key of ISSUE_LABELS
    subject: str  # where or what: a path, a field's visual label, an image's file name
    sentiment: str
    note: str  # what the persona says after the prefix
    penalty: int  # how much it lowers the ease of the step
    ref: str | None = None

    @property
    def prefix(self) -> str:
        return f"{ISSUE_LABELS[self.kind]} ({self.subject}):"


@dataclass(frozen=True)
class Turn:
    """One request, read."""

    request: TurnRequest
    page: Page
    memory: Memory
    rng: random.Random

    @property
    def persona(self) -> PersonaProfile:
        return self.request.persona

    @property
    def low_literacy(self) -> bool:
        return self.persona.digital_literacy == "low"

    def level(self, table: Mapping[str, Any], trait: str) -> Any:
        return table.get(trait, table["medium"])


@dataclass
class HeuristicPersona:
    """A deterministic offline persona (a `Model`): see the module docstring.

    Args:
        seed: Seeds the persona's random choices; the same seed and request give the same
            decision.
    """

    seed: int = 0

    @property
    def label(self) -> str:
        return LABEL

    async def decide(self, request: TurnRequest) -> Decision:
        """Choose one action for this turn from what the request shows."""
        return self.choose(request)

    def choose(self, request: TurnRequest) -> Decision:
        """`decide`, synchronously (it does no I/O)."""
        observation = request.observation
        page = read_snapshot(
            observation.url, observation.title, observation.snapshot, observation.text
        )
        # Seeded from the request, not from earlier calls: a restarted persona chooses the same.
        # The path, not the URL: a site on another port (a test's) gets the same choices.
        where = urlsplit(page.url)._replace(scheme="", netloc="").geturl()
        rng = random.Random(f"{self.seed}|{request.turn}|{where}")  # noqa: S311 - not crypto
        turn = Turn(request, page, remember(request), rng)
        problems = observe(turn)
        ease = rate(turn, problems)
        call, reason = next_move(turn, problems)
        offered = {tool.name for tool in request.tools}
        if offered and call[0] not in offered:
            reason = f"I wanted to {call[0]}, which is not offered now; {reason}"
            call = ("finish", {"success": False, "summary": reason})
        name, arguments = call
        return Decision(ToolCall(name, {**arguments, "ease": ease}), reason=reason)


def next_move(turn: Turn, problems: Sequence[Problem]) -> tuple[tuple[str, dict[str, Any]], str]:
    """The action and why, in the order of the module docstring."""
    page = turn.page
    if turn.request.must_finish:
        done = is_done(page)
        summary = (
            f"Reached '{done_heading(page)}' at {page.path}."
            if done
            else f"Ran out of turns on '{page.title}' ({page.path}) before finishing the task."
        )
        return ("finish", {"success": done, "summary": summary}), "My turns are used up."
    if is_done(page):
        summary = f"Reached '{done_heading(page)}': the task looks done."
        return ("finish", {"success": True, "summary": summary}), summary
    fresh = [p for p in problems if not turn.memory.reacted(p.prefix)]
    if fresh and not (len(fresh) == 1 and fresh[0].kind == "dead-end" and give_up(turn)):
        p = fresh[0]
        arguments: dict[str, Any] = {
            "sentiment": p.sentiment,
            "note": f"{p.prefix} {p.note}",
            "kind": REACTION_KINDS[p.kind],
        }
        if p.ref is not None:
            arguments["ref"] = p.ref
        return ("react", arguments), f"I noticed a problem worth reporting: {p.note}"
    if give_up(turn):
        summary = f"I gave up on '{page.title}' ({page.path}): too many problems on the way."
        return ("finish", {"success": False, "summary": summary}), summary
    if is_error_page(page):
        return recover(turn)  # what a person does on an error page: go back
    for step in (fill_next, submit_form, follow_best, search, recover):
        move = step(turn)
        if move is not None:
            return move
    raise AssertionError("recover always returns a move")  # pragma: no cover


def is_done(page: Page) -> bool:
    return any(DONE_PAGE.search(h) for h in (*page.headings, page.title))


def done_heading(page: Page) -> str:
    return next((h for h in (*page.headings, page.title) if DONE_PAGE.search(h)), page.title)


def give_up(turn: Turn) -> bool:
    limit: int = turn.level(GIVE_UP_AFTER_NEGATIVE, turn.persona.patience)
    return turn.memory.negative >= limit


# -- observing problems --------------------------------------------------------------------------


def observe(turn: Turn) -> list[Problem]:
    """Every problem the page and the last step show, the most pressing first."""
    page, found = turn.page, []
    outcome = turn.request.observation.last_outcome
    limit_ms: float = turn.level(SLOW_STEP_MS, turn.persona.patience)
    if outcome is not None and outcome.elapsed_ms > limit_ms:
        seconds = outcome.elapsed_ms / 1000
        sentiment = "frustrated" if turn.persona.patience == "low" else "neutral"
        note = f"I waited {seconds:.1f} s for the page after my last step; it felt stuck."
        found.append(Problem("slow", last_step(turn), sentiment, note, 2))
    if is_error_page(page):
        what = next((h for h in page.headings if ERROR_PAGE.search(h)), page.title)
        note = f"I followed a link and got '{what}' instead of the page I wanted."
        found.append(Problem("error-page", page.path, "angry", note, 3))
    fields = [e for e in page.elements if e.role in FIELD_ROLES | SEARCH_ROLES]
    labels = " ".join(e.name or e.context for e in fields)
    for alert in page.alerts:
        if ERROR_CODE.search(alert) and not (words(alert) & words(labels)):
            note = f"The page says '{alert}' but not what I did wrong or which field to fix."
            found.append(Problem("confusing-error", page.path, "confused", note, 3))
        else:
            note = f"The page told me '{alert}'."
            found.append(Problem("validation", page.path, "neutral", note, 1))
    for e in fields:
        if not e.name:
            near = e.context or "no visible text"
            note = f"A box next to '{near}' has no label, so I had to guess what goes in it."
            found.append(Problem("unlabeled", near, "confused", note, 1, e.ref))
    for e in page.elements:
        if e.role in IMAGE_ROLES and not e.name:
            what = e.detail or e.ref
            note = f"An image ({what}) has no description; a screen reader would say nothing."
            found.append(Problem("missing-alt", what, "neutral", note, 0, e.ref))
    if not is_error_page(page) and (stuck(turn) or not has_way_forward(turn)):
        note = f"Nothing on '{page.title}' seems to get me closer to: {turn.request.task}"
        found.append(Problem("dead-end", page.path, "frustrated", note, 2))
    return found


def last_step(turn: Turn) -> str:
    """What the persona did last, as it would name it: the control it used, or the page."""
    history = turn.request.history
    if not history:
        return turn.page.path
    last = history[-1]
    ref = str(last.call.arguments.get("ref", ""))
    element = read_text(last.observation_text).by_ref(ref) if ref else None
    if element is not None and element.name:
        return element.name
    return urlsplit(str(last.call.arguments.get("url", ""))).path or turn.page.path


def is_error_page(page: Page) -> bool:
    return bool(ERROR_PAGE.search(page.title)) or any(ERROR_PAGE.search(h) for h in page.headings)


def stuck(turn: Turn) -> bool:
    """Whether the last few moves (clicks, navigations) left the persona on this same URL."""
    moves = 0
    for url, move in zip(reversed(turn.memory.urls), reversed(turn.memory.moves), strict=True):
        if url != turn.page.url:
            break
        moves += move in ("click", "navigate", "press_key", "scroll")
    limit: int = turn.level(STUCK_MOVES, turn.persona.patience) - turn.low_literacy
    return moves >= limit


def has_way_forward(turn: Turn) -> bool:
    return bool(fillable(turn) or submit_button(turn) or best_candidates(turn) or search_box(turn))


def rate(turn: Turn, problems: Sequence[Problem]) -> int:
    """The Single Ease Question answer (1-7) for the step just done."""
    outcome = turn.request.observation.last_outcome
    ease = 7 if outcome is None or outcome.ok else 5
    ease -= sum(p.penalty for p in problems)
    ease -= turn.low_literacy
    return max(1, min(7, ease))


# -- moving ---------------------------------------------------------------------------------------

Move = tuple[tuple[str, dict[str, Any]], str]


def fillable(turn: Turn) -> list[tuple[Element, str]]:
    """The empty fields the persona has data for, with the value for each, in page order."""
    data = persona_data(turn.persona)
    guesses_unlabeled = not turn.low_literacy or bool(turn.page.alerts)
    found = []
    for e in turn.page.elements:
        if e.role not in FIELD_ROLES or e.value:
            continue
        label = e.name or (e.context if guesses_unlabeled else "")
        kind = field_kind(label)
        if kind is not None:
            found.append((e, data[kind]))
    return found


def fill_next(turn: Turn) -> Move | None:
    todo = fillable(turn)
    if not todo:
        return None
    element, value = todo[0]
    label = element.name or f"the box after '{element.context}'"
    return ("fill", {"ref": element.ref, "value": value}), f"Filling in {label} with my details."


def submit_button(turn: Turn) -> Element | None:
    fields = [e for e in turn.page.elements if e.role in FIELD_ROLES]
    if not fields or fillable(turn):
        return None
    buttons = [e for e in turn.page.elements if e.role == "button"]
    return next(
        (b for b in buttons if any(w in b.name.casefold() for w in SUBMIT_WORDS)),
        buttons[-1] if buttons else None,
    )


def submit_form(turn: Turn) -> Move | None:
    button = submit_button(turn)
    if button is None:
        return None
    reason = f"I filled in what I could, so I press '{button.name}'."
    return ("click", {"ref": button.ref}), reason


def wanted(turn: Turn) -> set[str]:
    """What the task is about: its content words without the ones that say what to do."""
    return words(turn.request.task) - words(" ".join(TASK_VERBS))


def on_wanted_page(turn: Turn) -> bool:
    """Whether this page is about the thing the task wants (its heading or title says so)."""
    about = words(" ".join((turn.page.title, *turn.page.headings)))
    return not wanted(turn) or bool(about & wanted(turn))


def score(turn: Turn, element: Element) -> int:
    task, goals = wanted(turn), words(" ".join(turn.persona.goals))
    name = words(element.name)
    points = TASK_WORD_WEIGHT * len(name & task) + GOAL_WORD_WEIGHT * len(name & goals)
    lowered = element.name.casefold()
    for phrase, bonus in FUNNEL_BONUS.items():
        if phrase in lowered and (phrase not in ADDING or on_wanted_page(turn)):
            points += bonus
    count = re.search(r"\((\d+)\)", element.name)
    if count and int(count.group(1)) > 0 and ("cart" in lowered or "basket" in lowered):
        points += FUNNEL_BONUS["checkout"] - 1
    points -= CLICKED_PENALTY * turn.memory.clicked.count(element.name)
    return points


def best_candidates(turn: Turn) -> list[tuple[int, Element]]:
    """Links and buttons that look like progress, best first (document order breaks ties)."""
    scored = [
        (score(turn, e), e)
        for e in turn.page.elements
        if e.role in CLICK_ROLES and e.name and e.name.casefold() != "search"
    ]
    return sorted((pair for pair in scored if pair[0] > 0), key=lambda pair: -pair[0])


def follow_best(turn: Turn) -> Move | None:
    chance: float = turn.level(EXPLORE_CHANCE, turn.persona.digital_literacy)
    clickable = [e for e in turn.page.elements if e.role in CLICK_ROLES and e.name]
    if clickable and turn.rng.random() < chance:
        pick = turn.rng.choice(clickable)
        return ("click", {"ref": pick.ref}), f"Not sure where to go; '{pick.name}' caught my eye."
    best = best_candidates(turn)
    if not best:
        return None
    element = best[0][1]
    return ("click", {"ref": element.ref}), f"'{element.name}' looks like the way to my goal."


def search_box(turn: Turn) -> Element | None:
    if turn.page.path in turn.memory.searched:
        return None
    return next((e for e in turn.page.elements if e.role in SEARCH_ROLES), None)


def search(turn: Turn) -> Move | None:
    box = search_box(turn)
    if box is None:
        return None
    # What a person types: the thing itself, in the task's own words and order.
    things = [w for w in re.findall(r"[\w-]+", turn.request.task) if words(w) & wanted(turn)]
    query = " ".join(things[:SEARCH_WORDS])
    reason = "Nothing here matches what I want, so I search for it."
    return ("type", {"ref": box.ref, "text": query, "submit": True}), reason


def recover(turn: Turn) -> Move:
    """Back to the last page that was not this one (and not an error), or to the start."""
    for url in reversed(turn.memory.urls):
        if url and url != turn.page.url and url not in turn.memory.error_urls:
            return ("navigate", {"url": url}), "This page is a dead end; going back."
    target = turn.request.target_url
    return ("navigate", {"url": target}), "I am lost; starting again from the beginning."
