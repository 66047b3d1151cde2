"""Stateful testing: Schemathesis chains operations along the OpenAPI links of the spec.

A scenario creates a persona or a webhook endpoint, then follows the links its response offers:
read it, delete it, read it again, list an endpoint's deliveries. The checks
that need history (use_after_free, ensure_resource_availability) run here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

import hypothesis

from tests.contract_su._checks import CUSTOM_CHECKS, LEDGER, SOURCE, operation_id, spec
from tests.contract_su._driving import prepare
from tests.contract_su._schema import SCHEMA, SEED, STATEFUL_EXAMPLES, STATEFUL_MAX_STEPS

if TYPE_CHECKING:
    import schemathesis

    from tests.contract_su._checks import Case
    from tests.contract_su._live import LiveService

TRANSITION = re.compile(r"-> \[[0-9X]+\] (\S+) ->")
# (source operationId, link name, target operationId, target status) of every link followed.
FOLLOWED: set[tuple[str, str, str, int]] = set()
# (operationId, status) of every response the stateful run got.
SEEN: set[tuple[str, int]] = set()


@hypothesis.seed(SEED)
class Workflow(SCHEMA.as_state_machine()):  # type: ignore[misc]
    """The generated workflow, wired to the live service and the contract's own checks."""

    live: ClassVar[LiveService]

    def before_call(self, case: Case) -> None:
        # Path parameters come from links here; never swap them for the seeded resources.
        prepare(case, self.live, substitute=False)

    def get_call_kwargs(self, case: Case) -> dict[str, Any]:
        return {"base_url": self.live.url}

    def after_call(self, response: schemathesis.Response, case: Case) -> None:
        super().after_call(response, case)
        LEDGER.count("stateful")
        op, status = operation_id(case), response.status_code
        SEEN.add((op, status))
        node = self.recorder.cases.get(case.id)
        if node is not None and node.transition is not None and node.parent_id is not None:
            parent = self.recorder.cases[node.parent_id].value
            # The transition id reads "POST /runs -> [202] GetRun -> GET /runs/{run_id}".
            link = TRANSITION.search(node.transition.id)
            name = link.group(1) if link else node.transition.id
            FOLLOWED.add((operation_id(parent), name, op, status))

    def validate_response(
        self,
        response: schemathesis.Response,
        case: Case,
        additional_checks: list[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().validate_response(response, case, additional_checks=CUSTOM_CHECKS, **kwargs)


def _declared_links() -> set[tuple[str, str, str]]:
    """(source operationId, status, link name) of every link the spec declares."""
    found = set()
    for item in spec()["paths"].values():
        for operation in item.values():
            if not isinstance(operation, dict) or "operationId" not in operation:
                continue
            for status, response in operation["responses"].items():
                if "$ref" in response:
                    name = response["$ref"].rsplit("/", 1)[1]
                    response = spec()["components"]["responses"][name]
                for link in response.get("links", {}):
                    found.add((operation["operationId"], status, link))
    return found


# Links of the run chain, which Schemathesis reaches only from a random root (a cancel of a run
# an earlier response named) and then may not follow within the budget: test_scenarios.py
# follows it on every run (cancel 202, read the run, cancel again 200).
PROVED_BY_SCENARIOS = {("cancelRun", "202", "GetRun")}


def test_workflows_follow_the_links(live_su: LiveService) -> None:
    SOURCE["name"] = "stateful"
    Workflow.live = live_su
    Workflow.run(
        settings=hypothesis.settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=STATEFUL_MAX_STEPS,
            database=None,
            deadline=None,
            suppress_health_check=list(hypothesis.HealthCheck),
        )
    )
    followed = {(source, link) for source, link, _target, status in FOLLOWED if status < 400}
    # Every link the spec declares on a response this run received must have been followed.
    missing = sorted(
        (source, status, link)
        for source, status, link in _declared_links()
        if (source, int(status)) in SEEN
        and (source, link) not in followed
        and (source, status, link) not in PROVED_BY_SCENARIOS
    )
    assert not missing, f"links never followed to a non-problem answer: {missing}"
    # And the chains the contract is about: create, read, delete. Schemathesis 4.32 makes no
    # root rule of POST /runs (its state machine starts only from personas and webhooks), so
    # the run chain (create, read, cancel, read again) is proved by test_scenarios.py instead.
    steps = {(source, target, status) for source, _link, target, status in FOLLOWED}
    chain = {
        ("createPersona", "getPersona", 200),
        ("createPersona", "deletePersona", 204),
        ("createWebhook", "getWebhook", 200),
        ("createWebhook", "listWebhookDeliveries", 200),
        ("createWebhook", "deleteWebhook", 204),
    }
    assert chain <= steps, f"never followed: {sorted(chain - steps)}"
