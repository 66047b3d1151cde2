"""Stateless fuzzing of every operation of spec/openapi.yaml against the running backend.

Schemathesis runs the examples, coverage and fuzzing phases for each operation, positive and
negative, with every applicable built-in check plus the contract's own (`_checks.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.contract._checks import CUSTOM_CHECKS, SOURCE
from tests.contract._driving import prepare, release, remember
from tests.contract._ledger import LEDGER
from tests.contract._schema import SCHEMA

if TYPE_CHECKING:
    from tests.contract._checks import Case
    from tests.contract._live import LiveBackend


@SCHEMA.parametrize()
def test_every_operation_conforms_to_the_spec(case: Case, live: LiveBackend) -> None:
    SOURCE["name"] = "fuzz"
    prepare(case, live)
    for ticket in live.new_tickets():
        LEDGER.secret(ticket)
    LEDGER.count("fuzz")
    response = case.call(base_url=live.url)
    remember(case, response)
    release(case, response, live)
    case.validate_response(response, additional_checks=CUSTOM_CHECKS)
