"""`OPTIONS` answers `Allow` with every method of the path, not only its first handler's.

Litestar 2 builds the automatic `OPTIONS` answer from the first handler registered on a path, so
`/runs` (POST and GET, two handlers) claimed `Allow: OPTIONS, POST` (litestar-org/litestar#4169,
fixed in v3; the contract fuzzer's `unsupported_method` check found it). This `before_send` hook
rewrites the header from the methods the app routes on that path, so every path with several
handlers (now or added later) answers the truth without a handler of its own.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from litestar.datastructures import MutableScopeHeaders

if TYPE_CHECKING:
    from litestar.types import Message, Scope

# Routes name parameters with their type (`{run_id:str}`), the scope's template without.
_TYPED: Final = re.compile(r"\{(\w+):\w+\}")


def _methods_by_path(app: Any) -> dict[str, str]:
    cached: dict[str, str] | None = getattr(app.state, "allow_by_path", None)
    if cached is None:
        cached = {
            _TYPED.sub(r"{\1}", route.path): ", ".join(sorted(route.methods))
            for route in app.routes
            if getattr(route, "methods", None)
        }
        app.state.allow_by_path = cached
    return cached


async def complete_allow(message: Message, scope: Scope) -> None:
    """On an `OPTIONS` answer, set `Allow` to every method routed on the path."""
    if message["type"] != "http.response.start" or scope.get("method") != "OPTIONS":
        return
    allow = _methods_by_path(scope["app"]).get(str(scope.get("path_template", "")))
    if allow is not None:
        headers = MutableScopeHeaders.from_message(message)
        if "allow" in headers:
            headers["allow"] = allow
