"""Proof of coverage: every (operation, documented status) of spec/openapi.yaml was observed.

Fuzzing and stateful testing reach most pairs; `test_scenarios.py` drives the rest (outcomes that
need a misbehaving extension, a moving clock or an exhausted quota) and validates each response
against the spec with the same checks. Every observation goes through `record_observation`, so a
pair counts only once a response with that status passed through the contract's checks.

The tests judge `run_ledger`: this run's ledger when this process ran every contract case, or
else the ledger of a contract run they start themselves (run alone, or under pytest-xdist).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from tests.contract._checks import documented_statuses
from tests.contract._schema import MIN_CASES
from understudy.generated.catalog import PROBLEM_CODES

if TYPE_CHECKING:
    from tests.contract._ledger import Ledger
    from tests.contract._live import LiveBackend


@pytest.mark.contract_coverage
def test_every_documented_status_was_observed(run_ledger: Ledger) -> None:
    missing = sorted(
        (operation_id, status)
        for operation_id, statuses in documented_statuses().items()
        for status in statuses
        if (operation_id, status) not in run_ledger.observed
    )
    assert not missing, f"never observed: {missing}"


@pytest.mark.contract_coverage
def test_every_documented_problem_code_was_observed(run_ledger: Ledger) -> None:
    missing = sorted(
        (operation_id, int(status), code)
        for operation_id, by_status in PROBLEM_CODES.items()
        for status, codes in by_status.items()
        for code in codes
        if code not in run_ledger.codes.get((operation_id, int(status)), set())
    )
    assert not missing, f"never observed: {missing}"


@pytest.mark.contract_coverage
def test_a_vault_secret_was_in_play(live: LiveBackend) -> None:
    # The leak check means something only if plaintext really travelled to the device. Random
    # secret refs rarely name a stored secret, so send one fill_secret that does, and check its
    # answer for the plaintext like every other response.
    session_id = live.ensure_live_session()
    name = next(iter(live.secrets))
    body = {
        "commandId": str(uuid.uuid4()),
        "command": {"name": "fill_secret", "ref": "g1e3", "secretRef": f"vault:{name}"},
    }
    response = live.http.post(f"/v1/sessions/{session_id}/commands", json=body)
    assert response.status_code == 200, response.text
    assert live.secrets[name] not in response.text
    assert set(live.secrets_granted()) & set(live.secrets.values())


@pytest.mark.contract_coverage
def test_enough_cases_ran(run_ledger: Ledger) -> None:
    assert {"fuzz", "stateful", "scenario"} <= set(run_ledger.cases), run_ledger.cases
    total = sum(run_ledger.cases.values())
    assert total >= max(MIN_CASES, 1), f"{total} cases ran; at least {MIN_CASES} were asked for"
