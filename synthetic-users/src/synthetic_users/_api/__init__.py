"""The Synthetic Users HTTP API (spec/synthetic-users/openapi.yaml).

`create_app(store, artifacts, services=...)` builds it. Every error is problem+json with a stable
`code` (`_problems.py`); request bodies are checked against the generated models, unknown fields
refused. `POST /runs` only validates and writes: the orchestrator (`Services`) is told of the run
and does the work after the answer. Before a run is written its `target_url` must pass the
`TargetPolicy` (public HTTPS only, every resolved address checked) and the key its `RateLimits`.
"""

from __future__ import annotations

from synthetic_users._api._app import create_app
from synthetic_users._api._problems import ProblemError
from synthetic_users._api._ratelimit import RateLimits
from synthetic_users._api._routes import RunDefaults
from synthetic_users._api._services import IdleServices, Services

__all__ = ["IdleServices", "ProblemError", "RateLimits", "RunDefaults", "Services", "create_app"]
