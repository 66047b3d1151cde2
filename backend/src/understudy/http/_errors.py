"""Every error as RFC 9457 problem+json: ours, Litestar's own, and the unexpected."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from understudy._problems import ProblemError, problem_response

if TYPE_CHECKING:
    from litestar import Request, Response
    from litestar.exceptions import HTTPException

    from understudy.generated.catalog import ProblemCode

# The logger name the service has always logged these under (log filters may select it).
log = logging.getLogger("understudy.app")

# The code of each error status Litestar raises by itself (routing, limits); any other is a
# malformed request.
LITESTAR_CODES: dict[int, ProblemCode] = {
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def on_problem(request: Request[Any, Any, Any], exc: ProblemError) -> Response[Any]:
    return problem_response(exc)


def on_http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    code = LITESTAR_CODES.get(exc.status_code, "invalid_request")
    headers = dict(exc.headers or {})
    return problem_response(ProblemError(exc.status_code, code, str(exc.detail), headers=headers))


def on_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    # The route template, never the path: paths carry session and command ids.
    log.exception("unhandled error on %s %s", request.method, request.scope.get("path_template"))
    return problem_response(ProblemError(500, "internal_error", "an unexpected error occurred"))
