"""The Litestar application: every route of the package, its dependencies and error handlers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litestar import Litestar
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException

from understudy._problems import ProblemError
from understudy.http import _commands, _devices, _operations, _operator, _sessions, _sockets
from understudy.http._auth import DEPENDENCIES
from understudy.http._errors import on_error, on_http, on_problem
from understudy.http._parsing import MAX_BODY_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable

    from litestar.types import ASGIApp, Message, Receive, Scope, Send

    from understudy._services import Services
    from understudy._store._db import Database

# In registration order: an OPTIONS handler comes before the others of its path (see
# `_sessions.session_options`).
ROUTES = [
    _sessions.create_session,
    _sessions.session_options,
    _sessions.get_session,
    _sessions.delete_session,
    _commands.submit_command,
    _commands.poll_command,
    _devices.list_devices,
    _devices.connect_ticket,
    _operator.operator_devices_options,
    _operator.list_tenant_devices,
    _operator.enroll_device,
    _operator.revoke_device,
    _operator.create_api_key,
    _operator.update_tenant_settings,
    _operator.operator_secret_options,
    _operator.put_vault_secret,
    _operator.delete_vault_secret,
    _sockets.device_socket,
    _sockets.session_socket,
    _operations.healthz,
    _operations.readyz,
    _operations.metrics,
    _operations.reference,
    _operations.openapi_document,
]


def _durable_responses(db: Database) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware: an HTTP response starts only once every turn taken so far is durable.

    With group commit a handler may read state another actor wrote in the open group (same
    connection); the caller must never learn of anything a crash could still take back.
    """

    def middleware(app: ASGIApp) -> ASGIApp:
        async def durable_app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return

            async def send_when_durable(message: Message) -> None:
                if message["type"] == "http.response.start":
                    await db.durable()
                await send(message)

            await app(scope, receive, send_when_durable)

        return durable_app

    return middleware


def create_app(services: Services) -> Litestar:
    """The ASGI app; `services` are started and stopped with it."""

    async def startup() -> None:
        await services.start()

    async def shutdown() -> None:
        await services.stop()

    app = Litestar(
        route_handlers=ROUTES,
        dependencies=DEPENDENCIES,
        exception_handlers={
            ProblemError: on_problem,
            HTTPException: on_http,
            Exception: on_error,
        },
        middleware=[_durable_responses(services.db)],
        on_startup=[startup],
        on_shutdown=[shutdown],
        openapi_config=None,
        request_max_body_size=MAX_BODY_BYTES * 4,
        debug=False,
    )
    app.state.services = services
    return app
