"""The one small interface every model behind a persona implements.

A persona session's agent loop calls `Model.decide` once per turn with everything the persona
knows (who it is, the task, what it did so far, what the page shows now) and gets back exactly
one tool call (an action) plus, when the model gives them, its stated reason and token usage.
The loop validates the call's arguments, runs it through Understudy and records the turn; the
model never sees a secret, only refs as handles to elements.

Exceptions (all `ModelError`):

    ModelError
    ├── ModelRateLimited    the provider said 429; `retry_after_s` when it said how long
    ├── ModelTimeout        no answer within the adapter's timeout
    ├── ModelRefused        the model declined the task (a refusal, not a tool call)
    ├── MalformedToolCall   the answer was not one well-formed call of an offered tool
    └── ModelUnavailable    any other provider failure (5xx, connection refused, bad key)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from understudy_connector.generated.models import SnapshotResult


@dataclass(frozen=True)
class PersonaProfile:
    """Who the persona is: data, not code (the API's Persona, as the model reads it)."""

    name: str
    background: str = ""
    goals: Sequence[str] = ()
    digital_literacy: str = "medium"  # low | medium | high
    patience: str = "medium"  # low | medium | high
    device: str = "desktop"  # desktop | mobile
    locale: str = "en-US"
    email: str = ""  # the session's own inbox address, when the study gives it one


@dataclass(frozen=True)
class ToolSpec:
    """One action the model may call: name, what it does, and a JSON Schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """The model's choice: one tool by name with its arguments (not yet validated)."""

    name: str
    arguments: Mapping[str, Any]
    call_id: str = ""  # the provider's id for the call, echoed back with its result


@dataclass(frozen=True)
class Outcome:
    """What happened when the loop ran the previous action."""

    ok: bool
    summary: str  # one line for the model: "clicked 'Add to cart'", "error element_not_found: …"
    code: str | None = None  # Understudy's or the loop's stable error code when not ok
    elapsed_ms: float = 0.0  # from sending the action until the page settled


@dataclass(frozen=True)
class Observation:
    """What the persona sees at the start of a turn."""

    url: str
    title: str
    snapshot: SnapshotResult  # Understudy's snapshot; its refs are the only element handles
    text: str  # the snapshot rendered for a model (`render_snapshot`)
    last_outcome: Outcome | None = None  # None on the first turn of a generation


@dataclass(frozen=True)
class Exchange:
    """One earlier turn of this generation, as it stays in the model's context."""

    observation_text: str
    call: ToolCall
    reason: str | None
    outcome: Outcome


@dataclass(frozen=True)
class PriorReaction:
    """A reaction recorded earlier (in this or a crashed generation), as the model is told it."""

    step: int
    sentiment: str
    note: str
    url: str


@dataclass(frozen=True)
class TurnRequest:
    """Everything `decide` gets for one turn."""

    persona: PersonaProfile
    task: str
    target_url: str
    turn: int  # 1-based, across generations
    turn_budget: int
    observation: Observation
    history: Sequence[Exchange]  # this generation's earlier turns, oldest first
    tools: Sequence[ToolSpec]
    prior_reactions: Sequence[PriorReaction] = ()
    must_finish: bool = False  # the budget is spent: only `finish` is accepted
    system_prompt: str = ""  # built by the loop from the persona and task, for LLM adapters


@dataclass(frozen=True)
class Usage:
    """Tokens the provider reported for one call."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Decision:
    """One turn's answer."""

    call: ToolCall
    reason: str | None = None  # the model's stated reason, when it gave one (text beside the call)
    usage: Usage | None = None


class Model(Protocol):
    """A persona's mind. Implementations: OpenAI-compatible, Anthropic, the heuristic persona."""

    @property
    def label(self) -> str:
        """What the reports call this model (`openai:gpt-4o-mini`, `heuristic-persona v1 …`)."""
        ...

    async def decide(self, request: TurnRequest) -> Decision:
        """Choose exactly one action for this turn.

        Raises:
            ModelError: one of its subclasses; the loop decides whether to wait, retry or stop.
        """
        ...


class ModelError(Exception):
    """A model could not give a usable decision."""

    # Tokens the provider billed for the failed call (a refusal or malformed call costs as much
    # as a good one), when it reported them; None otherwise.
    usage: Usage | None = None


class ModelRateLimited(ModelError):
    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ModelTimeout(ModelError):
    pass


class ModelRefused(ModelError):
    pass


class MalformedToolCall(ModelError):
    def __init__(self, message: str, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class ModelUnavailable(ModelError):
    pass


@dataclass
class ScriptedModel:
    """A model that plays back a fixed list of decisions (for tests of the loop and reports)."""

    decisions: list[Decision]
    label: str = "scripted"
    requests: list[TurnRequest] = field(default_factory=list)

    async def decide(self, request: TurnRequest) -> Decision:
        self.requests.append(request)
        if not self.decisions:
            return Decision(
                ToolCall("finish", {"success": False, "summary": "script ended", "ease": 4})
            )
        return self.decisions.pop(0)
