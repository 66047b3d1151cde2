"""Successful answers: a generated model serialised in its wire form."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from litestar import Response

from understudy._views import at

if TYPE_CHECKING:
    from understudy.generated._wire import WireModel

JSON = "application/json"


def json_response(
    model: WireModel, status: int, headers: dict[str, str] | None = None
) -> Response[Any]:
    """`model` as `application/json` with `status` (and `headers`)."""
    return Response(model.to_wire(), status_code=status, media_type=JSON, headers=headers or {})


def optional_at(ts: float | None) -> Any:
    """The wire timestamp of `ts`, or None when there is none."""
    return at(ts) if ts is not None else None
