"""Stateful testing: Schemathesis chains operations along the OpenAPI links of spec/openapi.yaml.

A scenario creates a session, then follows the links the responses offer: read it, submit
commands, poll them, delete it. The checks that need history (use_after_free,
ensure_resource_availability) run here, with the recorder of each scenario.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

import hypothesis

from tests.contract._checks import CUSTOM_CHECKS, SOURCE, operation_id, spec
from tests.contract._driving import end_session, prepare, remember
from tests.contract._ledger import LEDGER
from tests.contract._schema import SCHEMA, SEED, STATEFUL_EXAMPLES, STATEFUL_MAX_STEPS

if TYPE_CHECKING:
    import schemathesis

    from tests.contract._checks import Case
    from tests.contract._live import LiveBackend

TRANSITION = re.compile(r"-> \[[0-9X]+\] (\S+) ->")
# (source operationId, link name, target operationId, target status) of every link followed.
FOLLOWED: set[tuple[str, str, str, int]] = set()
# (operationId, status) of every response the stateful run got.
SEEN: set[tuple[str, int]] = set()


# The consumer's workflows only. Operator operations (tag `operator`) change what every later
# step sees (a tenant's devices, keys, vault), so Hypothesis, replaying a failing workflow against
# the live backend, met different responses and stopped with FlakyStrategyDefinition instead of
# the failure; they are covered by the fuzz run (on a sandbox tenant) and by the scenarios.
@hypothesis.seed(SEED)
class Workflow(SCHEMA.exclude(tag="operator").as_state_machine()):  # type: ignore[misc]
    """The generated workflow, wired to the live backend and the contract's own checks."""

    live: ClassVar[LiveBackend]

    def setup(self) -> None:
        self.created: list[str] = []

    def before_call(self, case: Case) -> None:
        # Path parameters come from links here; never swap them for the live session.
        prepare(case, self.live, substitute=False)
        for ticket in self.live.new_tickets():
            LEDGER.secret(ticket)

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
            # The transition id reads "POST /v1/sessions -> [201] GetSession -> GET /v1/...".
            link = TRANSITION.search(node.transition.id)
            name = link.group(1) if link else node.transition.id
            FOLLOWED.add((operation_id(parent), name, op, status))
        remember(case, response)
        if op == "createSession" and status in (200, 201, 202):
            session_id = response.json()["sessionId"]
            self.created.append(session_id)
            # A DELETE racing the session ticket stops the simulated device (see _live.py).
            self.live.wait_session_socket(session_id)
        if op == "deleteSession" and status == 202:
            # 202 means cleanup started; wait for the extension's close_ack, as a caller polling
            # the tombstone would, so reads after the DELETE meet a terminal session.
            self.live.wait_terminal(case.path_parameters["sessionId"])

    def validate_response(
        self,
        response: schemathesis.Response,
        case: Case,
        additional_checks: list[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().validate_response(response, case, additional_checks=CUSTOM_CHECKS, **kwargs)

    def teardown(self) -> None:
        for session_id in self.created:
            end_session(self.live, session_id)
        super().teardown()


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


def test_workflows_follow_the_links(live: LiveBackend) -> None:
    SOURCE["name"] = "stateful"
    Workflow.live = live
    Workflow.run(
        settings=hypothesis.settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=STATEFUL_MAX_STEPS,
            database=None,
            deadline=None,
            suppress_health_check=list(hypothesis.HealthCheck),
        )
    )
    # A link is followed when its target answered without a problem: a 2xx, or the tombstone
    # (410, application/json) a read after a delete gets.
    followed = {
        (source, link)
        for source, link, target, status in FOLLOWED
        if status < 400 or (target, status) == ("getSession", 410)
    }
    # Every link the spec declares on a response this run received must have been followed.
    missing = sorted(
        (source, status, link)
        for source, status, link in _declared_links()
        if (source, int(status)) in SEEN and (source, link) not in followed
    )
    assert not missing, f"links never followed to a non-problem answer: {missing}"
    # And the chain the contract is about: create, read, command, poll, delete, read the tombstone.
    steps = {(source, target, status) for source, _link, target, status in FOLLOWED}
    chain = {
        ("createSession", "getSession", 200),
        ("createSession", "submitCommand", 200),
        ("submitCommand", "pollCommand", 200),
        ("createSession", "deleteSession", 202),
        ("deleteSession", "getSession", 410),
    }
    assert chain <= steps, f"never followed: {sorted(chain - steps)}"
