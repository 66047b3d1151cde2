"""Named scenarios for the documented outcomes fuzzing does not reach on its own.

Each drives the live service with real HTTP requests (replays and conflicts of an
`Idempotency-Key`, cancels, deletes, oversized bodies, downloads before the work ended, another
customer's ids) and judges every response by the spec through `conforms`, which also records it
for the coverage test.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from tests.contract_su._live import PERSONA, WEBHOOK_URL
from tests.contract_su._scenario import conforms

if TYPE_CHECKING:
    from tests.contract_su._live import LiveService

RUN = {"target_url": "https://shop.example.com/", "task": "Buy a kettle", "personas": [PERSONA]}
# Over the 256 KiB every body may carry, and valid JSON: only its size is wrong.
HUGE = "x" * (300 * 1024)
SESSION_FILES = {
    "transcript.json.gz": "getSessionTranscript",
    "report.json": "getSessionReportJson",
    "report.md": "getSessionReportMarkdown",
    "report.html": "getSessionReportHtml",
}
RUN_FILES = {
    "report.json": "getRunReportJson",
    "report.md": "getRunReportMarkdown",
    "report.html": "getRunReportHtml",
}
UNKNOWN_SESSION = "ses_" + "0" * 32


def _name(request: pytest.FixtureRequest) -> str:
    return str(request.node.name)


def test_a_replayed_create_is_200_and_another_body_under_its_key_409(
    live_su: LiveService, request: pytest.FixtureRequest
) -> None:
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = live_su.http.post("/runs", json=RUN, headers=key)
    conforms("createRun", first, 202, body=RUN, source=_name(request))
    again = live_su.http.post("/runs", json=RUN, headers=key)
    conforms("createRun", again, 200, body=RUN, source=_name(request))
    assert again.json()["run_id"] == first.json()["run_id"]
    other = {**RUN, "task": "Buy a toaster"}
    conflict = live_su.http.post("/runs", json=other, headers=key)
    conforms("createRun", conflict, 409, "idempotency_conflict", body=other, source=_name(request))


def test_cancelling_a_queued_run_is_202_and_cancelling_it_again_200(
    live_su: LiveService, request: pytest.FixtureRequest
) -> None:
    run_id = live_su.http.post("/runs", json=RUN).json()["run_id"]
    path = {"run_id": run_id}
    cancelled = live_su.http.delete(f"/runs/{run_id}")
    conforms("cancelRun", cancelled, 202, path=path, source=_name(request))
    assert cancelled.json()["status"] == "cancelled"
    read = live_su.http.get(f"/runs/{run_id}")  # the 202's GetRunAgain link
    conforms("getRun", read, 200, path=path, source=_name(request))
    assert read.json()["status"] == "cancelled"
    again = live_su.http.delete(f"/runs/{run_id}")
    conforms("cancelRun", again, 200, path=path, source=_name(request))


def test_a_deleted_persona_is_204_then_404(
    live_su: LiveService, request: pytest.FixtureRequest
) -> None:
    created = live_su.http.post("/personas", json=PERSONA)
    conforms("createPersona", created, 201, body=PERSONA, source=_name(request))
    persona_id = created.json()["persona_id"]
    path = {"persona_id": persona_id}
    deleted = live_su.http.delete(f"/personas/{persona_id}")
    conforms("deletePersona", deleted, 204, path=path, source=_name(request))
    gone = live_su.http.get(f"/personas/{persona_id}")
    conforms("getPersona", gone, 404, "persona_not_found", path=path, source=_name(request))
    again = live_su.http.delete(f"/personas/{persona_id}")
    conforms("deletePersona", again, 404, "persona_not_found", path=path, source=_name(request))


def test_a_deleted_webhook_is_204_then_404(
    live_su: LiveService, request: pytest.FixtureRequest
) -> None:
    body = {"url": f"{WEBHOOK_URL}/scenario", "events": ["run.completed"]}
    created = live_su.http.post("/webhooks", json=body)
    conforms("createWebhook", created, 201, body=body, source=_name(request))
    webhook_id = created.json()["webhook_id"]
    path = {"webhook_id": webhook_id}
    deleted = live_su.http.delete(f"/webhooks/{webhook_id}")
    conforms("deleteWebhook", deleted, 204, path=path, source=_name(request))
    gone = live_su.http.get(f"/webhooks/{webhook_id}")
    conforms("getWebhook", gone, 404, "webhook_not_found", path=path, source=_name(request))
    deliveries = live_su.http.get(f"/webhooks/{webhook_id}/deliveries")
    conforms(
        "listWebhookDeliveries",
        deliveries,
        404,
        "webhook_not_found",
        path=path,
        source=_name(request),
    )


@pytest.mark.parametrize(
    ("operation_id", "path", "body"),
    [
        ("createRun", "/runs", {**RUN, "task": HUGE}),
        ("createPersona", "/personas", {**PERSONA, "background": HUGE}),
        ("createWebhook", "/webhooks", {"url": WEBHOOK_URL, "events": [HUGE]}),
    ],
)
def test_a_body_over_256_kib_is_413(
    live_su: LiveService,
    request: pytest.FixtureRequest,
    operation_id: str,
    path: str,
    body: dict[str, Any],
) -> None:
    response = live_su.http.post(path, json=body)
    conforms(operation_id, response, 413, "payload_too_large", body=body, source=_name(request))


def test_downloads_before_the_work_ended_are_artifact_not_found(
    live_su: LiveService, request: pytest.FixtureRequest
) -> None:
    run_id = live_su.queued_run
    session_id = live_su.call(lambda: live_su.store.sessions(run_id)[0].session_id)
    for name, operation_id in RUN_FILES.items():
        response = live_su.http.get(f"/runs/{run_id}/{name}")
        conforms(
            operation_id,
            response,
            404,
            "artifact_not_found",
            path={"run_id": run_id},
            source=_name(request),
        )
        assert "when the run ends" in response.json()["detail"]
    for name, operation_id in SESSION_FILES.items():
        response = live_su.http.get(f"/runs/{run_id}/sessions/{session_id}/{name}")
        conforms(
            operation_id,
            response,
            404,
            "artifact_not_found",
            path={"run_id": run_id, "session_id": session_id},
            source=_name(request),
        )
    screenshot = live_su.http.get(f"/runs/{run_id}/sessions/{session_id}/screenshots/step-0001.png")
    conforms(
        "getSessionScreenshot",
        screenshot,
        404,
        "artifact_not_found",
        path={"run_id": run_id, "session_id": session_id, "name": "step-0001.png"},
        source=_name(request),
    )


@pytest.mark.parametrize("name", [*SESSION_FILES, "screenshots/step-0002.png", ""])
def test_an_unknown_session_of_a_known_run_is_session_not_found(
    live_su: LiveService, request: pytest.FixtureRequest, name: str
) -> None:
    operation_id = SESSION_FILES.get(name, "getSessionScreenshot" if name else "getSession")
    suffix = f"/{name}" if name else ""
    response = live_su.http.get(f"/runs/{live_su.run_id}/sessions/{UNKNOWN_SESSION}{suffix}")
    path = {"run_id": live_su.run_id, "session_id": UNKNOWN_SESSION}
    if operation_id == "getSessionScreenshot":
        path["name"] = "step-0002.png"
    conforms(operation_id, response, 404, "session_not_found", path=path, source=_name(request))


def test_another_customers_run_is_run_not_found(
    live_su: LiveService, request: pytest.FixtureRequest
) -> None:
    # The seeded completed run, read with the other customer's key: it does not exist for them.
    response = live_su.http.get(
        f"/runs/{live_su.run_id}", headers={"Authorization": f"Bearer {live_su.other_key}"}
    )
    conforms(
        "getRun",
        response,
        404,
        "run_not_found",
        path={"run_id": live_su.run_id},
        source=_name(request),
    )
