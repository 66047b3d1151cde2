"""The dashboard's forms as the API's request documents, and the API's errors as field errors.

The forms are validated by exactly what validates the API (`_api/_parse.py`, through
`submit_run` and `validate`): a form becomes the JSON document the API would receive, and each
error's JSON pointer is mapped back to the form control that produced it.

Field names of the webhook form: `url`, `events` (checkboxes of event types).

Field names of the credential form: `name`, `username`, `password`, `origin` (optional).

Field names of the start-a-run form: `target_url`, `task`, `turn_budget`, `saved` (checkboxes
of saved persona ids), and per inline persona *k* `inline-<k>-<field>` for `name`,
`background`, `goals` (one per line), `digital_literacy`, `patience`, `device`, `locale`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

PERSONA_FIELDS: Final = (
    "name",
    "background",
    "goals",
    "digital_literacy",
    "patience",
    "device",
    "locale",
)
CHOICES: Final[dict[str, tuple[str, ...]]] = {
    "digital_literacy": ("low", "medium", "high"),
    "patience": ("low", "medium", "high"),
    "device": ("desktop", "mobile"),
}
PERSONA_DEFAULTS: Final[dict[str, str]] = {
    "name": "",
    "background": "",
    "goals": "",
    "digital_literacy": "medium",
    "patience": "medium",
    "device": "desktop",
    "locale": "en-US",
}
MIN_INLINE: Final = 1
MAX_INLINE: Final = 10
LABELS: Final = {
    "target_url": "Target URL",
    "task": "Task",
    "turn_budget": "Turn budget",
    "personas": "Personas",
    "saved": "Saved personas",
    "name": "Name",
    "background": "Background",
    "goals": "Goals",
    "digital_literacy": "Digital literacy",
    "patience": "Patience",
    "device": "Device",
    "locale": "Locale",
    "url": "Endpoint URL",
    "events": "Events",
    "run_id": "Run",
    "username": "User name",
    "password": "Password",
    "origin": "Origin",
}
CREDENTIAL_FIELDS: Final = ("name", "username", "password", "origin")
_INLINE: Final = re.compile(r"inline-(\d{1,2})-([a-z_]+)")
_POINTER: Final = re.compile(r"/personas/(\d+)(?:/([a-z_]+))?.*")


@dataclass
class FormErrors:
    """Messages by form field name, and those that belong to no one field."""

    fields: dict[str, str] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)

    def add(self, name: str | None, message: str) -> None:
        if name is None:
            self.general.append(message)
        else:
            # One message per control is what a person can act on; keep the first.
            self.fields.setdefault(name, message)

    def __bool__(self) -> bool:
        return bool(self.fields or self.general)


def field_label(name: str) -> str:
    """What the error summary calls a control: its label (`Persona 2, Locale` when inline)."""
    match = _INLINE.fullmatch(name)
    if match:
        return f"Persona {int(match[1]) + 1}, {LABELS.get(match[2], match[2])}"
    return LABELS.get(name, name)


def persona_document(values: Mapping[str, str]) -> dict[str, Any]:
    """A persona form (field -> text) as a `PersonaInput` document; blank optional fields go."""
    doc: dict[str, Any] = {"name": values.get("name", "").strip()}
    for name in PERSONA_FIELDS[1:]:
        text = values.get(name, "").strip()
        if name == "goals":
            goals = [line.strip() for line in text.splitlines() if line.strip()]
            if goals:
                doc["goals"] = goals
        elif text:
            doc[name] = text
    return doc


def persona_field(pointer: str) -> str | None:
    """The persona form's control a pointer into a `PersonaInput` names (`/goals/2` -> goals)."""
    part = pointer.strip("/").split("/", 1)[0]
    return part if part in PERSONA_FIELDS else None


@dataclass
class RunForm:
    """The start-a-run form as sent, and the API document made of it."""

    target_url: str = ""
    task: str = ""
    turn_budget: str = ""
    saved: list[str] = field(default_factory=list)
    inline: list[dict[str, str]] = field(default_factory=list)
    # Which form control each persona of the document came from: ("saved", id) or ("inline", k).
    sources: list[tuple[str, Any]] = field(default_factory=list)

    @classmethod
    def blank(cls, inline: int = MIN_INLINE) -> RunForm:
        return cls(inline=[dict(PERSONA_DEFAULTS) for _ in range(inline)])

    @classmethod
    def parse(cls, form: Mapping[str, Sequence[str]]) -> RunForm:
        """The form from its fields (every value a list, as multi-valued forms send them)."""

        def one(name: str) -> str:
            values = form.get(name) or [""]
            return values[0]

        inline: dict[int, dict[str, str]] = {}
        for name, values in form.items():
            match = _INLINE.fullmatch(name)
            if match and match[2] in PERSONA_FIELDS and int(match[1]) < MAX_INLINE:
                inline.setdefault(int(match[1]), dict(PERSONA_DEFAULTS))[match[2]] = values[0]
        count = max([MIN_INLINE, *(k + 1 for k in inline)])
        return cls(
            target_url=one("target_url").strip(),
            task=one("task").strip(),
            turn_budget=one("turn_budget").strip(),
            saved=[v for v in form.get("saved", []) if v],
            inline=[inline.get(k, dict(PERSONA_DEFAULTS)) for k in range(count)],
        )

    def add_inline(self) -> None:
        if len(self.inline) < MAX_INLINE:
            self.inline.append(dict(PERSONA_DEFAULTS))

    def document(self, errors: FormErrors) -> dict[str, Any]:
        """The `RunRequest` document; problems only the form can have go to `errors`."""
        doc: dict[str, Any] = {"target_url": self.target_url, "task": self.task}
        if self.turn_budget:
            if self.turn_budget.isdigit():
                doc["turn_budget"] = int(self.turn_budget)
            else:
                errors.add("turn_budget", "must be a whole number from 1 to 200")
        personas: list[dict[str, Any]] = []
        self.sources = []
        for persona_id in self.saved:
            personas.append({"persona_id": persona_id})
            self.sources.append(("saved", persona_id))
        for k, values in enumerate(self.inline):
            if _is_blank(values):
                continue  # a fieldset left as it was served is not a persona
            personas.append(persona_document(values))
            self.sources.append(("inline", k))
        doc["personas"] = personas
        return doc

    def field_for(self, pointer: str) -> str | None:
        """The form control an API error's JSON pointer is about, or None (the whole form)."""
        if pointer in ("/target_url", "/task", "/turn_budget"):
            return pointer[1:]
        if pointer == "/personas":
            return "personas"
        match = _POINTER.fullmatch(pointer)
        if match is None or int(match[1]) >= len(self.sources):
            return None
        kind, where = self.sources[int(match[1])]
        if kind == "saved":
            return "saved"
        name = persona_field(pointer.split("/", 3)[3] if match[2] else "")
        return f"inline-{where}-{name}" if name else f"inline-{where}-name"


def _is_blank(values: Mapping[str, str]) -> bool:
    return all(values.get(k, "").strip() == v for k, v in PERSONA_DEFAULTS.items())


def webhook_document(form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The webhook form as a `WebhookRequest` document (the events in the order sent)."""
    url = (form.get("url") or [""])[0].strip()
    return {"url": url, "events": [e for e in form.get("events", []) if e]}


def webhook_field(pointer: str) -> str | None:
    """The webhook form's control a pointer into a `WebhookRequest` names (`/events/1`)."""
    part = pointer.strip("/").split("/", 1)[0]
    return part if part in ("url", "events") else None


def credential_document(form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The credential form as a `CredentialInput` document; a blank origin is left out.

    The password is taken exactly as typed (spaces can be part of one); the other fields are
    trimmed as every other form's text is.
    """

    def one(name: str) -> str:
        return (form.get(name) or [""])[0]

    doc: dict[str, Any] = {
        "name": one("name").strip(),
        "username": one("username").strip(),
        "password": one("password"),
    }
    origin = one("origin").strip()
    if origin:
        doc["origin"] = origin
    return doc


def credential_field(pointer: str) -> str | None:
    """The credential form's control a pointer into a `CredentialInput` names (`/origin`)."""
    part = pointer.strip("/").split("/", 1)[0]
    return part if part in CREDENTIAL_FIELDS else None
