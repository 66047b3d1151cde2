"""Where PII masking happens: one choke point for storage, one filter for logs.

Storage: `Store.record_turn`, `Store.record_reaction` and `Store.set_session_state` pass every
text they write through `mask_turn` / `PiiMasker.mask` with the session's masker
(`session_masker`); `Store.set_run_state` masks a run's reason with the en-US masker.
Transcripts and reports are built only from stored turns and reactions (`_publish.py`), so they
inherit the masking; screenshots' alt text is the reaction note, masked
the same way. What is masked in a turn (the spec's `Turn`):

- `observation.url` and `observation.title`;
- every string in `action.arguments` (typed text, fill values, options, URLs, notes, summaries);
- `reason` and `outcome.summary`;
- each reaction's `note`, `url` and `element`.

Refs, action names, sentiments, codes and timestamps are left alone: they are ours, and a date
must not be read as a phone number.

Logs: `PiiLogFilter` masks each record's formatted message (and its exception text) on the
service's handlers; `install_log_filter` puts it on the root logger's handlers.

The persona's own inbox is `[persona inbox]`: the session's inbox address (`inbox_address`,
assigned by `_inbox` when the session first starts; the store passes it as `extra_inboxes`) and
the address the heuristic persona types without an inbox (`<slug of its name>@example.test`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from synthetic_users._llm._heuristic import slug
from synthetic_users._safety._pii import PiiMasker

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

HEURISTIC_INBOX_DOMAIN: Final = "example.test"
_REACTION_TEXT: Final = ("note", "url", "element")


def persona_inboxes(persona: Mapping[str, Any]) -> list[str]:
    """The addresses a persona itself uses (the heuristic persona's generated email)."""
    name = str(persona.get("name", ""))
    return [f"{slug(name)}@{HEURISTIC_INBOX_DOMAIN}"] if name else []


def session_masker(persona: Mapping[str, Any], extra_inboxes: Iterable[str] = ()) -> PiiMasker:
    """The masker of one persona session: its locale's phone formats, its own inboxes."""
    inboxes = [*persona_inboxes(persona), *extra_inboxes]
    return PiiMasker.for_persona(str(persona.get("locale", "en-US")), inboxes)


def mask_turn(masker: PiiMasker, turn: dict[str, Any]) -> dict[str, Any]:
    """A copy of a `Turn` (wire form) with its free text masked (see the module docstring)."""
    masked = dict(turn)
    if "observation" in masked:
        masked["observation"] = masker.mask_value(masked["observation"])
    if "action" in masked:
        action = dict(masked["action"])
        action["arguments"] = masker.mask_value(action.get("arguments", {}))
        masked["action"] = action
    if isinstance(masked.get("reason"), str):
        masked["reason"] = masker.mask(masked["reason"])
    if "outcome" in masked:
        outcome = dict(masked["outcome"])
        if isinstance(outcome.get("summary"), str):
            outcome["summary"] = masker.mask(outcome["summary"])
        masked["outcome"] = outcome
    masked["reactions"] = [mask_reaction(masker, r) for r in masked.get("reactions", [])]
    return masked


def mask_reaction(masker: PiiMasker, reaction: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a `Reaction` with its note, URL and element name masked."""
    return {
        key: masker.mask(value) if key in _REACTION_TEXT and isinstance(value, str) else value
        for key, value in reaction.items()
    }


class PiiLogFilter(logging.Filter):
    """Masks emails and phone numbers in every record that passes (international formats and
    the default region's)."""

    def __init__(self, masker: PiiMasker | None = None) -> None:
        super().__init__()
        self._masker = masker or PiiMasker.for_persona("en-US")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = self._masker.mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._masker.mask(record.exc_text)
        return True


def install_log_filter(*loggers: logging.Logger) -> PiiLogFilter:
    """Put one `PiiLogFilter` on every handler of `loggers` (default: the root logger).

    On handlers, not loggers: a logger's filters do not see what its children propagate.
    """
    log_filter = PiiLogFilter()
    for target in loggers or (logging.getLogger(),):
        for handler in target.handlers:
            if not any(isinstance(f, PiiLogFilter) for f in handler.filters):
                handler.addFilter(log_filter)
    return log_filter


def configure_service_logging(*others: str) -> PiiLogFilter:
    """The service's logging: warnings and errors to stderr, masked; also on `others` (uvicorn).

    Without a handler of its own the root logger would print through `logging.lastResort`,
    which no filter can be put on.
    """
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    return install_log_filter(root, *(logging.getLogger(name) for name in others))
