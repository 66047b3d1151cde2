"""Checks Schemathesis cannot know about, derived from spec/openapi.yaml and the issued secrets.

- `problem_details`: every 4xx/5xx is `application/problem+json` whose `code` the spec lists for
  that operation and status (`PROBLEM_CODES`); the tombstone `410` of `getSession` is the one
  documented exception.
- `no_secret_leak`: no response contains a credential, a ticket (other than the one a
  connect-ticket response just minted, or the credential an enrollment or key creation just
  minted), a vault plaintext, a profile-state key or its HMAC; each minted value joins the
  secrets no later response may repeat.
- `documented_headers`: every header the spec declares for a response (`Location`,
  `Retry-After`) is present, `Retry-After` is a whole number of seconds and `Location` names the
  resource of the body.
- `record_observation`: not a check but the bookkeeping of what was observed, for the coverage test.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml  # type: ignore[import-untyped]

from tests.contract._ledger import LEDGER, MIN_DISTINCT_SECRET
from understudy import _security
from understudy.generated.catalog import PROBLEM_CODES

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

    from schemathesis import APIOperation, CheckContext, Response
    from schemathesis import Case as GenericCase

    from understudy._security import Keys

    Case: TypeAlias = GenericCase[APIOperation[Any, Any, Any, Any]]

SPEC = Path(__file__).resolve().parents[2] / "spec" / "openapi.yaml"
PROBLEM_JSON = "application/problem+json"
TOMBSTONE = ("getSession", 410)
_CODE = re.compile(r"^[a-z][a-z0-9_]{1,63}$")


class ContractViolation(AssertionError):
    """A response broke a rule of the contract that Schemathesis does not check itself."""


@cache
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SPEC.read_text())
    return loaded


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    """Follow local `#/components/...` refs (responses and headers are local in the spec)."""
    while "$ref" in node:
        target: Any = spec()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


@cache
def operations() -> dict[str, tuple[str, str]]:
    """operationId -> (METHOD, path)."""
    found = {}
    for path, item in spec()["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "operationId" in operation:
                found[operation["operationId"]] = (method.upper(), path)
    return found


@cache
def documented_statuses() -> dict[str, frozenset[int]]:
    """operationId -> every status its responses document."""
    return {
        operation_id: frozenset(
            int(status) for status in spec()["paths"][path][method.lower()]["responses"]
        )
        for operation_id, (method, path) in operations().items()
    }


@cache
def documented_headers(operation_id: str, status: int) -> frozenset[str]:
    method, path = operations()[operation_id]
    responses = spec()["paths"][path][method.lower()]["responses"]
    response = responses.get(str(status))
    if response is None:
        return frozenset()
    return frozenset(name.lower() for name in _resolve(response).get("headers", {}))


@cache
def headers_required_with_body() -> dict[str, frozenset[str]]:
    """operationId -> header parameters the spec marks `x-required-with-body: true`.

    OpenAPI cannot say "required when the request has a body" (an unattended create needs an
    `Idempotency-Key`, an attended one does not), so the spec says it with this extension and
    positive fuzzing follows it instead of a list kept here.
    """
    found: dict[str, frozenset[str]] = {}
    for operation_id_, (method, path) in operations().items():
        parameters = spec()["paths"][path][method.lower()].get("parameters", [])
        marked = [
            resolved
            for resolved in (_resolve(parameter) for parameter in parameters)
            if resolved.get("in") == "header" and resolved.get("x-required-with-body") is True
        ]
        for parameter in marked:
            if parameter.get("schema", {}).get("format") != "uuid":
                raise ContractViolation(
                    f"{operation_id_}: {parameter['name']} is x-required-with-body but not a "
                    "UUID; the contract fills only UUID headers"
                )
        names = frozenset(parameter["name"] for parameter in marked)
        if names:
            found[operation_id_] = names
    return found


def operation_id(case: Case) -> str:
    value = case.operation.definition.raw.get("operationId")
    if not isinstance(value, str):
        raise ContractViolation(f"{case.operation.label} has no operationId in the spec")
    return value


def _media_type(response: Response) -> str:
    values = response.headers.get("content-type") or [""]
    return values[0].split(";")[0].strip().lower()


def _body(response: Response) -> Any:
    try:
        return json.loads(response.content)
    except ValueError:
        return None


# -- problem details -------------------------------------------------------------------------------


def problem_details(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every error is problem+json with a code the spec lists for its operation and status."""
    status = response.status_code
    if status < 400:
        return None
    op = operation_id(case)
    if (op, status) == TOMBSTONE:
        if _media_type(response) != "application/json":
            raise ContractViolation("the 410 tombstone of getSession must be application/json")
        return None
    if _media_type(response) != PROBLEM_JSON:
        raise ContractViolation(
            f"{op} answered {status} as {_media_type(response)!r}, not {PROBLEM_JSON}"
        )
    body = _body(response)
    if not isinstance(body, dict) or not isinstance(body.get("code"), str):
        raise ContractViolation(f"{op} answered {status} without a problem `code`")
    code: str = body["code"]
    if body.get("status") != status:
        raise ContractViolation(f"{op}: the problem says status {body.get('status')}, not {status}")
    if not _CODE.fullmatch(code):
        raise ContractViolation(f"{op}: problem code {code!r} is not a stable machine code")
    if status not in documented_statuses()[op]:
        # Undocumented statuses are status_code_conformance's to report; an unsupported method
        # is the framework's 405, which must still speak problem+json (checked above).
        if status == 405 and code == "method_not_allowed":
            return None
        raise ContractViolation(f"{op} answered {status} {code}, a status its spec does not list")
    allowed = PROBLEM_CODES[op].get(str(status), [])
    if code not in allowed:
        raise ContractViolation(f"{op} answered {status} {code!r}; the spec lists only {allowed}")
    return None


# -- secrets ---------------------------------------------------------------------------------------


@cache
def _vocabulary() -> str:
    """Every word of the spec: public, so no leak when a response repeats it."""
    files = [SPEC, *sorted((SPEC.parent / "frames").glob("*.json"))]
    return "\n".join(path.read_text() for path in files)


def _profile_key(case: Case) -> str | None:
    body = case.body
    if operation_id(case) != "createSession" or not isinstance(body, dict):
        return None
    key = body.get("profileStateKey")
    return key if isinstance(key, str) and key else None


def track_request_secrets(case: Case, keys: Keys, tenant: str, *, chosen: bool = False) -> None:
    """Remember, before the call, what a create request's profile-state key must never become.

    Its HMAC can never appear by chance, so no later response may contain it. The raw key joins
    the run's secrets only when the harness `chosen` it: the generator reuses strings it saw in
    earlier responses and in the spec ("command.outcome", "attended_v1"), which a later response
    may say again without leaking anything. A generated key is checked against the response to
    its own create instead (`no_secret_leak`).
    """
    key = _profile_key(case)
    if key is not None:
        LEDGER.secret(_security.profile_state_hash(keys, tenant, key))
        if chosen:
            LEDGER.secret(key)


def _echoed_profile_key(case: Case, text: str) -> bool:
    key, body = _profile_key(case), case.body
    if key is None or not isinstance(body, dict):
        return False
    if len(key) < MIN_DISTINCT_SECRET or len(set(key)) <= 2:
        return False
    others = json.dumps({k: v for k, v in body.items() if k != "profileStateKey"})
    if key in _vocabulary() or key in others:
        return False  # public words, or the caller's own origins and device
    return key in text


# Operator operations that hand over a fresh credential, and the field that carries it.
MINTED = {"enrollDevice": "credential", "createApiKey": "apiKey"}


def no_secret_leak(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """No response contains a credential, ticket, secret plaintext, profile key or its hash."""
    text = response.content.decode("utf-8", "replace")
    own: set[str] = set()
    minted = operation_id(case) == "createConnectTicket" and response.status_code == 200
    body = _body(response) if minted else None
    if isinstance(body, dict) and isinstance(body.get("ticket"), str):
        own.add(body["ticket"])  # the one thing this response exists to hand over
    minted_field = MINTED.get(operation_id(case)) if response.status_code < 300 else None
    minted_body = _body(response) if minted_field else None
    if isinstance(minted_body, dict) and isinstance(minted_body.get(minted_field), str):
        own.add(minted_body[minted_field])  # a credential shown this once
    headers = " ".join(v for values in response.headers.values() for v in values)
    for secret in LEDGER.secrets() - own:
        if secret in text or secret in headers:
            raise ContractViolation(
                f"{operation_id(case)} {response.status_code} leaks a tracked secret "
                f"({secret[:4]}…, {len(secret)} chars)"
            )
    if _echoed_profile_key(case, text + headers):
        raise ContractViolation(f"createSession {response.status_code} echoes the profile key")
    for ticket in own:
        LEDGER.secret(ticket)  # from now on, no other response may repeat it
    return None


# -- headers ---------------------------------------------------------------------------------------


def documented_headers_present(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """`Location` and `Retry-After` are present wherever the spec declares them."""
    op = operation_id(case)
    declared = documented_headers(op, response.status_code)
    missing = sorted(name for name in declared if not response.headers.get(name))
    if missing:
        raise ContractViolation(f"{op} {response.status_code} lacks the header(s) {missing}")
    if "retry-after" in declared:
        value = response.headers["retry-after"][0]
        if not value.isdigit():
            raise ContractViolation(f"{op}: Retry-After {value!r} is not a whole number of seconds")
    if "location" in declared:
        location = response.headers["location"][0]
        expected = _expected_location(op, _body(response), case)
        if expected is not None and location != expected:
            raise ContractViolation(f"{op}: Location {location!r}, expected {expected!r}")
    return None


def _expected_location(op: str, body: Any, case: Case) -> str | None:
    if not isinstance(body, dict):
        return None
    if op == "createSession":
        return f"/v1/sessions/{body.get('sessionId')}"
    if op in ("submitCommand", "pollCommand"):
        session_id = (case.path_parameters or {}).get("sessionId")
        return f"/v1/sessions/{session_id}/commands/{body.get('commandId')}"
    return None


# -- bookkeeping -----------------------------------------------------------------------------------

SOURCE = {"name": "fuzz"}


def record_observation(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    body = _body(response) if _media_type(response) == PROBLEM_JSON else None
    code = body.get("code") if isinstance(body, dict) else None
    LEDGER.observe(operation_id(case), response.status_code, SOURCE["name"], code)
    return None


CUSTOM_CHECKS: list[Callable[..., bool | None]] = [
    record_observation,
    problem_details,
    no_secret_leak,
    documented_headers_present,
]
