"""Documented outcomes fuzzing does not reach: limits reached, runs expired, and a few more.

- `429 rate_limited` on every operation the per-key request limit guards: one service whose keys
  may send one request a minute; `429 too_many_active_runs` on `createRun`: one whose customers
  may have one active run (the seeded queued run is it).
- `410 run_expired` on every run, session and artifact operation: one service whose completed
  run the retention sweeper deleted (its clock a year on).
- Credentials deleted (204, then 404), a credential body over 256 KiB (413), a target that
  does not resolve (400 `target_unresolvable`), on the shared live service.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import pytest

from synthetic_users._api._ratelimit import RateLimits
from synthetic_users._artifacts import DirectoryStore
from synthetic_users._retention import RetentionSweeper
from synthetic_users.generated.catalog import PROBLEM_CODES
from tests.contract_su._checks import operations
from tests.contract_su._live import SCREENSHOT, UNRESOLVABLE, LiveServer
from tests.contract_su._scenario import conforms
from tests.contract_su.test_scenarios import HUGE, RUN

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.contract_su._live import LiveService

YEAR_S = 366 * 86_400
# Operations that name a run (and so answer 410 once it expired).
RUN_OPERATIONS = sorted(
    op for op, by_status in PROBLEM_CODES.items() if "run_expired" in by_status.get("410", [])
)
LIMITED_OPERATIONS = sorted(
    op for op, by_status in PROBLEM_CODES.items() if "rate_limited" in by_status.get("429", [])
)


def _url(op: str, live: LiveService) -> tuple[str, str, dict[str, str]]:
    """The method, URL path and path parameters of `op` on the live service's resources."""
    method, template = operations()[op]
    values = {
        "run_id": live.run_id,
        "session_id": live.session_id,
        "persona_id": live.personas[0],
        "webhook_id": live.webhook_id,
        "credential_id": live.credential_id,
        "name": SCREENSHOT.removesuffix(".png"),
    }
    params = {k: v for k, v in values.items() if "{" + k + "}" in template}
    path = template
    for name, value in params.items():
        path = path.replace("{" + name + "}", value)
    return method, path, params


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    server = LiveServer(tmp_path_factory.mktemp("limited"), RateLimits(requests_per_minute=1))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    server = LiveServer(tmp_path_factory.mktemp("busy"), RateLimits(max_active_runs=1))
    try:
        yield server.start()
    finally:
        server.stop()


def _sweep_a_year_on(server: LiveServer, live: LiveService) -> list[str]:
    later = time.time() + YEAR_S
    sweeper = RetentionSweeper(
        live.store, DirectoryStore(server.root / "artifacts"), clock=lambda: later
    )

    async def sweep() -> list[str]:
        return sweeper.sweep()  # on the service's own thread, which owns the connection

    return asyncio.run_coroutine_threadsafe(sweep(), live.loop).result(30)


@pytest.fixture(scope="module")
def expired(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    server = LiveServer(tmp_path_factory.mktemp("expired"))
    try:
        live = server.start()
        assert live.run_id in _sweep_a_year_on(server, live)
        yield live
    finally:
        server.stop()


def _send(live: LiveService, op: str) -> tuple[Any, dict[str, str], Any]:
    method, path, params = _url(op, live)
    body: Any = None
    if method == "POST":
        body = {"run": RUN, "persona": {"name": "x"}}.get(op.removeprefix("create").lower(), {})
    response = live.http.request(method, path, json=body)
    return response, params, body


@pytest.mark.parametrize("op", LIMITED_OPERATIONS)
def test_past_the_request_limit_every_operation_is_429(limited: LiveService, op: str) -> None:
    limited.http.get("/runs")  # spends the key's one request of this minute (or none is left)
    response, params, _body = _send(limited, op)
    conforms(op, response, 429, "rate_limited", path=params, source="request limit")
    assert int(response.headers["retry-after"]) >= 1


def test_past_the_active_runs_bound_create_run_is_429(busy: LiveService) -> None:
    response = busy.http.post("/runs", json=RUN)
    conforms("createRun", response, 429, "too_many_active_runs", body=RUN, source="active runs")
    assert int(response.headers["retry-after"]) >= 1


@pytest.mark.parametrize("op", RUN_OPERATIONS)
def test_an_expired_run_is_410_on_every_run_operation(expired: LiveService, op: str) -> None:
    response, params, _body = _send(expired, op)
    conforms(op, response, 410, "run_expired", path=params, source="retention")


def test_a_deleted_credential_is_204_then_404(live_su: LiveService) -> None:
    body = {"name": "scenario", "username": "u", "password": "p-123456", "origin": None}
    body = {k: v for k, v in body.items() if v is not None}
    created = live_su.http.post("/credentials", json=body)
    conforms("createCredential", created, 201, body=body, source="credentials")
    credential_id = created.json()["credential_id"]
    path = {"credential_id": credential_id}
    deleted = live_su.http.delete(f"/credentials/{credential_id}")
    conforms("deleteCredential", deleted, 204, path=path, source="credentials")
    again = live_su.http.delete(f"/credentials/{credential_id}")
    conforms(
        "deleteCredential", again, 404, "credential_not_found", path=path, source="credentials"
    )


def test_a_credential_body_over_256_kib_is_413(live_su: LiveService) -> None:
    body = {"name": "big", "username": "u", "password": HUGE}
    response = live_su.http.post("/credentials", json=body)
    conforms("createCredential", response, 413, "payload_too_large", body=body, source="413")


def test_a_target_that_does_not_resolve_is_400_target_unresolvable(live_su: LiveService) -> None:
    body = {**RUN, "target_url": f"https://{UNRESOLVABLE}/"}
    response = live_su.http.post("/runs", json=body)
    conforms("createRun", response, 400, "target_unresolvable", body=body, source="targets")


def test_a_target_that_is_not_a_public_https_host_is_400_target_not_allowed(
    live_su: LiveService,
) -> None:
    body = {**RUN, "target_url": "http://shop.example.com/"}
    response = live_su.http.post("/runs", json=body)
    conforms("createRun", response, 400, "target_not_allowed", body=body, source="targets")


def test_a_saved_persona_reads_back_200(live_su: LiveService) -> None:
    # Fuzzing reaches it only when a generated id happens to be swapped for a saved one.
    path = {"persona_id": live_su.personas[0]}
    response = live_su.http.get(f"/personas/{live_su.personas[0]}")
    conforms("getPersona", response, 200, path=path, source="personas")
