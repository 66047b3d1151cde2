"""RFC 9457 problem responses with a stable machine `code`.

Handlers raise `ProblemError`; one exception handler renders it. Titles are fixed per code, so a
caller branches on `code` alone and a person still reads something sensible.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from litestar import Request, Response

if TYPE_CHECKING:
    from litestar.exceptions import HTTPException

PROBLEM_TYPE_BASE: Final = "https://understudy.dev/synthetic-users/problems/"
MEDIA_TYPE: Final = "application/problem+json"
log = logging.getLogger(__name__)

TITLES: Final[dict[str, str]] = {
    "validation_failed": "Validation failed",
    "invalid_json": "The body is not JSON",
    "unauthorized": "Unauthorized",
    "run_not_found": "Run not found",
    "session_not_found": "Session not found",
    "persona_not_found": "Persona not found",
    "credential_not_found": "Credential not found",
    "artifact_not_found": "Artifact not found",
    "idempotency_conflict": "Idempotency key reused with another request",
    "not_found": "Not found",
    "method_not_allowed": "Method not allowed",
    "payload_too_large": "Payload too large",
    "internal_error": "Internal error",
    "target_not_allowed": "Target not allowed",
    "target_unresolvable": "Target does not resolve",
    "run_expired": "Run expired",
    "rate_limited": "Rate limited",
    "too_many_active_runs": "Too many active runs",
    "webhook_not_found": "Webhook not found",
}


class ProblemError(Exception):
    """An HTTP error answered as problem+json."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str | None = None,
        *,
        errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {detail or ''}")
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = errors
        self.headers = dict(headers or {})


def validation_failed(errors: list[dict[str, str]]) -> ProblemError:
    """`400 validation_failed` naming each rejected field (a JSON pointer or a parameter)."""
    first = errors[0]
    return ProblemError(
        400, "validation_failed", f"{first['path']}: {first['message']}", errors=errors
    )


def field_error(path: str, message: str) -> ProblemError:
    return validation_failed([{"path": path, "message": message}])


def problem_response(error: ProblemError) -> Response[dict[str, Any]]:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + error.code,
        "title": TITLES.get(error.code, error.code.replace("_", " ").capitalize()),
        "status": error.status,
        "code": error.code,
    }
    if error.detail:
        body["detail"] = error.detail
    if error.errors:
        body["errors"] = error.errors
    return Response(body, status_code=error.status, media_type=MEDIA_TYPE, headers=error.headers)


def on_problem(request: Request[Any, Any, Any], exc: ProblemError) -> Response[Any]:
    return problem_response(exc)


def on_http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    """Litestar's own errors (no route, wrong method, body too large) in the house format."""
    code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
        exc.status_code, "validation_failed"
    )
    return problem_response(
        ProblemError(exc.status_code, code, str(exc.detail), headers=dict(exc.headers or {}))
    )


def on_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    # The route template, never the path: paths carry run and session ids.
    log.exception("unhandled error on %s %s", request.method, request.scope.get("path_template"))
    return problem_response(ProblemError(500, "internal_error", "an unexpected error occurred"))
