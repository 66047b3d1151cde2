"""RFC 9457 problem responses with a stable machine `code`.

Handlers raise `ProblemError`; one exception handler renders it. Titles are fixed per code so a
caller can branch on `code` alone and a human still reads something sensible.
"""

from __future__ import annotations

from typing import Any

from litestar import Response

PROBLEM_TYPE_BASE = "https://understudy.dev/problems/"
MEDIA_TYPE = "application/problem+json"

TITLES: dict[str, str] = {
    "invalid_request": "Invalid request",
    "unauthorized": "Unauthorized",
    "unattended_disabled": "Unattended sessions are disabled for this tenant",
    "device_not_found": "Device not found",
    "session_not_found": "Session not found",
    "command_not_found": "Command not found",
    "idempotency_conflict": "Idempotency key reused with another request",
    "origin_conflict": "Origins conflict with the device's sessions or policy",
    "profile_conflict": "Profile-state key already live on the device",
    "capacity_exhausted": "Device capacity exhausted",
    "rate_limited": "Rate limited",
    "no_device_available": "No compatible device online",
    "not_ready": "Not ready",
    "command_outcome_unknown": "Command outcome unknown",
    "command_id_conflict": "Command id reused with another request",
    "session_terminal": "Session terminal",
    "protocol_upgrade_required": "Protocol upgrade required",
    "session_busy": "Session busy",
    "session_unavailable": "Session unavailable",
    "command_not_started": "Command not started",
    "command_timed_out": "Command timed out",
    "not_found": "Not found",
    "method_not_allowed": "Method not allowed",
    "unsupported_media_type": "Unsupported media type",
    "payload_too_large": "Payload too large",
    "request_timeout": "Request timeout",
    "internal_error": "Internal error",
}


class ProblemError(Exception):
    """An HTTP error answered as problem+json."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str | None = None,
        *,
        retry_after: float | None = None,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(f"{status} {code}: {detail or ''}")
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = dict(headers or {})
        if retry_after is not None:
            self.headers["Retry-After"] = str(max(0, int(retry_after + 0.999)))
        self.extensions = extensions


def problem_response(error: ProblemError, instance: str | None = None) -> Response[dict[str, Any]]:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + error.code,
        "title": TITLES.get(error.code, error.code.replace("_", " ").capitalize()),
        "status": error.status,
        "code": error.code,
    }
    if error.detail:
        body["detail"] = error.detail
    if instance:
        body["instance"] = instance
    body.update({_camel(k): v for k, v in error.extensions.items() if v is not None})
    return Response(body, status_code=error.status, media_type=MEDIA_TYPE, headers=error.headers)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def invalid_request(detail: str, errors: list[dict[str, str]] | None = None) -> ProblemError:
    return ProblemError(400, "invalid_request", detail, errors=errors or None)
