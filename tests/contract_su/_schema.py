"""The Schemathesis schema of the Synthetic Users contract suite, with its budget.

Loaded from spec/synthetic-users/openapi.yaml itself (refs into `schemas/` resolve relative to
it). The budget is fixed for CI and raised for a long run with environment variables, as
`make fuzz` does:

- ``SYNTHETIC_USERS_FUZZ_EXAMPLES``: examples per operation in the fuzzing phase (CI: 10).
- ``SYNTHETIC_USERS_FUZZ_SEED``: the seed of every generator (CI: 20261201).
- ``SYNTHETIC_USERS_FUZZ_MIN_CASES``: fail the coverage test when fewer cases ran (unset in CI).
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis
from schemathesis.config import SchemathesisConfig

from tests.contract_su._checks import SPEC
from tests.contract_su._live import API_KEY

EXAMPLES = int(os.environ.get("SYNTHETIC_USERS_FUZZ_EXAMPLES", "10"))
SEED = int(os.environ.get("SYNTHETIC_USERS_FUZZ_SEED", "20261201"))
MIN_CASES = int(os.environ.get("SYNTHETIC_USERS_FUZZ_MIN_CASES", "0"))
# A stateful scenario costs several requests; a fifth of the per-operation budget (at least 100,
# so every declared link is followed since runs can be created too) keeps the CI
# run short while a long run still walks thousands of link chains.
STATEFUL_EXAMPLES = max(100, EXAMPLES // 5)
STATEFUL_MAX_STEPS = 8

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
    "ignored_auth",
    "use_after_free",
    "ensure_resource_availability",
)
POSITIVE_ACCEPTED = ["2xx", "3xx", "401", "403", "404", "5xx"]
# Statuses a schema-valid request legitimately gets because of the state it meets, not the data
# it carries: an Idempotency-Key the generator reused with another body.
STATE_STATUSES = {"createRun": ["409"]}
# `DELETE /runs/{run_id}` cancels: the run stays readable (`cancelled`), as the spec's
# `GetRunAgain` link from its 202 says, and cancelling again answers 200. use_after_free reads
# both as uses of a deleted resource; it stays on for personas and webhooks, whose DELETE deletes.
CANCEL_KEEPS = ("getRun", "cancelRun")
# A run's reports and a session's files exist once that work ended: right after `POST /runs`
# they are the documented `404 artifact_not_found` ("written when the run ends"), which
# ensure_resource_availability reads as a created resource that cannot be found.
WRITTEN_LATER = (
    "getRunReportJson",
    "getRunReportMarkdown",
    "getRunReportHtml",
    "getSessionTranscript",
    "getSessionReportJson",
    "getSessionReportMarkdown",
    "getSessionReportHtml",
    "getSessionScreenshot",
)


def contract_config() -> SchemathesisConfig:
    """Every applicable built-in check, the customer key, a fixed seed and the example budget."""
    operations = (
        [
            {
                "include-operation-id": operation_id,
                "checks": {
                    "positive_data_acceptance": {"expected-statuses": POSITIVE_ACCEPTED + statuses}
                },
            }
            for operation_id, statuses in STATE_STATUSES.items()
        ]
        + [
            {"include-operation-id": operation_id, "checks": {"use_after_free": {"enabled": False}}}
            for operation_id in CANCEL_KEEPS
        ]
        + [
            {
                "include-operation-id": operation_id,
                "checks": {"ensure_resource_availability": {"enabled": False}},
            }
            for operation_id in WRITTEN_LATER
        ]
    )
    config: dict[str, Any] = {
        "seed": SEED,
        "base-url": "http://127.0.0.1:8788",
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
        "auth": {"openapi": {"CustomerApiKey": {"bearer": API_KEY}}},
        "operations": operations,
    }
    return SchemathesisConfig.from_dict(config)


SCHEMA = schemathesis.openapi.from_path(SPEC, config=contract_config())
