"""The Schemathesis schema of the contract suite: spec/openapi.yaml itself, with its budget.

Loaded from the file (refs into spec/frames/ resolve relative to it), never from a schema the
framework generates. The budget is fixed for CI (a seed and a bounded number of examples per
operation) and raised for a long run with environment variables, as `make fuzz` does:

- ``UNDERSTUDY_FUZZ_EXAMPLES``: examples per operation in the fuzzing phase (CI: 25).
- ``UNDERSTUDY_FUZZ_SEED``: the seed of every generator (CI: 20261130).
- ``UNDERSTUDY_FUZZ_MIN_CASES``: fail the coverage test when fewer cases ran (unset in CI).

The server's port is known only once it runs; the `live` fixture sets the base URL then.
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis
from schemathesis.config import SchemathesisConfig

from tests.contract._checks import SPEC
from tests.contract._live import CONSUMER_KEY, DEVICE_CREDENTIAL, OPERATOR_TOKEN

EXAMPLES = int(os.environ.get("UNDERSTUDY_FUZZ_EXAMPLES", "25"))
SEED = int(os.environ.get("UNDERSTUDY_FUZZ_SEED", "20261130"))
MIN_CASES = int(os.environ.get("UNDERSTUDY_FUZZ_MIN_CASES", "0"))
# A stateful scenario costs several requests; a fifth of the per-operation budget keeps the CI
# run short while a long run still walks thousands of link chains.
STATEFUL_EXAMPLES = max(20, EXAMPLES // 5)
STATEFUL_MAX_STEPS = 10

BUILT_IN_CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "missing_required_header",
    "unsupported_method",
    "use_after_free",
    "ensure_resource_availability",
    "ignored_auth",
)
POSITIVE_ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
# Statuses a schema-valid request legitimately gets because of the state it meets, not the data
# it carries (positive_data_acceptance would otherwise read them as "valid data rejected").
STATE_STATUSES = {
    "submitCommand": ["410", "426"],
    "getSession": ["410"],
}
# 5xx the spec documents as outcomes, not failures: no device or connection (503), a deadline
# that passed (504). not_a_server_error keeps refusing every other 5xx, 500 above all.
DOCUMENTED_5XX = {
    "createSession": ["503"],
    "submitCommand": ["503", "504"],
    "pollCommand": ["504"],
    "readyz": ["503"],
}


def contract_config() -> SchemathesisConfig:
    """Every applicable built-in check, both auth schemes, a fixed seed and the example budget."""
    checks: dict[str, dict[str, Any]] = {}
    for operation_id, statuses in STATE_STATUSES.items():
        checks.setdefault(operation_id, {})["positive_data_acceptance"] = {
            "expected-statuses": POSITIVE_ACCEPTED + statuses
        }
    for operation_id, statuses in DOCUMENTED_5XX.items():
        checks.setdefault(operation_id, {})["not_a_server_error"] = {
            "expected-statuses": ["2xx", "3xx", "4xx", *statuses]
        }
    # A command's durable outcome outlives its session: a caller that deleted a session while a
    # write was pending must still learn whether it ran. use_after_free reads the 200 of such a
    # poll as a read of a deleted resource; it stays on for getSession and submitCommand.
    checks["pollCommand"]["use_after_free"] = {"enabled": False}
    operations = [
        {"include-operation-id": operation_id, "checks": by_name}
        for operation_id, by_name in checks.items()
    ]
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "base-url": "http://127.0.0.1:8787",
            "request-timeout": 30,
            "suppress-health-check": ["too_slow", "filter_too_much", "data_too_large"],
            "generation": {"mode": "all", "max-examples": EXAMPLES, "database": "none"},
            "phases": {
                "stateful": {
                    "max-steps": STATEFUL_MAX_STEPS,
                    "generation": {"max-examples": STATEFUL_EXAMPLES},
                }
            },
            "checks": {name: {"enabled": True} for name in BUILT_IN_CHECKS},
            "auth": {
                "openapi": {
                    "ConsumerApiKey": {"bearer": CONSUMER_KEY},
                    "DeviceCredential": {"bearer": DEVICE_CREDENTIAL},
                    "OperatorToken": {"bearer": OPERATOR_TOKEN},
                }
            },
            "operations": operations,
        }
    )


SCHEMA = schemathesis.openapi.from_path(SPEC, config=contract_config())
