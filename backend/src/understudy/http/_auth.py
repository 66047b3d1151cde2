"""Who is calling: the three credentials as Litestar guards, and the principal as a dependency.

A guard runs before Litestar reads the body or resolves any parameter, so a request without a
valid credential is refused (401, or 403 with the operator API off) before anything else about
it is looked at, as the spec's error order says. The consumer guard leaves the authenticated
`Consumer` in the connection state, where the `who` dependency hands it to the handler.

The guards are coroutines although they never await: Litestar runs a synchronous guard in a
worker thread, which costs a thread hop per request and would touch the process's one SQLite
connection from outside the event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

# Litestar reads the providers' signatures at run time, so what they name is imported for real.
from litestar import Request  # noqa: TC002
from litestar.datastructures import State  # noqa: TC002
from litestar.di import NamedDependency, Provide
from litestar.params import SkipValidation

from understudy import _security
from understudy._problems import ProblemError
from understudy._services import Services
from understudy._store.credentials import Device

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from litestar.connection import ASGIConnection
    from litestar.handlers.base import BaseRouteHandler

T = TypeVar("T")
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="understudy"'}


@dataclass(frozen=True)
class Consumer:
    """An authenticated API key: the tenant and actor it acts for."""

    tenant: str
    actor: str
    digest: str  # of the API key, to end this request's waits if the key is revoked


def services_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Services:
    """The process's `Services`, kept in the app state by `create_app`."""
    services: Services = connection.app.state.services
    return services


def _bearer(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    return bearer_token(connection.headers.getall("authorization", []))


def bearer_token(values: list[str]) -> str | None:
    """The token of the one `Authorization: Bearer …` header among `values`, if any."""
    if len(values) > 1:
        # Authorization is not a list field, so RFC 9110 §5.3 forbids sending it twice; with
        # two, a proxy and the service could each authenticate a different credential.
        raise ProblemError(
            401, "unauthorized", "send exactly one Authorization header", headers=_CHALLENGE
        )
    header = values[0] if values else ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _unauthorized() -> ProblemError:
    return ProblemError(
        401,
        "unauthorized",
        "send a valid credential as 'Authorization: Bearer …'",
        headers=_CHALLENGE,
    )


def _backstop(services: Services, digest: str) -> None:
    """The approximate per-credential abuse backstop (SQLite quotas stay authoritative)."""
    wait = services.limiter.hit(digest)
    if wait is not None:
        raise ProblemError(
            429, "rate_limited", "too many requests with this credential", retry_after=wait
        )


async def consumer_guard(
    connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
) -> None:
    """Admit a live consumer API key; its `Consumer` becomes the `who` dependency."""
    connection.state.consumer = authenticate_consumer(services_of(connection), _bearer(connection))


def authenticate_consumer(services: Services, token: str | None) -> Consumer:
    """The `Consumer` of a live consumer API key, or 401 (429 past the backstop)."""
    if token is None or _security.token_kind(token) != "consumer":
        services.telemetry.emit("auth.refused", kind="consumer", reason="malformed")
        raise _unauthorized()
    digest = _security.token_digest(token)
    key = services.repos.api_keys.by_digest(digest)
    if key is None or key.revoked_at is not None:
        services.telemetry.emit("auth.refused", kind="consumer", reason="unknown_or_revoked")
        raise _unauthorized()
    _backstop(services, digest)
    services.telemetry.emit("auth.accepted", kind="consumer", tenant=key.tenant, actor=key.actor)
    return Consumer(key.tenant, key.actor, digest)


async def device_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Admit a live device credential; its `Device` becomes the `device` dependency."""
    services = services_of(connection)
    token = _bearer(connection)
    if token is None or _security.token_kind(token) != "device":
        services.telemetry.emit("auth.refused", kind="device", reason="malformed")
        raise _unauthorized()
    digest = _security.token_digest(token)
    device = services.repos.devices.by_digest(digest)
    if device is None or device.revoked_at is not None:
        services.telemetry.emit("auth.refused", kind="device", reason="unknown_or_revoked")
        raise _unauthorized()
    _backstop(services, digest)
    services.telemetry.emit(
        "auth.accepted", kind="device", tenant=device.tenant, device=device.device_id
    )
    connection.state.device = device


async def operator_guard(
    connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
) -> None:
    """Admit a live operator token; 401 for any other credential.

    With no active operator token at all the operator API is off (403), whatever was sent.
    A consumer key or device credential is refused without a lookup: it is the wrong kind.
    """
    services = services_of(connection)
    token = _bearer(connection)
    if not services.repos.operators.any_active():
        services.telemetry.emit("auth.refused", kind="operator", reason="operator_api_disabled")
        raise ProblemError(
            403,
            "operator_api_disabled",
            "no operator token exists, so the operator API is off; create one with "
            "`understudy operator-tokens create --name NAME` and send it as 'Authorization: "
            "Bearer uop_…'",
        )
    if token is None or _security.token_kind(token) != "operator":
        services.telemetry.emit("auth.refused", kind="operator", reason="malformed")
        raise _unauthorized()
    digest = _security.token_digest(token)
    found = services.repos.operators.token_by_digest(digest)
    if found is None or found.revoked_at is not None:
        services.telemetry.emit("auth.refused", kind="operator", reason="unknown_or_revoked")
        raise _unauthorized()
    _backstop(services, digest)
    services.telemetry.emit("auth.accepted", kind="operator")


def _services(state: State) -> Services:
    services: Services = state.services
    return services


# How a handler asks for them: by name, handed over as they are (they are the process's own
# objects, not wire data for the signature model to validate).
ServicesDep: TypeAlias = NamedDependency[SkipValidation[Services]]
ConsumerDep: TypeAlias = NamedDependency[SkipValidation[Consumer]]
DeviceDep: TypeAlias = NamedDependency[SkipValidation[Device]]


# The principal's providers name `services` although they do not use it: Litestar resolves
# dependencies that do not depend on each other concurrently, in an anyio task group with a task
# each, which costs more than the whole guard; chained, each is awaited in place.
def _consumer(request: Request[Any, Any, Any], services: ServicesDep) -> Consumer:
    who: Consumer = request.state.consumer
    return who


def _device(request: Request[Any, Any, Any], services: ServicesDep) -> Device:
    device: Device = request.state.device
    return device


# The app's dependencies, by parameter name: `services` everywhere; `who` and `device` behind
# `consumer_guard` and `device_guard`, which set what they return.
DEPENDENCIES: dict[str, Provide] = {
    "services": Provide(_services, sync_to_thread=False),
    "who": Provide(_consumer, sync_to_thread=False),
    "device": Provide(_device, sync_to_thread=False),
}


async def unless_revoked(services: Services, who: Consumer, waiting: Awaitable[T]) -> T:
    """Await `waiting`, unless the caller's key is revoked first: then 401 at once.

    The waits are pure waits (turns inside them are shielded), so cancelling one loses
    nothing: the command or session it watched keeps its durable state. A revocation cancels
    the request's own task, as `asyncio.timeout` does, rather than racing a second task.
    """
    current = asyncio.current_task()
    assert current is not None  # noqa: S101 - a request runs in a task
    revoked = False

    def revoke() -> None:
        nonlocal revoked
        if not revoked:
            revoked = True
            current.cancel()

    with services.revocations.key_waits(who.digest, revoke):
        try:
            return await waiting
        except asyncio.CancelledError:
            # Ours only if the revocation asked for it and nothing else cancelled the request.
            if not revoked or current.uncancel() > 0:
                raise
    services.telemetry.emit("auth.refused", kind="consumer", reason="revoked_while_waiting")
    raise ProblemError(
        401,
        "unauthorized",
        "the API key was revoked while this request waited; what it started stays as it is",
        headers=_CHALLENGE,
    )
