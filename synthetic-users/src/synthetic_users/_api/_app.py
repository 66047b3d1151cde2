"""`create_app`: the Synthetic Users HTTP API as a Litestar app."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any

from litestar import Litestar, Response, get
from litestar.exceptions import HTTPException

from synthetic_users._api._allow import complete_allow
from synthetic_users._api._credentials import CREDENTIAL_ROUTES
from synthetic_users._api._hooks import ROUTES as HOOK_ROUTES
from synthetic_users._api._problems import ProblemError, on_error, on_http, on_problem
from synthetic_users._api._ratelimit import RateLimits
from synthetic_users._api._routes import ROUTES, ApiState, RunDefaults
from synthetic_users._api._services import IdleServices
from synthetic_users._safety._credentials import Credentials, Keyring
from synthetic_users._safety._ssrf import TargetPolicy

if TYPE_CHECKING:
    from collections.abc import Callable

    from synthetic_users._api._services import Services
    from synthetic_users._artifacts import ArtifactStore
    from synthetic_users._store import RunRecord, Store


class _Callbacks(IdleServices):
    """`Services` from two plain callbacks (for tests and simple embeddings)."""

    def __init__(
        self,
        created: Callable[[RunRecord], None] | None,
        cancelled: Callable[[RunRecord], None] | None,
    ) -> None:
        self._created = created
        self._cancelled = cancelled

    def run_created(self, run: RunRecord) -> None:
        if self._created is not None:
            self._created(run)

    def run_cancelled(self, run: RunRecord) -> None:
        if self._cancelled is not None:
            self._cancelled(run)


@get(["/docs", "/docs/api.html"], include_in_schema=False)
async def reference() -> Response[Any]:
    # Packaged with the code by codegen, so an installed wheel serves the same page.
    page = resources.files("synthetic_users.generated").joinpath("reference/api.html")
    return Response(page.read_bytes(), media_type="text/html")


def create_app(
    store: Store,
    artifacts: ArtifactStore,
    *,
    services: Services | None = None,
    on_run_created: Callable[[RunRecord], None] | None = None,
    on_run_cancelled: Callable[[RunRecord], None] | None = None,
    defaults: RunDefaults | None = None,
    targets: TargetPolicy | None = None,
    limits: RateLimits | None = None,
    allow_loopback: bool = False,
    credentials: Credentials | None = None,
) -> Litestar:
    """The ASGI app over `store` and `artifacts`.

    Args:
        store: The service's durable state (already migrated: `Store.open`).
        artifacts: Where reports, transcripts and screenshots are read from.
        services: Started and stopped with the app (the orchestrator); told of each run created
            and cancelled. Default: none, runs stay `queued`.
        on_run_created: Instead of `services`, a callback for each run created (after it is
            durable, before the `202`); it must not block.
        on_run_cancelled: Likewise, for each run cancelled.
        defaults: `turn_budget` and `model` of a run whose request leaves them out.
        targets: Which `target_url`s a run may have: by default public HTTPS hosts only, checked
            with the system resolver (`TargetPolicy`).
        limits: Rate limits per API key and active runs per customer; by default none (`serve`
            passes the settings' limits).
        allow_loopback: Accept loopback webhook endpoints (`http://127.0.0.1:…`), for local
            development only.
        credentials: Where `POST /credentials` seals passwords (`serve` passes the one under
            the service's master key). Default: a throw-away master key for this process, so
            what is stored cannot be decrypted after a restart (tests only).
    """
    if services is None:
        services = _Callbacks(on_run_created, on_run_cancelled)
    elif on_run_created is not None or on_run_cancelled is not None:
        raise TypeError("pass services or the on_run_* callbacks, not both")
    state = ApiState(
        store,
        artifacts,
        services,
        defaults or RunDefaults(),
        targets or TargetPolicy(),
        limits or RateLimits(),
        credentials or Credentials(store.db, Keyring.ephemeral()),
    )

    async def startup() -> None:
        await state.services.start()

    async def shutdown() -> None:
        await state.services.stop()

    # Imported here, not at the top: the dashboard's modules import the API's.
    from synthetic_users._dashboard import dashboard_router

    app = Litestar(
        # The dashboard (issue 18): its own router, pages under /dashboard.
        route_handlers=[
            *ROUTES,
            *HOOK_ROUTES,
            *CREDENTIAL_ROUTES,
            reference,
            dashboard_router(),
        ],
        exception_handlers={
            ProblemError: on_problem,
            HTTPException: on_http,
            Exception: on_error,
        },
        on_startup=[startup],
        on_shutdown=[shutdown],
        before_send=[complete_allow],
        openapi_config=None,
        debug=False,
    )
    app.state.api = state
    app.state.allow_loopback = allow_loopback
    return app
