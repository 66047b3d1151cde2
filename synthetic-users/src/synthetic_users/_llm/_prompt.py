"""What every LLM adapter tells the model, whatever the provider: prompt texts and the actions.

The adapters (`_openai`, `_anthropic`) differ only in how they put these pieces on the wire:

- `system_prompt` makes the model *be* the persona: it speaks as itself, its digital literacy and
  patience shape what it does, it reacts honestly, rates each step's ease and finishes with a
  verdict. It never sees or asks for a password (Understudy's snapshots never report the values of
  password fields, so no secret reaches these texts).
- `observation_message` is the user turn of one step: where the persona is, what its last action
  did, what it noted before, how many steps are left and the snapshot text.
- `tool_specs` is the action catalogue as tools, generated from the spec's `action.json`.
- `offered_tools` is what one turn offers: everything, or only `finish` once the budget is spent.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Final

from synthetic_users._llm._base import ToolSpec
from synthetic_users.generated.catalog import ACTION_TOOLS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from synthetic_users._llm._base import Outcome, PersonaProfile, PriorReaction, TurnRequest

FINISH: Final = "finish"
"""The one action that ends a session, and the only one offered once the budget is spent."""

SENTIMENTS: Final = ("delighted", "satisfied", "neutral", "confused", "frustrated", "angry")

FINISH_ONLY_INSTRUCTION: Final = (
    "You have used all your steps. Call `finish` now, with `success` (did you get the task "
    "done?) and a `summary` of how it went; no other action is allowed."
)

_LITERACY: Final = {
    "low": (
        "You are not confident with computers. You read slowly and take labels literally, you "
        "are unsure what icons and jargon mean, you rarely type addresses or use keyboard "
        "shortcuts, and you get lost when a page changes in a way you did not expect."
    ),
    "medium": (
        "You use websites regularly. You follow the usual conventions (menus, search, a cart, a "
        "form with a button at the end) but you do not go looking for settings or tricks."
    ),
    "high": (
        "You are at ease with technology. You scan pages quickly, use search, the keyboard and "
        "the address bar, and you notice sloppy details and needless steps."
    ),
}

_PATIENCE: Final = {
    "low": (
        "You have little patience. Slow pages, extra steps, pop-ups and unclear errors annoy you "
        "quickly, and after a few failed attempts you give up (finish with success false)."
    ),
    "medium": (
        "You give a page a fair chance, but problems that repeat frustrate you, and you give up "
        "when nothing seems to work."
    ),
    "high": (
        "You are patient. You try several ways before you give up, though you still notice and "
        "say what made it hard."
    ),
}

_DEVICE: Final = {
    "desktop": "You are on a computer with a mouse and a keyboard.",
    "mobile": "You are on a phone: the screen is small, you scroll a lot and typing is tedious.",
}


def system_prompt(persona: PersonaProfile, task: str, target_url: str, turn_budget: int) -> str:
    """The system prompt that makes the model act as `persona` doing `task`.

    Args:
        persona: who the model is.
        task: what the persona came to do, in the customer's words.
        target_url: where the session starts.
        turn_budget: how many steps the persona has, `finish` included.

    Returns:
        Plain text, the same for every turn of a session (so providers can cache it).
    """
    about = [f"You are {persona.name}."]
    if persona.background:
        about.append(persona.background.strip())
    if persona.goals:
        about.append("What you want: " + "; ".join(goal.strip() for goal in persona.goals) + ".")
    about.append(_trait("digital literacy", persona.digital_literacy, _LITERACY))
    about.append(_trait("patience", persona.patience, _PATIENCE))
    about.append(_DEVICE.get(persona.device, f"You use a {persona.device} device."))
    about.append(f"Your language and region: {persona.locale}.")
    if persona.email:
        about.append(
            f"Your email address is {persona.email}: give it whenever a site asks for your "
            "email. Mail sent to it arrives in your inbox: `read_inbox` shows what came so far, "
            "`wait_for_email` waits for a new message (a confirmation, a code); open a link from "
            "a message with `navigate` and its address."
        )
    return "\n\n".join(
        [
            "You are a real person using a website, taking part in a usability study. You are "
            "not an assistant and not a tester: behave, think and feel as the person below "
            "would, and speak as yourself (first person) in every note and summary.",
            " ".join(about),
            f"Your task: {task.strip()}\nYou start at {target_url}. You have at most "
            f"{turn_budget} steps.",
            "How each step works:\n"
            "- You see the page as a list of its elements, one per line. An element you can act "
            "on has a ref in brackets, like [g2e14]; refs are the only way to point at an "
            "element, and only refs from the latest page are valid.\n"
            "- Call exactly one tool per step. Every tool takes `ease`: how easy the step you "
            "just did felt, from 1 (very difficult) to 7 (very easy).\n"
            "- Do what you would really do, at your own level of skill and patience; do not "
            "use knowledge of how websites are built that you would not have.\n"
            "- Be honest about how it feels. Whenever something is confusing, slow, broken, "
            "surprising or pleasant, call `react` with a sentiment and a short note in your own "
            "words (point at the element with its ref when there is one). Do not be polite "
            "about problems, and do not invent problems you did not meet.\n"
            "- You never see, guess, type or ask for a password or any other secret. If a step "
            "needs one and it is not filled in already, say so with `react` and go on or "
            "finish.\n"
            "- When you have done the task, or when you would give up, call `finish` with "
            "`success` (true only if the task is really done) and a short `summary` of what "
            "happened and how it felt. When your steps run out you must call `finish`.",
        ]
    )


def _trait(what: str, value: str, texts: dict[str, str]) -> str:
    # An unknown level (a newer API value) still reaches the model, in its own words.
    return texts.get(value, f"Your {what} is {value}.")


def observation_message(request: TurnRequest) -> str:
    """The user turn of one step: position, last outcome, earlier reactions, budget, the page.

    Args:
        request: the turn; its observation's `text` is the snapshot rendered for a model.

    Returns:
        Plain text. Later turns replay the step as its `Exchange.observation_text` instead.
    """
    observation = request.observation
    lines = [
        f"Step {request.turn} of {request.turn_budget}.",
        f"Page: {observation.title or '(no title)'} ({observation.url})",
    ]
    if observation.last_outcome is not None:
        lines.append(f"Your last action: {outcome_text(observation.last_outcome)}")
    if request.prior_reactions:
        lines.append("What you noted so far:")
        lines.extend(_reaction_line(reaction) for reaction in request.prior_reactions)
    if request.must_finish:
        lines.append(FINISH_ONLY_INSTRUCTION)
    lines.append("")
    lines.append("What you see:")
    lines.append(observation.text)
    return "\n".join(lines)


def _reaction_line(reaction: PriorReaction) -> str:
    return f'- step {reaction.step}, {reaction.url}: {reaction.sentiment}: "{reaction.note}"'


def outcome_text(outcome: Outcome) -> str:
    """One line saying what an action did, as a tool result the model reads.

    The time is included because a slow page is part of what the persona experiences.
    """
    status = "done" if outcome.ok else f"failed ({outcome.code or 'error'})"
    text = f"{status}: {outcome.summary}"
    if outcome.elapsed_ms >= 1000:
        text += f" (the page took {outcome.elapsed_ms / 1000:.1f} s)"
    return text


def offered_tools(request: TurnRequest) -> Sequence[ToolSpec]:
    """The tools one turn offers: all of `request.tools`, or only `finish` when `must_finish`.

    When the request's tools lack `finish` on a must-finish turn, the catalogue's `finish` is
    offered: the loop must be able to end the session.
    """
    if not request.must_finish:
        return request.tools
    finish = [tool for tool in request.tools if tool.name == FINISH]
    return finish or [tool for tool in tool_specs() if tool.name == FINISH]


def tool_specs() -> list[ToolSpec]:
    """The persona's action catalogue as tools: one `ToolSpec` per action of the spec.

    Generated from `spec/synthetic-users/schemas/action.json` (codegen's `ACTION_TOOLS`): every
    schema is a closed object whose required fields include `ease`, with the limits the loop's
    action check (`_actions.parse_action`, the same spec's models) enforces, so a call the schema
    admits is one the loop runs.

    Returns:
        A new list each time (callers may filter it), in the spec's order.
    """
    return [
        ToolSpec(tool["name"], tool["description"], copy.deepcopy(tool["parameters"]))
        for tool in ACTION_TOOLS
    ]
