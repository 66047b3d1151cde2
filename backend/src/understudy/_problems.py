"""RFC 9457 problem responses with a stable machine `code`.

Handlers raise `ProblemError`; one exception handler renders it. Titles are fixed per code so a
caller can branch on `code` alone and a human still reads something sensible; they come from the
spec's problem catalog, and `tests/backend/unit/test_problems.py` fails on a code sent from the
service that the catalog does not title.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from litestar import Response

from understudy.generated.catalog import PROBLEM_TITLES

if TYPE_CHECKING:
    from collections.abc import Mapping

PROBLEM_TYPE_BASE = "https://understudy.dev/problems/"
MEDIA_TYPE = "application/problem+json"

# The spec's problem catalog (`components.x-understudy-problems`), by code.
TITLES: Final[Mapping[str, str]] = PROBLEM_TITLES


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
        # A code missing from the catalog is a defect its test catches; never a 500 on top.
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
