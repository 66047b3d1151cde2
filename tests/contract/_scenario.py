"""Named scenarios for the statuses fuzzing cannot reach, judged by the same checks as the fuzzer.

A scenario runs its own backend (the harness of the backend tests: uvicorn, SQLite, a manual
clock) with simulated devices misbehaving on purpose, sends real HTTP requests, and passes each
response through `Scenario.conforms`: the status and code it expects, then the spec's built-in
conformance checks (status, content type, headers, schema) and the contract's own checks.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.contract._checks import CUSTOM_CHECKS, SOURCE, track_request_secrets
from tests.contract._ledger import LEDGER
from tests.contract._schema import SCHEMA
from understudy import _security
from understudy.generated import models as m

if TYPE_CHECKING:
    import httpx

    from tests.backend.conftest import Backend
    from tests.support.simdevice import Behaviour, SimulatedDevice

CONFORMANCE = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def unattended(
    origins: list[str] | None = None, profile: str = "scenario-profile-a", **extra: Any
) -> dict[str, Any]:
    return {
        "mode": "unattended",
        "allowedOrigins": origins or ["https://example.com"],
        "profileStateKey": profile,
        **extra,
    }


def command(body: dict[str, Any], command_id: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"commandId": command_id or str(uuid.uuid4()), "command": body, **extra}


@dataclass
class Scenario:
    """One named scenario's backend, and the bookkeeping of what it observed."""

    name: str
    backend: Backend
    tenant: str = "acme"

    def key(self, tenant: str | None = None) -> str:
        token = self.backend.api_key(tenant or self.tenant)
        LEDGER.secret(token)
        LEDGER.secret(_security.token_digest(token))
        return token

    def client(self, tenant: str | None = None) -> httpx.AsyncClient:
        return self.backend.client(self.key(tenant))

    async def device(
        self, device: str = "laptop-1", behaviour: Behaviour | None = None, connect: bool = True
    ) -> SimulatedDevice:
        sim = await self.backend.device(self.tenant, device, behaviour, connect)
        LEDGER.secret(sim.credential)
        LEDGER.secret(_security.token_digest(sim.credential))
        return sim

    async def later(self, request: Any, seconds: float) -> httpx.Response:
        """Send `request`, then let `seconds` pass on the manual clock while it waits."""
        task = asyncio.ensure_future(request)
        await self.backend.settle()
        await self.backend.clock.advance(seconds)
        await self.backend.settle()
        response: httpx.Response = await task
        return response

    def conforms(
        self,
        operation_id: str,
        response: httpx.Response,
        status: int,
        code: str | None = None,
        *,
        path: dict[str, str] | None = None,
        body: Any = NOT_SET,
    ) -> httpx.Response:
        """Assert the expected outcome, then judge the response by the spec and record it."""
        assert response.status_code == status, response.text
        if code is not None:
            assert response.json()["code"] == code, response.text
        for device in self.backend.devices:
            for frame in device.frames:
                if isinstance(frame, m.DeviceServerSessionTicket):
                    LEDGER.secret(frame.ticket)
        case = SCHEMA.find_operation_by_id(operation_id).Case(path_parameters=path or {}, body=body)
        track_request_secrets(case, self.backend.services.keys, self.tenant, chosen=True)
        SOURCE["name"] = self.name
        LEDGER.count("scenario")
        case.validate_response(response, checks=CONFORMANCE, additional_checks=CUSTOM_CHECKS)
        return response
