"""Contract defects the fuzzer found, each pinned by the request that showed it."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from schemathesis.core.failures import FailureGroup

from tests.contract_su._checks import no_secret_leak, problem_details
from tests.contract_su._scenario import conforms
from tests.contract_su._schema import SCHEMA

if TYPE_CHECKING:
    from tests.contract_su._live import LiveService

PERSONAS = [{"name": "Margaret"}]


@pytest.mark.parametrize(
    "target_url",
    [
        "https://\x857",  # NEL: white space to the server's regex engine, not to ECMA-262's \s
        "https://shop.example/\x85",
        "https://\ufeffshop.example/",  # BOM: white space to ECMA-262 only
    ],
)
def test_a_target_url_with_unicode_white_space_is_refused_by_spec_and_service_alike(
    live_su: LiveService, target_url: str
) -> None:
    # The spec's pattern and the server's validator read \s differently; the spec now names
    # U+0085 and U+FEFF, so a URL the spec accepts is never refused (or the other way round).
    body = {"target_url": target_url, "task": "Buy a kettle", "personas": PERSONAS}
    response = live_su.http.post("/runs", json=body)
    conforms("createRun", response, 400, "validation_failed", body=body)


def test_a_target_url_with_a_bracketed_host_that_is_no_ipv6_address_is_a_400(
    live_su: LiveService,
) -> None:
    # It was a 500: `urlsplit` raises on such a host, outside the validator's checks.
    body = {"target_url": "https://[c]:63391", "task": "Buy a kettle", "personas": PERSONAS}
    response = live_su.http.post("/runs", json=body)
    conforms("createRun", response, 400, "validation_failed", body=body)


def test_options_lists_every_method_of_a_path_with_two_handlers(live_su: LiveService) -> None:
    # Litestar 2 answered `Allow: OPTIONS, POST` for /runs (its first handler's methods only).
    response = live_su.http.options("/runs")
    assert response.status_code == 204
    assert response.headers["allow"] == "GET, OPTIONS, POST"


def _judged(
    operation_id: str, response: httpx.Response, check: Any, path: dict[str, str] | None = None
) -> str:
    case = SCHEMA.find_operation_by_id(operation_id).Case(path_parameters=path or {})
    response.elapsed = timedelta(0)  # a built response has none; Schemathesis reads it
    with pytest.raises(FailureGroup) as failure:
        case.validate_response(response, checks=[], additional_checks=[check])
    return str(failure.value) + "".join(map(str, getattr(failure.value, "exceptions", [])))


def test_the_contract_checks_catch_a_leaked_key_and_an_unlisted_code(live_su: LiveService) -> None:
    # The checks the fuzzer relies on must be able to fail: fed a response that breaks each.
    request = httpx.Request("GET", f"{live_su.url}/personas")
    leak = httpx.Response(200, json={"personas": [], "x": live_su.api_key}, request=request)
    assert "leaks a tracked secret" in _judged("listPersonas", leak, no_secret_leak)
    problem = {"type": "about:blank", "title": "t", "status": 404, "code": "run_not_found"}
    unlisted = httpx.Response(
        404, json=problem, headers={"content-type": "application/problem+json"}, request=request
    )
    path = {"persona_id": "per_" + "0" * 32}
    message = _judged("getPersona", unlisted, problem_details, path)
    assert "the spec lists only ['persona_not_found']" in message
