"""The persona's action catalogue, and the check every model answer passes before it runs.

A model's tool call is data from outside: its name must be one of the catalogue, its arguments
exactly the ones that action takes, with the right types. `parse_action` turns a call into an
`Action` or raises `ActionError` naming what is wrong, so the loop can tell the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

SENTIMENTS: Final = ("delighted", "satisfied", "neutral", "confused", "frustrated", "angry")
EASE_MIN, EASE_MAX = 1, 7
MAX_TEXT = 2_000  # characters in a typed value, a note or a summary
MAX_VALUES = 20

_STR, _BOOL, _LIST = "string", "boolean", "array of strings"

# action -> {argument: (type, required)}; every action also takes the required `ease`.
CATALOGUE: Final[dict[str, dict[str, tuple[str, bool]]]] = {
    "click": {"ref": (_STR, True)},
    "type": {"ref": (_STR, True), "text": (_STR, True), "submit": (_BOOL, False)},
    "fill": {"ref": (_STR, True), "value": (_STR, True)},
    "select_option": {"ref": (_STR, True), "values": (_LIST, True)},
    "press_key": {"key": (_STR, True)},
    "scroll": {"direction": (_STR, True), "ref": (_STR, False)},
    "navigate": {"url": (_STR, True)},
    "react": {"sentiment": (_STR, True), "note": (_STR, True), "ref": (_STR, False)},
    "finish": {"success": (_BOOL, True), "summary": (_STR, True)},
}
_ENUMS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("scroll", "direction"): ("up", "down"),
    ("react", "sentiment"): SENTIMENTS,
}


class ActionError(ValueError):
    """A model's answer is not a valid action; the message says what to fix."""


@dataclass(frozen=True)
class Action:
    """One validated action: its name, its arguments (without `ease`) and the step's ease."""

    name: str
    arguments: dict[str, Any]
    ease: int

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": {**self.arguments, "ease": self.ease}}


def _check(kind: str, value: object) -> bool:
    if kind == _STR:
        return isinstance(value, str) and 0 < len(value) <= MAX_TEXT
    if kind == _BOOL:
        return isinstance(value, bool)
    return (
        isinstance(value, list)
        and 0 < len(value) <= MAX_VALUES
        and all(isinstance(v, str) and len(v) <= MAX_TEXT for v in value)
    )


def parse_action(call: dict[str, Any]) -> Action:
    """Validate a tool call `{name, arguments}`.

    Raises:
        ActionError: unknown action, a missing, extra or mistyped argument, or no valid `ease`.
    """
    name = call.get("name")
    if not isinstance(name, str) or name not in CATALOGUE:
        raise ActionError(f"unknown action {name!r}; use one of {', '.join(CATALOGUE)}")
    arguments = call.get("arguments")
    if not isinstance(arguments, dict):
        raise ActionError(f"{name}: arguments must be an object")
    spec = CATALOGUE[name]
    extra = sorted(set(arguments) - set(spec) - {"ease"})
    if extra:
        raise ActionError(f"{name}: unknown argument(s) {', '.join(extra)}")
    ease = arguments.get("ease")
    if not isinstance(ease, int) or isinstance(ease, bool) or not EASE_MIN <= ease <= EASE_MAX:
        raise ActionError(f"{name}: ease must be an integer from {EASE_MIN} to {EASE_MAX}")
    clean: dict[str, Any] = {}
    for arg, (kind, required) in spec.items():
        if arg not in arguments or arguments[arg] is None:
            if required:
                raise ActionError(f"{name}: missing argument {arg} ({kind})")
            continue
        value = arguments[arg]
        if not _check(kind, value):
            raise ActionError(f"{name}: {arg} must be a non-empty {kind}")
        allowed = _ENUMS.get((name, arg))
        if allowed is not None and value not in allowed:
            raise ActionError(f"{name}: {arg} must be one of {', '.join(allowed)}")
        clean[arg] = value
    return Action(name, clean, ease)
