"""What an operator's tooling reads: health, readiness, metrics and the packaged references."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Final

from litestar import Request, Response, get
from litestar.params import FromPath

from understudy._metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from understudy._problems import ProblemError
from understudy._reference import PAGES as REFERENCE_PAGES
from understudy._reference import page as page_bytes
from understudy._store._migrations import LATEST, current_version
from understudy.generated import models as m
from understudy.http._auth import ServicesDep
from understudy.http._responses import json_response

if TYPE_CHECKING:
    from understudy._services import Services

_log = logging.getLogger(__name__)

# A load balancer's probe must get an answer, not wait out the pool's own 10 s timeout.
READINESS_DB_TIMEOUT_S: Final = 2.0
# One database check in flight per service: probes arriving while it runs share its answer
# (while the database is down, each check can hold a thread until the pool gives up).
_checks: dict[int, asyncio.Future[int]] = {}


@get("/healthz")
async def healthz() -> Response[Any]:
    return json_response(m.Health(status="ok"), 200)


@get("/readyz")
async def readyz(services: ServicesDep) -> Response[Any]:
    if not services.ready:
        raise ProblemError(503, "not_ready", "starting up or shutting down")
    try:
        version = await _schema_version(services)
    except Exception as exc:  # whatever the engine raised, the answer is the same: not ready
        _log.warning("readiness: the database check failed: %s", type(exc).__name__)
        raise ProblemError(
            503, "database_unavailable", "the database did not answer the readiness check"
        ) from None
    if version != LATEST:
        raise ProblemError(
            503,
            "schema_not_current",
            f"the database is at schema version {version}; this build's is {LATEST}",
        )
    node = services.node
    if node is not None and not node.heartbeat_ok:
        # The other nodes take this one's sockets over once its heartbeat is old: it must not
        # take new ones meanwhile.
        raise ProblemError(
            503, "not_ready", f"node {node.node_id}: its heartbeat does not reach the database"
        )
    health = m.Health(
        status="ok", schema_version=version, node=node.node_id if node is not None else None
    )
    return json_response(health, 200)


async def _schema_version(services: Services) -> int:
    """The schema version, read through the engine: proof it can hand out a connection.

    SQLite answers from a local file on the event loop's own connection. PostgreSQL's pool may
    wait for a connection, so the read runs in a thread, bounded by ``READINESS_DB_TIMEOUT_S``.
    """
    if services.db.storage.dialect.name != "postgresql":
        return current_version(services.db)
    key = id(services)
    check = _checks.get(key)
    if check is None:
        check = asyncio.ensure_future(asyncio.to_thread(current_version, services.db))
        _checks[key] = check
        check.add_done_callback(lambda done: _finished(key, done))
    return await asyncio.wait_for(asyncio.shield(check), READINESS_DB_TIMEOUT_S)


@get("/metrics")
async def metrics(services: ServicesDep) -> Response[bytes]:
    return Response(services.metrics.render(), media_type=METRICS_CONTENT_TYPE)


@get(["/", "/docs", "/docs/{page:str}"], include_in_schema=False)
async def reference(page: FromPath[str] = "api.html") -> Response[Any]:
    if page not in ("api.html", "frames.html"):
        raise ProblemError(404, "not_found", "no such page; see /docs")
    return _reference_file(page)


@get(["/openapi.yaml", "/openapi.json"], include_in_schema=False)
async def openapi_document(request: Request[Any, Any, Any]) -> Response[Any]:
    return _reference_file(request.url.path.removeprefix("/"))


def _reference_file(name: str) -> Response[Any]:
    # Packaged with the code (codegen copies them into understudy.generated), so an installed
    # wheel serves the same references as a checkout.
    return Response(page_bytes(name), media_type=REFERENCE_PAGES[name][1])


def _finished(key: int, check: asyncio.Future[int]) -> None:
    _checks.pop(key, None)
    if not check.cancelled():
        check.exception()  # retrieved: a probe that timed out no longer awaits it
