"""What an operator's tooling reads: health, readiness, metrics and the packaged references."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.params import FromPath

from understudy._metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from understudy._problems import ProblemError
from understudy._reference import PAGES as REFERENCE_PAGES
from understudy._reference import page as page_bytes
from understudy.generated import models as m
from understudy.http._auth import ServicesDep
from understudy.http._responses import json_response


@get("/healthz")
async def healthz() -> Response[Any]:
    return json_response(m.Health(status="ok"), 200)


@get("/readyz")
async def readyz(services: ServicesDep) -> Response[Any]:
    if not services.ready:
        raise ProblemError(503, "not_ready", "starting up or shutting down")
    return json_response(
        m.Health(status="ok", schema_version=services.storage.schema_version()), 200
    )


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
