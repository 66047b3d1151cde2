"""The Synthetic Users HTTP API (spec/synthetic-users/openapi.yaml).

`create_app(store, artifacts, services=...)` builds it. Every error is problem+json with a stable
`code` (`_problems.py`); request bodies are checked against the generated models, unknown fields
refused. `POST /runs` only validates and writes: the orchestrator (`Services`) is told of the run
and does the work after the answer.
"""

from __future__ import annotations

from synthetic_users._api._app import create_app
from synthetic_users._api._problems import ProblemError
from synthetic_users._api._routes import RunDefaults
from synthetic_users._api._services import IdleServices, Services

__all__ = ["IdleServices", "ProblemError", "RunDefaults", "Services", "create_app"]
