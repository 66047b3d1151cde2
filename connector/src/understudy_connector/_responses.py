"""Reading responses strictly with the generated models."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from pydantic import ValidationError

from understudy_connector._exceptions import ProblemError, ResponseValidationError, problem_class
from understudy_connector.generated._wire import WireModel
from understudy_connector.generated.models import Problem

if TYPE_CHECKING:
    import httpx

M = TypeVar("M", bound=WireModel)

_PROBLEM_TYPES = ("application/problem+json", "application/json")


def parse(response: httpx.Response, model: type[M], operation: str) -> M:
    """The body of `response` as `model`.

    Raises:
        ResponseValidationError: The body is not JSON or does not match the model.
    """
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        # Name the fields and the rules they broke, never the values: a body can carry page text.
        broken = "; ".join(
            f"{'/'.join(str(part) for part in error['loc']) or '(body)'}: {error['type']}"
            for error in exc.errors()[:5]
        )
        raise ResponseValidationError(
            f"the body does not match {model.__name__} ({broken})",
            operation=operation,
            status=response.status_code,
        ) from exc


def problem(response: httpx.Response, operation: str) -> ProblemError:
    """The exception for an error response: the class of its problem `code`.

    Raises:
        ResponseValidationError: The response is not an RFC 9457 problem of the spec's shape.
    """
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in _PROBLEM_TYPES:
        raise ResponseValidationError(
            f"expected application/problem+json, got {media_type or 'no content type'}",
            operation=operation,
            status=response.status_code,
        )
    body = parse(response, Problem, operation)
    if body.status != response.status_code:
        raise ResponseValidationError(
            f"the problem says status {body.status}",
            operation=operation,
            status=response.status_code,
        )
    return problem_class(body.code)(body, retry_after=retry_after(response))


def retry_after(response: httpx.Response) -> float | None:
    """`Retry-After` in seconds, when the response carries the integer form the spec uses."""
    value = response.headers.get("retry-after", "").strip()
    if not value.isdigit():
        return None
    return float(value)


def wait_seconds(response: httpx.Response, default: float) -> float:
    """`Retry-After` in seconds, or `default` when the response has none."""
    seconds = retry_after(response)
    return default if seconds is None else seconds
