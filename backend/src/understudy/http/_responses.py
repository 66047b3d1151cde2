"""Successful answers: a generated model serialised in its wire form."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from litestar import Response

from understudy._views import at

if TYPE_CHECKING:
    from understudy.generated._wire import WireModel

JSON = "application/json"


def json_response(
    model: WireModel | bytes, status: int, headers: dict[str, str] | None = None
) -> Response[Any]:
    """`model` (or its JSON text already) as `application/json` with `status` (and `headers`)."""
    # Serialised by pydantic straight to bytes (Litestar sends bytes as they are), rather than
    # dumped to a dict for Litestar's encoder to walk again.
    body = model if isinstance(model, bytes) else model.to_wire_json().encode()
    return Response(body, status_code=status, media_type=JSON, headers=headers or {})


def optional_at(ts: float | None) -> Any:
    """The wire timestamp of `ts`, or None when there is none."""
    return at(ts) if ts is not None else None
