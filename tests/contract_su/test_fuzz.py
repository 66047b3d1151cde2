"""Stateless fuzzing of every operation of spec/synthetic-users/openapi.yaml against the service.

Schemathesis runs the examples, coverage and fuzzing phases for each operation, positive and
negative, with every applicable built-in check plus the contract's own (`_checks.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.contract_su._checks import CUSTOM_CHECKS, LEDGER, SOURCE
from tests.contract_su._driving import prepare
from tests.contract_su._schema import SCHEMA

if TYPE_CHECKING:
    from tests.contract_su._checks import Case
    from tests.contract_su._live import LiveService


@SCHEMA.parametrize()
def test_every_operation_conforms_to_the_spec(case: Case, live_su: LiveService) -> None:
    SOURCE["name"] = "fuzz"
    prepare(case, live_su)
    LEDGER.count("fuzz")
    response = case.call(base_url=live_su.url)
    case.validate_response(response, additional_checks=CUSTOM_CHECKS)
