"""Checks Schemathesis cannot know about, derived from spec/synthetic-users/openapi.yaml.

- `problem_details`: every 4xx/5xx is `application/problem+json` whose `code` the spec lists for
  that operation and status (`synthetic_users.generated.catalog.PROBLEM_CODES`).
- `no_secret_leak`: no response contains an API key, its digest, or a webhook signing secret
  other than the one a `createWebhook` 201 exists to hand over (which then joins the secrets no
  later response may repeat).
- `documented_headers_present`: every header the spec declares for a response (`Location`) is
  present and names the resource of the body.
- `record_observation`: not a check but the bookkeeping of what was observed, for the coverage
  test, in the suite's own `Ledger` (operation ids such as `getSession` also exist in
  Understudy's spec, so the two suites never share one).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml  # type: ignore[import-untyped]

from synthetic_users.generated.catalog import PROBLEM_CODES
from tests.contract._ledger import Ledger

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

    from schemathesis import APIOperation, CheckContext, Response
    from schemathesis import Case as GenericCase

    Case: TypeAlias = GenericCase[APIOperation[Any, Any, Any, Any]]

SPEC = Path(__file__).resolve().parents[2] / "spec" / "synthetic-users" / "openapi.yaml"
PROBLEM_JSON = "application/problem+json"
_CODE = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
LEDGER = Ledger()


class ContractViolation(AssertionError):
    """A response broke a rule of the contract that Schemathesis does not check itself."""


@cache
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SPEC.read_text())
    return loaded


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
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
        op: frozenset(int(status) for status in spec()["paths"][path][method.lower()]["responses"])
        for op, (method, path) in operations().items()
    }


@cache
def documented_headers(op: str, status: int) -> frozenset[str]:
    method, path = operations()[op]
    response = spec()["paths"][path][method.lower()]["responses"].get(str(status))
    if response is None:
        return frozenset()
    return frozenset(name.lower() for name in _resolve(response).get("headers", {}))


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


def problem_details(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every error is problem+json with a code the spec lists for its operation and status."""
    status = response.status_code
    if status < 400:
        return None
    op = operation_id(case)
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


def no_secret_leak(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """No response contains an API key, its digest, or a webhook secret it did not just mint."""
    text = response.content.decode("utf-8", "replace")
    own: set[str] = set()
    if operation_id(case) == "createWebhook" and response.status_code == 201:
        body = _body(response)
        if isinstance(body, dict) and isinstance(body.get("secret"), str):
            own.add(body["secret"])  # the one thing this response exists to hand over
    headers = " ".join(v for values in response.headers.values() for v in values)
    for secret in LEDGER.secrets() - own:
        if secret in text or secret in headers:
            raise ContractViolation(
                f"{operation_id(case)} {response.status_code} leaks a tracked secret "
                f"({secret[:4]}…, {len(secret)} chars)"
            )
    for secret in own:
        LEDGER.secret(secret)  # from now on, no other response may repeat it
    return None


# operationId -> the body field whose resource `Location` names, and the path it lives under.
LOCATIONS = {
    "createRun": ("run_id", "/runs/"),
    "createPersona": ("persona_id", "/personas/"),
    "createWebhook": ("webhook_id", "/webhooks/"),
}


def documented_headers_present(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """`Location` is present wherever the spec declares it and names the body's resource."""
    op = operation_id(case)
    declared = documented_headers(op, response.status_code)
    missing = sorted(name for name in declared if not response.headers.get(name))
    if missing:
        raise ContractViolation(f"{op} {response.status_code} lacks the header(s) {missing}")
    body = _body(response)
    if "location" in declared and op in LOCATIONS and isinstance(body, dict):
        field, base = LOCATIONS[op]
        location = response.headers["location"][0]
        if location != f"{base}{body.get(field)}":
            raise ContractViolation(f"{op}: Location {location!r} does not name {body.get(field)}")
    return None


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
