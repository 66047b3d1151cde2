"""Every route carries the guard its credential needs, and only routes that need none go without."""

from __future__ import annotations

import inspect

import pytest
from litestar.handlers import HTTPRouteHandler

from understudy.http._app import ROUTES
from understudy.http._auth import consumer_guard, device_guard, operator_guard

# Routes anyone may call: probes, references, OPTIONS answers; the sockets check tickets.
OPEN = {"healthz", "readyz", "metrics", "reference", "openapi_document"}


def _http_routes() -> list[HTTPRouteHandler]:
    return [r for r in ROUTES if isinstance(r, HTTPRouteHandler)]


@pytest.mark.parametrize("handler", _http_routes(), ids=lambda h: h.handler_name)
def test_every_route_is_guarded_by_the_credential_of_its_path(handler: HTTPRouteHandler) -> None:
    guards = list(handler.guards or [])
    path = next(iter(handler.paths))
    if handler.handler_name in OPEN or "OPTIONS" in handler.http_methods:
        assert guards == []
    elif path.startswith("/v1/operator/"):
        assert guards == [operator_guard]
    elif path.startswith("/v1/device/"):
        assert guards == [device_guard]
    else:
        assert path.startswith("/v1/")
        assert guards == [consumer_guard]


@pytest.mark.parametrize("handler", _http_routes(), ids=lambda h: h.handler_name)
def test_a_principal_is_injected_only_behind_the_guard_that_sets_it(
    handler: HTTPRouteHandler,
) -> None:
    parameters = inspect.signature(handler.fn).parameters
    guards = list(handler.guards or [])
    assert ("who" in parameters) == (consumer_guard in guards)
    assert ("device" in parameters) == (device_guard in guards)
