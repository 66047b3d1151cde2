"""The check every model answer passes before it runs.

A model's tool call is data from outside: its name must be one of the catalogue and its
arguments exactly the ones that action takes, as `spec/synthetic-users/schemas/action.json`
says. `parse_action` validates a call against the generated models and returns an `Action`, or
raises `ActionError` naming what is wrong, so the loop can tell the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from synthetic_users.generated.catalog import ACTION_NAMES
from synthetic_users.generated.models import Action as WireAction

_ACTION: TypeAdapter[Any] = TypeAdapter(WireAction)


class ActionError(ValueError):
    """A model's answer is not a valid action; the message says what to fix."""


@dataclass(frozen=True)
class Action:
    """One validated action: its name, its arguments (without `ease`) and the step's ease."""

    name: str
    arguments: dict[str, Any]
    ease: int

    def as_dict(self) -> dict[str, Any]:
        """The action as the transcript stores it (`action.json`)."""
        return {"name": self.name, "arguments": {**self.arguments, "ease": self.ease}}


def _problem(name: str, exc: ValidationError) -> str:
    errors = []
    for error in exc.errors(include_url=False):
        # The discriminated union puts the action name first in the location: drop it.
        where = [str(part) for part in error["loc"] if part not in {name, "arguments"}]
        errors.append(f"{'.'.join(where) or 'arguments'}: {error['msg']}")
    return "; ".join(errors)


def parse_action(call: dict[str, Any]) -> Action:
    """Validate a tool call `{name, arguments}`.

    Raises:
        ActionError: unknown action, a missing, extra or mistyped argument, or no valid `ease`.
    """
    name = call.get("name")
    if not isinstance(name, str) or name not in ACTION_NAMES:
        raise ActionError(f"unknown action {name!r}; use one of {', '.join(ACTION_NAMES)}")
    try:
        wire = _ACTION.validate_python(call)
    except ValidationError as exc:
        raise ActionError(f"{name}: {_problem(name, exc)}") from None
    arguments = wire.arguments.model_dump(mode="json", exclude_none=True)
    ease = arguments.pop("ease")
    return Action(name, arguments, int(ease))
