"""`wait_for` as an MCP tool with flat arguments, as agents call it.

The catalog nests what to wait for in a `condition` object of several kinds; models call the
Playwright MCP form (`text`, `textGone`, `time`, ...) far more reliably. Each flat argument maps
onto one condition kind of the catalog, and its schema is taken from that kind's schema, so a change
of a limit in spec/ reaches the tool by itself. A condition kind without a flat form is still
offered as the nested `condition` argument, so a new kind in the catalog is never hidden.
"""

from __future__ import annotations

from typing import Any, Final

from understudy_connector._exceptions import UsageError

TIME_ARGUMENT: Final = "time"
"""Wait this many seconds and ask nothing of the page (Playwright MCP's `time`)."""

# Flat argument -> (condition kind, the condition's field it fills).
FLAT: Final[dict[str, tuple[str, str]]] = {
    "text": ("text_appears", "text"),
    "textGone": ("text_disappears", "text"),
    "url": ("url_matches", "urlContains"),
    "ref": ("element_state", "ref"),
}
STATE_ARGUMENT: Final = "state"
DEFAULT_STATE: Final = "visible"
DESCRIPTIONS: Final[dict[str, str]] = {
    "text": "Wait until this text appears on the page.",
    "textGone": "Wait until this text is gone from the page.",
    "url": "Wait until the tab's URL contains this.",
    "ref": "Wait until the element this ref names reaches `state`.",
}


def flat_properties(condition: dict[str, Any], timeout: dict[str, Any] | None) -> dict[str, Any]:
    """The flat arguments of `wait_for`, from the catalog's condition schema (inlined, cleaned).

    A condition kind without a flat form keeps the nested `condition` argument.
    """
    branches = condition.get("anyOf") or condition.get("oneOf") or [condition]
    properties: dict[str, Any] = {}
    unmapped = False
    for branch in branches:
        fields = branch.get("properties", {})
        kinds = _kinds(fields.get("kind", {}))
        for kind in kinds:
            flat = [name for name, (wanted, _) in FLAT.items() if wanted == kind]
            if not flat:
                unmapped = True
            for name in flat:
                source = fields[FLAT[name][1]]
                properties[name] = {**source, "description": DESCRIPTIONS[name]}
                if kind == "element_state":
                    properties[STATE_ARGUMENT] = {
                        **fields[STATE_ARGUMENT],
                        "default": DEFAULT_STATE,
                        "description": (
                            f"With ref: the state to wait for ({DEFAULT_STATE} unless given). "
                            + branch.get("description", "")
                        ).strip(),
                    }
    maximum = (timeout or {}).get("maximum", 15000) / 1000
    properties[TIME_ARGUMENT] = {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": maximum,
        "description": (
            "Only wait this many seconds, asking nothing of the page. Prefer a condition: it "
            "returns as soon as the page is ready."
        ),
    }
    if timeout is not None:
        properties["timeoutMs"] = {
            **timeout,
            "description": "With a condition: how long to wait for it at most, in milliseconds.",
        }
    if unmapped:
        properties["condition"] = {
            **condition,
            "description": "A condition of a kind not offered as a flat argument above.",
        }
    return properties


def to_command(
    tool: str, values: dict[str, Any], max_seconds: float
) -> tuple[dict[str, Any] | None, float | None]:
    """The catalog `wait_for` arguments of a flat call, or the seconds of a plain pause.

    Raises:
        UsageError: Not exactly one thing to wait for, or arguments that do not go together.
    """
    chosen = [name for name in (*FLAT, TIME_ARGUMENT, "condition") if name in values]
    if len(chosen) != 1:
        offered = ", ".join((*FLAT, TIME_ARGUMENT))
        got = ", ".join(chosen) or "none"
        raise UsageError(f"invalid arguments for {tool}: pass exactly one of {offered} (got {got})")
    (name,) = chosen
    if STATE_ARGUMENT in values and name != "ref":
        raise UsageError(f"invalid arguments for {tool}: state goes with ref")
    if name == TIME_ARGUMENT:
        seconds = values[TIME_ARGUMENT]
        extra = sorted(set(values) - {TIME_ARGUMENT})
        if extra:
            raise UsageError(
                f"invalid arguments for {tool}: time waits alone; drop {', '.join(extra)}"
            )
        number = isinstance(seconds, int | float) and not isinstance(seconds, bool)
        if not number or not 0 < seconds <= max_seconds:
            raise UsageError(
                f"invalid arguments for {tool}: time must be a number of seconds, more than 0 "
                f"and at most {max_seconds:g}"
            )
        return None, float(seconds)
    rest = {key: value for key, value in values.items() if key not in (name, STATE_ARGUMENT)}
    if name == "condition":
        return {**rest, "condition": values["condition"]}, None
    kind, field = FLAT[name]
    condition: dict[str, Any] = {"kind": kind, field: values[name]}
    if kind == "element_state":
        condition[STATE_ARGUMENT] = values.get(STATE_ARGUMENT, DEFAULT_STATE)
    return {**rest, "condition": condition}, None


def _kinds(schema: dict[str, Any]) -> list[str]:
    if "const" in schema:
        return [schema["const"]]
    return list(schema.get("enum", []))
