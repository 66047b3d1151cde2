"""A consumer that follows the connector's outcome rules, and the judge of its final answer.

The rules are those of `understudy_connector._command_flow` (written here again so these tests
exercise the backend alone): `200` and `409 command_outcome_unknown` are final; `202` polls the
same command; `504 command_not_started` / `command_timed_out` resubmit the same id and body;
`429` and `503` wait and resubmit; a network error polls the same command until the backend
answers, and a `404 command_not_found` poll resubmits (nothing was admitted). Everything else is
final too. Waits are shortened (the backend's `Retry-After` is an upper bound for a polite caller,
never a promise that an earlier request fails), and the whole call is bounded: running out of
budget is reported as silence, which every fault test refuses.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

UNKNOWN = "command_outcome_unknown"
RESUBMIT_CODES = frozenset({"command_not_started", "command_timed_out"})
WAIT_CODES = frozenset({"session_busy", "rate_limited", "session_unavailable"})


@dataclass
class Answer:
    """The caller's last answer for one command, and the answers that led to it."""

    command_id: str
    status: int | None  # None: the budget ran out (silence)
    code: str | None = None
    body: dict[str, Any] = field(default_factory=dict)
    trail: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """`200 succeeded`, `409 command_outcome_unknown`, ... or `silence`."""
        if self.status is None:
            return "silence"
        if self.status == 200:
            return f"200 {self.body.get('status')}"
        return f"{self.status} {self.code}"

    @property
    def resubmits(self) -> int:
        return sum(step.startswith("POST") for step in self.trail) - 1


async def drive(
    http: httpx.AsyncClient,
    session_id: str,
    body: Mapping[str, Any],
    *,
    budget_s: float = 30.0,
    pause_s: float = 0.05,
    max_resubmits: int = 8,
    fallbacks: Sequence[httpx.AsyncClient] = (),
) -> Answer:
    """Submit `body` and follow the outcome rules until a final answer or the budget ends.

    `fallbacks` are clients of other nodes (or of the balancer): after a network error the
    caller moves to the next one, as a client whose node died retries elsewhere.
    """
    clients = [http, *fallbacks]
    command_id = str(body["commandId"])
    url = f"/v1/sessions/{session_id}/commands"
    poll_url = f"{url}/{command_id}"
    final = Answer(command_id, None)
    deadline = time.monotonic() + budget_s
    method = "POST"
    resubmits = 0
    while time.monotonic() < deadline:
        try:
            if method == "POST":
                response = await http.post(url, json=dict(body))
            else:
                response = await http.get(poll_url)
        except httpx.TransportError as exc:
            final.trail.append(f"{method} {type(exc).__name__}")
            method = "GET"  # the command may have been admitted: ask for its durable state
            http = clients[(clients.index(http) + 1) % len(clients)]
            await asyncio.sleep(pause_s * 2)
            continue
        answer = _answer(response)
        final.trail.append(f"{method} {response.status_code} {answer.get('code', '')}".strip())
        code = answer.get("code")
        if response.status_code == 200 or code == UNKNOWN:
            return _settled(final, response.status_code, code, answer)
        if response.status_code == 202:
            method = "GET"
            await asyncio.sleep(pause_s)
            continue
        if method == "GET" and code == "command_not_found":
            method = "POST"  # never admitted (the backend died first): submit it again
            continue
        if code in RESUBMIT_CODES or code in WAIT_CODES:
            if code in RESUBMIT_CODES:
                resubmits += 1
                if resubmits > max_resubmits:
                    return _settled(final, response.status_code, code, answer)
            method = "POST"
            await asyncio.sleep(pause_s)
            continue
        return _settled(final, response.status_code, code, answer)
    return final


def _answer(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {"raw": response.text}
    return data if isinstance(data, dict) else {"raw": data}


def _settled(final: Answer, status: int, code: str | None, body: dict[str, Any]) -> Answer:
    final.status, final.code, final.body = status, code, body
    return final


def check_final(
    final: Answer,
    executions: Mapping[str, int],
    *,
    write: bool = True,
    allow_blocked: bool = False,
) -> None:
    """Assert the fault suite's two promises for one command.

    At most one real execution, and a final answer that is a durable outcome (`200`) or an
    explicit unknown (`409 command_outcome_unknown`); never silence. A `200 succeeded` write ran
    exactly once. `allow_blocked` admits `409 writes_blocked` too: after a browser-epoch change the
    backend refuses to admit the retry of a write that never started (nothing ran, and the session
    says why), which is explicit and final.
    """
    count = executions.get(final.command_id, 0)
    assert count <= 1, f"{final.command_id} executed {count} times; trail {final.trail}"
    allowed = {"200 succeeded", "200 failed", f"409 {UNKNOWN}"}
    if allow_blocked:
        allowed.add("409 writes_blocked")
    assert final.label in allowed, f"final answer {final.label}; trail {final.trail}"
    if final.label == "409 writes_blocked":
        assert count == 0, f"a refused write ran; trail {final.trail}"
    if write and final.label == "200 succeeded" and not final.body.get("dryRun"):
        assert count == 1, f"a succeeded write ran {count} times; trail {final.trail}"
