"""The agent loop of one persona session's generation: observe, decide, act, persist.

Each turn takes an Understudy snapshot (its refs are the persona's only element handles), asks
the model for exactly one action, runs it through Understudy, and persists the turn before the
next one starts. `react` records the persona's reaction with the step, the URL and a screenshot;
`finish` ends the session. On the last turn of the budget only `finish` is offered, and a model
that still does something else is finished for it.

With an inbox (`inbox=`), `read_inbox` lists the session's mail and `wait_for_email` waits for a
new message; the outcome shows sender, subject, a short text and the numbered links, and names
no other address. A link from a message is followed (`navigate`) only when its origin is the
run's target origin; Understudy's `allowedOrigins` refuses any other navigation anyway
(`origin_not_allowed`). Without an inbox those two actions are not offered.

When the run has a credential, the model is told its name and user name and offered `log_in`
(refs of the two fields): the loop fills the user name and types the password with Understudy's
`fill_secret` from the session's vault secret (`_safety/_login.py`). The password never enters
the model's context, the turn, or an outcome summary.

Understudy's outcomes are honoured: a `command_outcome_unknown` (or a timed-out write) is never
sent again by the loop — the next turn re-reads the page and the model decides with what it sees.
When the browser or its session is gone, the loop raises `BrowserLost` and the orchestrator
starts a new generation on a fresh profile.

Exceptions:

    LoopError
    ├── BrowserLost        the session's browser, tab or lease is gone; start a new generation
    ├── ModelGaveUp        the model failed past the retry policy, or refused the task
    └── LoopCancelled      the run was cancelled between turns
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from synthetic_users._actions import ActionError, parse_action
from synthetic_users._llm._base import (
    Decision,
    Exchange,
    MalformedToolCall,
    ModelRateLimited,
    ModelRefused,
    ModelTimeout,
    ModelUnavailable,
    Observation,
    Outcome,
    PriorReaction,
    ToolCall,
    TurnRequest,
)
from synthetic_users._llm._prompt import system_prompt, tool_specs
from synthetic_users._safety._login import LoginUnavailable
from synthetic_users.generated.models import Reaction as WireReaction
from synthetic_users.generated.models import Turn as WireTurn
from understudy_connector import (
    BackendUnreachable,
    CommandFailed,
    CommandNotStarted,
    CommandOutcomeUnknown,
    CommandTimedOut,
    NoDeviceAvailable,
    OutcomeTimeout,
    ProblemError,
    SessionClosedError,
    SessionNotFound,
    SessionTerminal,
    SessionUnavailable,
    WritesBlocked,
    render_snapshot,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from synthetic_users._actions import Action
    from synthetic_users._inbox import InboxMessage
    from synthetic_users._llm._base import Model, PersonaProfile, ToolSpec
    from synthetic_users._safety._login import SessionLogin
    from understudy_connector import AsyncSession
    from understudy_connector.generated.models import WriteResult

HISTORY_TURNS = 8  # earlier exchanges of this generation kept in the model's context
MALFORMED_RETRIES = 2  # extra asks within one turn after an answer that was not one valid call
RATE_LIMIT_RETRIES = 5
RATE_LIMIT_WAIT_MAX_S = 60.0
TRANSIENT_RETRIES = 3  # timeouts and provider failures
TRANSIENT_BACKOFF_S = 2.0
SCROLL_STEP_PX = 600
SNAPSHOT_MAX_NODES = 600
INBOX_ACTIONS = frozenset({"read_inbox", "wait_for_email"})
INBOX_SHOWN = 5  # messages `read_inbox` lists (the newest)
INBOX_TEXT_CHARS = 400  # of each message's text in that list
WAIT_TEXT_CHARS = 1500  # of the text of the message `wait_for_email` returns
WAIT_FOR_EMAIL_DEFAULT_S = 30
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")

# Problems that mean the browser, its tab or the session's lease are gone: a new generation.
_LOST = (
    SessionTerminal,
    SessionNotFound,
    SessionUnavailable,
    NoDeviceAvailable,
    WritesBlocked,
    SessionClosedError,
    BackendUnreachable,
)
# Write outcomes the loop must not resend: the write may or may not have happened.
_UNKNOWN = (CommandOutcomeUnknown, CommandTimedOut, OutcomeTimeout)


class LoopError(Exception):
    """A generation of a persona session ended before `finish`."""


class BrowserLost(LoopError):
    """The session's browser, tab or lease is gone."""


class ModelGaveUp(LoopError):
    """The model failed past the retry policy, or refused the task."""


class LoopCancelled(LoopError):
    """The run was cancelled between turns."""


class Recorder(Protocol):
    """Where the loop persists what happened (the service's store)."""

    def record_turn(self, session_id: str, turn: dict[str, Any]) -> bool:
        """Persist one turn and the reactions in it; idempotent on (session, turn number)."""
        ...

    def is_cancelled(self, run_id: str) -> bool: ...


class Inbox(Protocol):
    """The session's mail, as the loop reads it (`_inbox.Mailbox`)."""

    def messages(self, session_id: str, *, after: int = 0) -> Sequence[InboxMessage]: ...

    async def wait(
        self,
        session_id: str,
        *,
        after: int,
        timeout_s: float,
        subject_contains: str | None = None,
    ) -> InboxMessage | None: ...


class Screenshots(Protocol):
    def save(self, session_id: str, name: str, png: bytes) -> None:
        """Store `screenshots/<name>` of the session."""
        ...


@dataclass(frozen=True)
class Finish:
    """How the persona ended the session."""

    success: bool
    summary: str
    forced: bool = False  # the loop finished for a model that did not, at the end of the budget


@dataclass
class Generation:
    """What one generation of a persona session starts from."""

    run_id: str
    session_id: str
    persona: PersonaProfile
    task: str
    target_url: str
    turn_budget: int
    generation: int
    next_turn: int  # 1-based, across generations
    prior_reactions: list[PriorReaction] = field(default_factory=list)


class PersonaLoop:
    """Runs one generation of a persona session on an open Understudy session."""

    def __init__(
        self,
        model: Model,
        session: AsyncSession,
        recorder: Recorder,
        screenshots: Screenshots,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Any] = asyncio.sleep,
        inbox: Inbox | None = None,
        login: SessionLogin | None = None,
    ) -> None:
        self._login = login
        self._model = model
        self._session = session
        self._recorder = recorder
        self._screenshots = screenshots
        self._clock = clock
        self._sleep = sleep
        self._inbox = inbox
        self._mail_seen = 0  # the newest message id shown to the model
        self._mail_links: set[str] = set()  # every link shown from mail

    async def run(self, gen: Generation) -> Finish:
        """Take turns until the persona finishes (or the budget ends it).

        Raises:
            BrowserLost: start a new generation.
            ModelGaveUp: the session fails with the error as its reason.
            LoopCancelled: the run was cancelled.
        """
        history: list[Exchange] = []
        last: Outcome | None = None
        prompt = system_prompt(gen.persona, gen.task, gen.target_url, gen.turn_budget)
        if self._login is not None:
            prompt += _login_note(self._login)
        # Every generation starts on a fresh browser profile, so at the target again.
        last = await self._act_navigate(gen.target_url)
        if gen.next_turn > 1 and last.ok:
            last = replace(
                last,
                summary=(
                    f"Your browser was restarted and opened {gen.target_url} again: what you "
                    "did on the site before is gone (a new cart, not signed in), but you "
                    "remember what you noted."
                ),
            )
        for turn in range(gen.next_turn, gen.turn_budget + 1):
            if self._recorder.is_cancelled(gen.run_id):
                raise LoopCancelled(gen.run_id)
            observation = await self._observe(last)
            must_finish = turn == gen.turn_budget
            started = self._clock()
            request = TurnRequest(
                persona=gen.persona,
                task=gen.task,
                target_url=gen.target_url,
                turn=turn,
                turn_budget=gen.turn_budget,
                observation=observation,
                history=tuple(history[-HISTORY_TURNS:]),
                tools=_offered(
                    must_finish,
                    inbox=self._inbox is not None,
                    can_log_in=self._login is not None,
                ),
                prior_reactions=tuple(gen.prior_reactions),
                must_finish=must_finish,
                system_prompt=prompt,
            )
            decision, action = await self._decide(request)
            if must_finish and action.name != "finish":
                action = parse_action(
                    {
                        "name": "finish",
                        "arguments": {
                            "success": False,
                            "summary": "The turn budget ran out before the persona finished.",
                            "ease": action.ease,
                        },
                    }
                )
                forced = True
            else:
                forced = False
            outcome, reactions = await self._execute(gen, turn, action, observation)
            turn_record = WireTurn.model_validate(
                {
                    "turn": turn,
                    "generation": gen.generation,
                    "started_at": _iso(started),
                    "ended_at": _iso(self._clock()),
                    "observation": {"url": observation.url, "title": observation.title[:1000]},
                    "action": action.as_dict(),
                    "reason": (decision.reason or "")[:4000] or None,
                    "outcome": {
                        "ok": outcome.ok,
                        "code": outcome.code,
                        "summary": outcome.summary[:2000],
                        "elapsed_ms": round(outcome.elapsed_ms, 1),
                    },
                    "reactions": reactions,
                    "usage": (
                        {
                            "input_tokens": decision.usage.input_tokens,
                            "output_tokens": decision.usage.output_tokens,
                        }
                        if decision.usage is not None
                        else None
                    ),
                }
            )
            self._recorder.record_turn(
                gen.session_id, turn_record.model_dump(mode="json", exclude_none=True)
            )
            for reaction in reactions:
                gen.prior_reactions.append(
                    PriorReaction(turn, reaction["sentiment"], reaction["note"], reaction["url"])
                )
            if action.name == "finish":
                args = action.arguments
                return Finish(bool(args["success"]), str(args["summary"]), forced=forced)
            history.append(Exchange(observation.text, decision.call, decision.reason, outcome))
            last = outcome
        raise AssertionError("the last turn of the budget always finishes")  # pragma: no cover

    async def _decide(self, request: TurnRequest) -> tuple[Decision, Action]:
        """Ask the model under the retry policy; returns the decision and its valid action."""
        malformed = rate_limited = transient = 0
        attempts = 0
        while True:
            attempts += 1
            try:
                decision = await self._model.decide(request)
                return decision, parse_action(_as_call(decision.call))
            except (MalformedToolCall, ActionError) as exc:
                malformed += 1
                if malformed > MALFORMED_RETRIES:
                    raise ModelGaveUp(
                        f"the model gave no valid action {attempts} times: {exc}"
                    ) from exc
                feedback = Outcome(
                    ok=False,
                    code="malformed_tool_call",
                    summary=f"Your last answer was not one valid action: {exc}. Call one tool.",
                )
                request = replace(
                    request, observation=replace(request.observation, last_outcome=feedback)
                )
            except ModelRateLimited as exc:
                rate_limited += 1
                if rate_limited > RATE_LIMIT_RETRIES:
                    raise ModelGaveUp(f"the model stayed rate limited: {exc}") from exc
                wait = exc.retry_after_s if exc.retry_after_s is not None else 2.0**rate_limited
                await self._sleep(min(max(wait, 0.0), RATE_LIMIT_WAIT_MAX_S))
            except (ModelTimeout, ModelUnavailable) as exc:
                transient += 1
                if transient > TRANSIENT_RETRIES:
                    raise ModelGaveUp(f"the model was unavailable: {exc}") from exc
                await self._sleep(TRANSIENT_BACKOFF_S * transient)
            except ModelRefused as exc:
                raise ModelGaveUp(f"the model refused the task: {exc}") from exc

    async def _observe(self, last: Outcome | None) -> Observation:
        try:
            snapshot = await self._session.snapshot(max_nodes=SNAPSHOT_MAX_NODES, format="both")
        except _LOST as exc:
            raise BrowserLost(f"snapshot: {exc}") from exc
        return Observation(
            url=snapshot.url,
            title=snapshot.title,
            snapshot=snapshot,
            text=render_snapshot(snapshot),
            last_outcome=last,
        )

    async def _act_navigate(self, url: str) -> Outcome:
        try:
            return await self._write(
                "navigate", lambda: self._session.navigate(url), f"opened {url}"
            )
        except _LOST as exc:
            raise BrowserLost(f"navigate: {exc}") from exc

    async def _write(self, name: str, call: Callable[[], Any], done: str) -> Outcome:
        started = time.perf_counter()

        def elapsed() -> float:
            return (time.perf_counter() - started) * 1000

        try:
            result: WriteResult = await call()
        except _UNKNOWN as exc:
            return Outcome(
                False,
                f"The result of {name} is unknown (it may or may not have happened); "
                "look at the page again before doing anything else.",
                code=getattr(exc, "code", None) or "command_outcome_unknown",
                elapsed_ms=elapsed(),
            )
        except CommandNotStarted as exc:
            return Outcome(
                False, f"{name} did not start: {exc}", code=exc.code, elapsed_ms=elapsed()
            )
        except CommandFailed as exc:
            return Outcome(
                False,
                f"{name} failed ({exc.code}): {exc.message}",
                code=exc.code,
                elapsed_ms=elapsed(),
            )
        except _LOST as exc:
            raise BrowserLost(f"{name}: {exc}") from exc
        except ProblemError as exc:
            return Outcome(
                False,
                f"{name} was refused ({exc.code}): {exc}",
                code=exc.code,
                elapsed_ms=elapsed(),
            )
        summary = done
        if result.blocked_navigations:
            origins = ", ".join(sorted({b.origin for b in result.blocked_navigations}))
            summary += f"; the page tried to leave the study's site ({origins}) and was stopped"
        return Outcome(True, summary, elapsed_ms=elapsed())

    async def _execute(
        self, gen: Generation, turn: int, action: Action, observation: Observation
    ) -> tuple[Outcome, list[dict[str, Any]]]:
        args = action.arguments
        s = self._session
        match action.name:
            case "click":
                ref = args["ref"]
                return await self._write(
                    "click", lambda: s.click(ref), f"clicked {_name(observation, ref)}"
                ), []
            case "type":
                ref, text, submit = args["ref"], args["text"], bool(args.get("submit", False))
                what = f"typed into {_name(observation, ref)}" + (
                    " and pressed Enter" if submit else ""
                )
                return await self._write("type", lambda: s.type(ref, text, submit=submit), what), []
            case "fill":
                ref, value = args["ref"], args["value"]
                return await self._write(
                    "fill", lambda: s.fill(ref, value), f"filled {_name(observation, ref)}"
                ), []
            case "select_option":
                ref, values = args["ref"], list(args["values"])
                return await self._write(
                    "select_option",
                    lambda: s.select_option(ref, values),
                    f"selected {values} in {_name(observation, ref)}",
                ), []
            case "press_key":
                key = args["key"]
                return await self._write(
                    "press_key", lambda: s.press_key(key), f"pressed {key}"
                ), []
            case "scroll":
                ref = args.get("ref")
                if ref is not None:
                    return await self._write(
                        "scroll",
                        lambda: s.scroll(ref=ref),
                        f"scrolled to {_name(observation, ref)}",
                    ), []
                dy = SCROLL_STEP_PX if args["direction"] == "down" else -SCROLL_STEP_PX
                return await self._write(
                    "scroll", lambda: s.scroll(delta_y=dy), f"scrolled {args['direction']}"
                ), []
            case "navigate":
                url = args["url"]
                refused = self._off_site_link(gen, url)
                if refused is not None:
                    return refused, []
                outcome = await self._write("navigate", lambda: s.navigate(url), f"opened {url}")
                if outcome.code == "origin_not_allowed":
                    outcome = replace(
                        outcome,
                        summary=f"{url} is not on the site under study "
                        f"({_origin(gen.target_url)}); the browser refused to open it",
                    )
                return outcome, []
            # -- the inbox --------------------------------------------------------------------
            case "read_inbox":
                return self._read_inbox(gen), []
            case "wait_for_email":
                return await self._wait_for_email(gen, args), []
            case "react":
                reaction = await self._react(gen, turn, args, observation)
                return Outcome(True, f"noted: {args['sentiment']}"), [reaction]
            case "finish":
                return Outcome(
                    True, "finished" + (" (task done)" if args["success"] else " (gave up)")
                ), []
            case "log_in":
                return await self._log_in(
                    args["username_ref"], args["password_ref"], observation
                ), []
        raise ActionError(
            f"unknown action {action.name!r}"
        )  # pragma: no cover - parse_action guards

    # -- the inbox ------------------------------------------------------------------------------

    def _read_inbox(self, gen: Generation) -> Outcome:
        if self._inbox is None:
            return Outcome(False, "You have no email inbox in this study.", code="no_inbox")
        messages = list(self._inbox.messages(gen.session_id))
        if not messages:
            return Outcome(True, f"Your inbox ({gen.persona.email or 'no address'}) is empty.")
        shown = messages[-INBOX_SHOWN:]
        lines = [
            f"Your inbox has {len(messages)} message(s)"
            + (f"; the newest {len(shown)}, oldest first:" if len(shown) < len(messages) else ":")
        ]
        lines.extend(self._mail_text(gen, m, INBOX_TEXT_CHARS) for m in shown)
        self._mail_seen = max(self._mail_seen, messages[-1].message_id)
        return Outcome(True, "\n".join(lines))

    async def _wait_for_email(self, gen: Generation, args: dict[str, Any]) -> Outcome:
        if self._inbox is None:
            return Outcome(False, "You have no email inbox in this study.", code="no_inbox")
        timeout = int(args.get("timeout_s", WAIT_FOR_EMAIL_DEFAULT_S))
        subject = args.get("subject_contains")
        started = time.perf_counter()
        message = await self._inbox.wait(
            gen.session_id, after=self._mail_seen, timeout_s=timeout, subject_contains=subject
        )
        elapsed = (time.perf_counter() - started) * 1000
        if message is None:
            which = f" with {subject!r} in its subject" if subject else ""
            return Outcome(
                False,
                f"No new email{which} arrived within {timeout} s.",
                code="email_timeout",
                elapsed_ms=elapsed,
            )
        self._mail_seen = max(self._mail_seen, message.message_id)
        return Outcome(
            True,
            "A new email arrived:\n" + self._mail_text(gen, message, WAIT_TEXT_CHARS),
            elapsed_ms=elapsed,
        )

    def _mail_text(self, gen: Generation, message: InboxMessage, limit: int) -> str:
        """One message as the model reads it; no address but the sender's and its own."""
        keep = {message.mail_from.casefold(), gen.persona.email.casefold()}
        text = _EMAIL.sub(
            lambda m: m.group(0) if m.group(0).casefold() in keep else "[an email address]",
            message.text,
        )
        text = " ".join(text.split()) if len(text) > limit else text.strip()
        if len(text) > limit:
            text = text[: limit - 1].rstrip() + "…"
        received = datetime.fromtimestamp(message.received_at, UTC).strftime("%H:%M:%S UTC")
        lines = [
            f"- From {message.mail_from or 'an unknown sender'}, received {received}, "
            f"subject {message.subject or '(no subject)'!r}:",
            "  " + (text.replace("\n", "\n  ") or "(no text)"),
        ]
        for number, link in enumerate(message.links, 1):
            self._mail_links.add(link)
            lines.append(f"  link {number}: {link}")
        return "\n".join(lines)

    def _off_site_link(self, gen: Generation, url: str) -> Outcome | None:
        """Refuse a link from mail whose origin is not the run's target origin."""
        if url not in self._mail_links or _origin(url) == _origin(gen.target_url):
            return None
        return Outcome(
            False,
            f"That link from your email leads off the site under study ({_origin(url)}); "
            f"only links to {_origin(gen.target_url)} are followed.",
            code="link_off_site",
        )

    # -- the credential -------------------------------------------------------------------------

    async def _log_in(
        self, username_ref: str, password_ref: str, observation: Observation
    ) -> Outcome:
        """Fill the user name, then the password from the vault; neither goes into the outcome."""
        login, s = self._login, self._session
        if login is None:
            return Outcome(
                False,
                "This study gave you no account; log_in is not available.",
                code="no_credential",
            )
        username = login.username
        filled = await self._write(
            "log_in", lambda: s.fill(username_ref, username), "filled the user name"
        )
        if not filled.ok:
            return filled
        try:
            ref = await login.vault_ref()
        except LoginUnavailable as exc:
            return Outcome(
                False, f"log_in could not type the password: {exc}", code="credential_unavailable"
            )
        typed = await self._write(
            "log_in", lambda: s.fill_secret(password_ref, ref), "typed the password"
        )
        if not typed.ok:
            return typed
        return replace(
            typed,
            summary=(
                f"filled {_name(observation, username_ref)} with the user name and "
                f"{_name(observation, password_ref)} with the password of the account "
                f"{login.name!r}; now press the page's log-in button"
            ),
            elapsed_ms=filled.elapsed_ms + typed.elapsed_ms,
        )

    async def _react(
        self, gen: Generation, turn: int, args: dict[str, Any], observation: Observation
    ) -> dict[str, Any]:
        name = f"step-{turn:04d}.png"
        saved = True
        try:
            shot = await self._session.screenshot(format="png")
            self._screenshots.save(gen.session_id, name, base64.b64decode(shot.data))
        except _LOST as exc:
            raise BrowserLost(f"screenshot: {exc}") from exc
        except CommandFailed:
            saved = False  # a reaction without a picture is still a reaction
        reaction = WireReaction.model_validate(
            {
                "step": turn,
                "generation": gen.generation,
                "sentiment": args["sentiment"],
                "note": args["note"],
                "url": observation.url,
                "ref": args.get("ref"),
                "kind": args.get("kind"),
                "element": _name(observation, args["ref"])[:1100] if args.get("ref") else None,
                "screenshot": name if saved else None,
                "created_at": _iso(self._clock()),
            }
        ).model_dump(mode="json", exclude_none=True)
        return reaction


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _offered(
    must_finish: bool, *, inbox: bool = False, can_log_in: bool = False
) -> Sequence[ToolSpec]:
    tools = tool_specs()
    if must_finish:
        return [t for t in tools if t.name == "finish"]
    hidden = set() if inbox else set(INBOX_ACTIONS)
    if not can_log_in:
        hidden.add("log_in")  # offered only when the run has a credential
    return [t for t in tools if t.name not in hidden]


def _origin(url: str) -> str:
    """`scheme://host[:port]`, lower case, without the scheme's default port."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def _login_note(login: SessionLogin) -> str:
    return (
        f"\n\nThe study gave you an account on this site, {login.name!r}, with the user name "
        f"{login.username!r}. When the site asks you to log in, call log_in with the refs of "
        "the user-name and password fields: both are filled for you (you never see the "
        "password), then press the log-in button."
    )


def _as_call(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "arguments": dict(call.arguments)}


def _name(observation: Observation, ref: str) -> str:
    """How a person would name the element `ref`: its role and accessible name."""
    for node in observation.snapshot.nodes:
        if node.ref == ref:
            return f"{node.role} {node.name!r}" if node.name else f"an unnamed {node.role}"
    return f"element {ref}"
