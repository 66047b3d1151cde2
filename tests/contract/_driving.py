"""What the contract tests do to a generated case before sending it, and after.

`prepare` is the before-call hook shared by the stateless and the stateful tests:

- A positive case with a body gets a fresh value for every header the spec marks
  `x-required-with-body` (the `Idempotency-Key` of an unattended `createSession`): OpenAPI cannot
  make a header required only with a body, and a generated UUID repeats across examples
  (Hypothesis favours small values), which would turn distinct creates into
  `409 idempotency_conflict`.
- Positive `allowedOrigins` are drawn from exact origins: the spec's `Origin` schema is a bare
  string, so most generated values are not origins at all and the server rightly answers 400.
- A positive `submitCommand` gets a fresh `commandId` (the coverage phase reuses the spec's
  example id, so every command after the first would be a `409 command_id_conflict`), and a
  positive `fill_secret` names, for about half of the generated values, a secret that exists, so
  its plaintext really travels in a grant and the leak check has something to find.
- A positive case whose `sessionId` path parameter is a generated UUID is pointed, for about half
  of the values, at a session that exists (the connected live session or one the run ended), and
  its `commandId` at a command that exists; otherwise every command request would stop at 404.
  The choice follows from the generated value, not from a counter, so a replayed case lands on
  the same kind of target.
- An operator case whose `tenant` is the live tenant acts on a sandbox tenant instead: the spec's
  examples name `acme` and `laptop-1`, and rotating or revoking the live devices would end every
  later command case.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from requests.structures import CaseInsensitiveDict
from schemathesis.core.parameters import ParameterLocation

from tests.contract._checks import headers_required_with_body, operation_id, track_request_secrets
from tests.contract._live import OPERATOR_SANDBOX, TENANT

if TYPE_CHECKING:
    from tests.contract._checks import Case
    from tests.contract._live import LiveBackend

# Exact origins, none of them the live session's, so positive creates can share its device.
POSITIVE_ORIGINS = (
    "https://example.com",
    "https://login.example.com",
    "https://shop.example.org:8443",
    "http://127.0.0.1:8080",
    "http://localhost:3000",
    "https://[2001:db8::1]",
    "https://xn--bcher-kva.example",
)


@dataclass
class Pools:
    """Ids that exist on the live backend, for path-parameter substitution."""

    ended_sessions: list[str] = field(default_factory=list)
    commands: dict[str, list[str]] = field(default_factory=dict)  # session id -> command ids


POOLS = Pools()


def _is_positive(case: Case, location: ParameterLocation | None = None) -> bool:
    meta = case.meta
    if meta is None:
        return True
    if location is not None:
        return not meta.is_negative_at(location)
    return bool(meta.generation.mode.is_positive)


def _uuid_int(value: Any) -> int | None:
    try:
        return uuid.UUID(str(value)).int
    except ValueError:
        return None


def prepare(case: Case, live: LiveBackend, *, substitute: bool = True) -> None:
    """Adjust a generated case before it is sent (see the module docstring)."""
    op = operation_id(case)
    required = headers_required_with_body().get(op, frozenset())
    if required and isinstance(case.body, dict) and _is_positive(case, ParameterLocation.HEADER):
        # Each is a UUID (headers_required_with_body refuses any other kind).
        headers = dict(case.headers or {})
        for name in sorted(required):
            headers[name] = str(uuid.uuid4())
        case.headers = CaseInsensitiveDict(headers)
    if op == "createSession" and isinstance(case.body, dict):
        origins = case.body.get("allowedOrigins")
        if _is_positive(case) and isinstance(origins, list) and origins:
            case.body = {
                **case.body,
                "allowedOrigins": [
                    POSITIVE_ORIGINS[len(str(value)) % len(POSITIVE_ORIGINS)] for value in origins
                ],
            }
    body = case.body
    if op == "submitCommand" and isinstance(body, dict) and _is_positive(case):
        case.body = _positive_command(body, live)
    params = case.path_parameters
    if params and params.get("tenant") == TENANT:
        case.path_parameters = params = {**params, "tenant": OPERATOR_SANDBOX}
    if (
        substitute
        and params
        and "sessionId" in params
        and _is_positive(case, ParameterLocation.PATH)
    ):
        _substitute(case, params, op, live)
    track_request_secrets(case, live.backend.services.keys, TENANT)


def _positive_command(body: dict[str, Any], live: LiveBackend) -> dict[str, Any]:
    # The coverage phase sends one example commandId with every body; reused with another
    # request it is a 409 command_id_conflict (proved by a scenario), so nothing would run.
    body = {**body, "commandId": str(uuid.uuid4())}
    command = body.get("command")
    if isinstance(command, dict) and command.get("name") == "fill_secret":
        secret_ref = command.get("secretRef")
        if isinstance(secret_ref, str) and len(secret_ref) % 2 == 0:
            body["command"] = {**command, "secretRef": f"vault:{next(iter(live.secrets))}"}
    return body


def _substitute(case: Case, params: dict[str, Any], op: str, live: LiveBackend) -> None:
    drawn = _uuid_int(params["sessionId"])
    if drawn is None or drawn % 2:
        return
    if op == "deleteSession":
        # Deleting the live session would end every later command case; delete ended ones.
        pool = POOLS.ended_sessions
    elif op == "getSession":
        pool = [live.ensure_live_session(), *POOLS.ended_sessions]
    else:
        pool = [live.ensure_live_session()]
    if not pool:
        return
    session_id = pool[(drawn // 2) % len(pool)]
    new = {**params, "sessionId": session_id}
    commands = POOLS.commands.get(session_id, [])
    command = _uuid_int(params.get("commandId"))
    if op == "pollCommand" and commands and command is not None and command % 3:
        new["commandId"] = commands[command % len(commands)]
    case.path_parameters = new


def remember(case: Case, response: Any) -> None:
    """Remember the command ids a session answered, for `pollCommand` substitution."""
    if operation_id(case) not in ("submitCommand", "pollCommand") or response.status_code >= 300:
        return
    try:
        body = response.json()
    except ValueError:
        return
    if isinstance(body, dict) and "commandId" in body:
        session_id = str((case.path_parameters or {}).get("sessionId"))
        known = POOLS.commands.setdefault(session_id, [])
        if body["commandId"] not in known:
            known.append(body["commandId"])


def release(case: Case, response: Any, live: LiveBackend) -> None:
    """End a session a create case made, so the next creates find device capacity."""
    if operation_id(case) == "createSession" and response.status_code in (200, 201, 202):
        end_session(live, response.json()["sessionId"])


def end_session(live: LiveBackend, session_id: str) -> None:
    """Delete a session the run created and wait until it is terminal, so capacity is free."""
    live.wait_session_socket(session_id)
    live.http.delete(f"/v1/sessions/{session_id}")
    live.wait_terminal(session_id)
    with contextlib.suppress(ValueError):
        POOLS.ended_sessions.remove(session_id)
    POOLS.ended_sessions.append(session_id)
