"""The shared outcome table (`scenarios.json`) as scripted steps for the Python connector.

The same file drives the TypeScript connector's unit tests (packages/connector/test), so both
connectors are held to one list of request/response sequences. This module only translates each
row into `scripted` steps, the connector's `RetryConfig` and the expected exception class.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import understudy_connector
from understudy_connector import RetryConfig
from understudy_connector.generated import models

from .scripted import (
    SESSION_ID,
    Step,
    network_error,
    outcome,
    pending,
    problem,
    raw,
    session,
    tombstone,
)

TABLE: Final = Path(__file__).with_name("scenarios.json")
DATA: Final[dict[str, Any]] = json.loads(TABLE.read_text())

if DATA["sessionId"] != str(SESSION_ID):
    raise AssertionError("scenarios.json and scripted.py disagree on the session id")


@dataclass
class Scenario:
    """One row: the replies to play, what the caller gets, the requests sent and waits taken."""

    id: str
    steps: list[Step]
    outcome: str | type[Exception]
    calls: list[str]
    sleeps: list[float]
    command: models.Command | None = None
    retry: RetryConfig = field(default_factory=RetryConfig)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _step(spec: dict[str, Any]) -> Step:
    reply = spec["reply"]
    if reply == "network_error":
        return network_error
    if reply == "outcome":
        error = spec.get("error")
        return outcome(
            spec.get("name", "snapshot"),
            status=spec.get("status", "succeeded"),
            error=None if error is None else (error[0], error[1]),
        )
    if reply == "pending":
        return pending(
            spec.get("name", "snapshot"),
            status=spec.get("status", "pending"),
            retry_after=spec.get("retryAfter", 1),
            location=spec.get("location", ""),
        )
    if reply == "problem":
        return problem(
            spec["status"],
            spec["code"],
            retry_after=spec.get("retryAfter"),
            with_command_id=spec.get("withCommandId", True),
        )
    if reply == "raw":
        return raw(
            spec["status"], spec["body"].encode(), spec.get("contentType", "application/json")
        )
    if reply == "session":
        return session(
            spec.get("code", 201),
            status=spec.get("status", "connected"),
            retry_after=spec.get("retryAfter"),
            location=spec.get("location", False),
        )
    if reply == "tombstone":
        return tombstone(
            spec.get("code", 200),
            reason=spec.get("reason", "deleted"),
            status=spec.get("status", "closed"),
        )
    raise AssertionError(f"scenarios.json: unknown reply {reply!r}")


def _outcome(spec: dict[str, Any]) -> str | type[Exception]:
    if "status" in spec:
        return str(spec["status"])
    error = getattr(understudy_connector, spec["error"])
    if not (isinstance(error, type) and issubclass(error, Exception)):
        raise AssertionError(f"scenarios.json: {spec['error']} is not an exception class")
    return error


def _scenarios(kind: str) -> list[Scenario]:
    commands = DATA["commands"]
    rows = []
    for row in DATA[kind]:
        retry = RetryConfig(**{_snake(k): v for k, v in row.get("retry", {}).items()})
        command = None
        if kind == "submitCommand":
            wire = commands[row.get("command", "snapshot")]
            command = models.CommandRequest.model_validate(
                {"commandId": str(SESSION_ID), "command": wire}
            ).command
        rows.append(
            Scenario(
                id=row["id"],
                steps=[_step(step) for step in row["steps"]],
                outcome=_outcome(row["outcome"]),
                calls=list(row["calls"]),
                sleeps=[float(s) for s in row["sleeps"]],
                command=command,
                retry=retry,
            )
        )
    return rows


SUBMIT_SCENARIOS: Final = _scenarios("submitCommand")
CREATE_SCENARIOS: Final = _scenarios("createSession")
CREATE_BODY: Final[dict[str, Any]] = DATA["createBody"]
