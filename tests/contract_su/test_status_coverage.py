"""Proof of coverage: every (operation, documented status) of the Synthetic Users spec observed.

Fuzzing reaches most pairs; `test_scenarios.py` drives the rest (replays, conflicts, cancels,
deletes, oversized bodies) and judges each response with the same checks. Every observation
goes through `record_observation`, so a pair counts only once a response with that status
passed the contract's checks.
"""

from __future__ import annotations

import pytest

from synthetic_users.generated.catalog import PROBLEM_CODES
from tests.contract_su._checks import LEDGER, documented_statuses
from tests.contract_su._schema import MIN_CASES

# (operation, status) pairs no test here can reach, each with why. Empty today: the service's
# documented statuses all follow from requests and stored state, none from a browser or a clock.
UNREACHABLE_STATUSES: dict[tuple[str, int], str] = {}

# (operation, status, code) the spec lists but no request can produce: the shared
# `ValidationFailed` response names `invalid_json` for every operation, and an operation without
# a request body never parses one.
UNREACHABLE_CODES: dict[tuple[str, int, str], str] = {
    (op, 400, "invalid_json"): "no request body to parse"
    for op in (
        "listRuns",
        "listPersonas",
        "listWebhooks",
        "listWebhookDeliveries",
        "listUsage",
        "listCredentials",
    )
}


@pytest.mark.contract_su_coverage
def test_every_documented_status_was_observed() -> None:
    missing = sorted(
        (op, status)
        for op, statuses in documented_statuses().items()
        for status in statuses
        if (op, status) not in LEDGER.observed and (op, status) not in UNREACHABLE_STATUSES
    )
    assert not missing, f"never observed: {missing}"


@pytest.mark.contract_su_coverage
def test_every_documented_problem_code_was_observed() -> None:
    missing = sorted(
        (op, int(status), code)
        for op, by_status in PROBLEM_CODES.items()
        for status, codes in by_status.items()
        for code in codes
        if code not in LEDGER.codes.get((op, int(status)), set())
        and (op, int(status), code) not in UNREACHABLE_CODES
    )
    assert not missing, f"never observed: {missing}"


@pytest.mark.contract_su_coverage
def test_the_allow_lists_name_only_what_the_spec_documents() -> None:
    # An entry left behind after the spec changed would excuse nothing and hide nothing.
    for op, status in UNREACHABLE_STATUSES:
        assert status in documented_statuses()[op], (op, status)
    for op, status, code in UNREACHABLE_CODES:
        assert code in PROBLEM_CODES[op][str(status)], (op, status, code)


@pytest.mark.contract_su_coverage
def test_enough_cases_ran() -> None:
    total = sum(LEDGER.cases.values())
    assert total >= max(MIN_CASES, 1), f"{total} cases ran; at least {MIN_CASES} were asked for"
