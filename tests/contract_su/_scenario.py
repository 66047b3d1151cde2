"""Judge a response a scenario got by the spec, with the fuzzer's checks, and record it.

`conforms` asserts the status (and problem code) the scenario expects, then runs the spec's
built-in conformance checks (status, content type, headers, schema) and the contract's own
(`_checks.py`) on it, so a scenario's observation counts for the coverage test only once the
response passed the same judgement as a fuzzed one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.contract_su._checks import CUSTOM_CHECKS, LEDGER, SOURCE
from tests.contract_su._schema import SCHEMA

if TYPE_CHECKING:
    import httpx

CONFORMANCE = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def conforms(
    operation_id: str,
    response: httpx.Response,
    status: int,
    code: str | None = None,
    *,
    path: dict[str, str] | None = None,
    body: Any = NOT_SET,
    source: str = "scenario",
) -> httpx.Response:
    """Assert the expected outcome, then judge the response by the spec and record it."""
    assert response.status_code == status, response.text
    if code is not None:
        assert response.json()["code"] == code, response.text
    case = SCHEMA.find_operation_by_id(operation_id).Case(path_parameters=path or {}, body=body)
    SOURCE["name"] = source
    LEDGER.count("scenario")
    case.validate_response(response, checks=CONFORMANCE, additional_checks=CUSTOM_CHECKS)
    return response
