"""Successful answers: a generated model serialised in its wire form."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from litestar import Response

from understudy._views import at

if TYPE_CHECKING:
    from understudy.generated._wire import WireModel

JSON = "application/json"


class Durability:
    """What one request's answer depends on; `durable`: only on turns already committed."""

    __slots__ = ("durable",)

    def __init__(self) -> None:
        self.durable = False


# The request being answered (set by the app's `_durable_responses` middleware for each one).
# A holder rather than the flag itself: a handler marks it in whatever context it runs in.
CURRENT: ContextVar[Durability | None] = ContextVar("understudy_durability", default=None)


def answer_is_durable() -> None:
    """Mark the current request's answer as built only from state of committed turns, so it
    starts without waiting for the open group commit. Only for such answers: one that could
    show a write of the open group must wait, or a crash could take back what it told."""
    current = CURRENT.get()
    if current is not None:
        current.durable = True


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
