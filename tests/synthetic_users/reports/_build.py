"""Hand-built transcripts for the report tests, shaped exactly like `transcript.json`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import jsonschema

from codegen._bundle import load_synthetic_users

RUN_ID = "run_" + "0" * 31 + "1"
SITE = "https://shop.test"
T0 = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\n" + b"fake image bytes"

_SPEC = load_synthetic_users()


def session_id(n: int) -> str:
    return f"ses_{n:032x}"


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def persona(name: str = "Margaret", **overrides: Any) -> dict[str, Any]:
    return {
        "name": name,
        "background": "Retired teacher, shops online a few times a year.",
        "goals": ["Buy a kettle for under 40 euros"],
        "digital_literacy": "low",
        "patience": "medium",
        "device": "desktop",
        "locale": "en-GB",
        **overrides,
    }


def turn(
    n: int,
    action: str = "click",
    *,
    path: str = "/",
    title: str = "Shop",
    ease: int = 6,
    ok: bool = True,
    code: str | None = None,
    result: str | None = None,
    elapsed_ms: float = 150.0,
    generation: int = 1,
    usage: tuple[int, int] | None = None,
    reason: str | None = None,
    **arguments: Any,
) -> dict[str, Any]:
    """Turn `n` on `SITE + path`: 10 s apart, each 2 s long."""
    defaults: dict[str, dict[str, Any]] = {
        "click": {"ref": f"g{n}e1"},
        "fill": {"ref": f"g{n}e2", "value": "Margaret Hill"},
        "navigate": {"url": SITE + "/"},
        "scroll": {"direction": "down"},
        "finish": {"success": True, "summary": "Bought the kettle."},
    }
    outcome: dict[str, Any] = {
        "ok": ok,
        "summary": result or f"{action} at step {n}",
        "elapsed_ms": elapsed_ms,
    }
    if code is not None:
        outcome["code"] = code
    value: dict[str, Any] = {
        "turn": n,
        "generation": generation,
        "started_at": at(10 * (n - 1)),
        "ended_at": at(10 * (n - 1) + 2),
        "observation": {"url": SITE + path, "title": title},
        "action": {"name": action, "arguments": {**defaults.get(action, {}), **arguments}},
        "outcome": outcome,
        "reactions": [],
    }
    value["action"]["arguments"]["ease"] = ease
    if usage is not None:
        value["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1]}
    if reason is not None:
        value["reason"] = reason
    return value


def react(
    n: int,
    sentiment: str,
    note: str,
    *,
    path: str = "/",
    title: str = "Shop",
    ease: int = 3,
    generation: int = 1,
    screenshot: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """A `react` turn with the reaction the loop records for it."""
    value = turn(
        n,
        "react",
        path=path,
        title=title,
        ease=ease,
        generation=generation,
        result=f"noted: {sentiment}",
        elapsed_ms=5.0,
        sentiment=sentiment,
        note=note,
        **extra,
    )
    reaction: dict[str, Any] = {
        "step": n,
        "generation": generation,
        "sentiment": sentiment,
        "note": note,
        "url": SITE + path,
        "created_at": at(10 * (n - 1) + 1),
    }
    if screenshot:
        reaction["screenshot"] = f"step-{n:03d}.png"
    value["reactions"] = [reaction]
    return value


def transcript(
    turns: list[dict[str, Any]], *, sid: int = 1, name: str = "Margaret", generations: int = 1
) -> dict[str, Any]:
    return {
        "run_id": RUN_ID,
        "session_id": session_id(sid),
        "persona": persona(name),
        "model": "heuristic-persona v1 (seed 7)",
        "task": "Buy a kettle",
        "target_url": SITE + "/",
        "generations": generations,
        "turns": turns,
    }


def schema_errors(title: str, value: Any) -> list[str]:
    """Where `value` breaks the spec's schema `title` (`Report`, `Aggregate`, `Transcript`)."""
    validator = jsonschema.Draft202012Validator(
        {**_SPEC.defs[title], "$defs": _SPEC.defs}, format_checker=jsonschema.FormatChecker()
    )
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]
