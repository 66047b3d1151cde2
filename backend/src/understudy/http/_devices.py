"""Devices as consumers and extensions see them: the tenant's list and the socket ticket."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get, post

from understudy import _security
from understudy._problems import ProblemError
from understudy.generated import models as m
from understudy.generated.protocol import DEVICE_TAB_CAPACITY
from understudy.http._auth import ConsumerDep, DeviceDep, ServicesDep, consumer_guard, device_guard
from understudy.http._parsing import parse, read_body
from understudy.http._responses import json_response, optional_at


@get("/v1/devices", guards=[consumer_guard])
async def list_devices(services: ServicesDep, who: ConsumerDep) -> Response[Any]:
    listed = []
    repos = services.repos
    for device in repos.devices.of_tenant(who.tenant):
        used = len(repos.sessions.holding_capacity(who.tenant, device.device_id))
        listed.append(
            m.Device(
                device_id=device.device_id,
                online=device.online,
                last_seen_at=optional_at(device.last_seen_at),
                capacity=DEVICE_TAB_CAPACITY,
                used_capacity=used,
                protocol_versions=device.protocol_versions,  # type: ignore[arg-type]
                capabilities=device.capabilities,  # type: ignore[arg-type]
                enrolled_at=optional_at(device.enrolled_at),
            )
        )
    return json_response(m.DeviceList(devices=listed), 200)


@post("/v1/device/connect-ticket", guards=[device_guard])
async def connect_ticket(
    request: Request[Any, Any, Any],
    services: ServicesDep,
    device: DeviceDep,
) -> Response[Any]:
    req: m.ConnectTicketRequest = parse(m.ConnectTicketRequest, await read_body(request))
    now = services.clock.now()
    with services.storage.transaction() as tx:
        wait = tx.quotas.take(
            "device_ticket",
            f"{device.tenant}/{device.device_id}",
            services.settings.quota.device_tickets_per_device_per_min,
            now,
        )
    services.telemetry.emit(
        "quota.decision",
        tenant=device.tenant,
        device=device.device_id,
        scope="device_ticket",
        outcome="refused" if wait else "allowed",
    )
    if wait is not None:
        raise ProblemError(
            429, "rate_limited", "too many tickets for this device; retry later", retry_after=wait
        )
    claims = _security.new_ticket_claims(
        aud="device",
        tenant=device.tenant,
        device=device.device_id,
        browser_epoch=str(req.browser_epoch),
        actor=f"device:{device.tenant}/{device.device_id}",
        now=now,
    )
    ticket = _security.sign_ticket(services.keys, claims)
    services.telemetry.emit(
        "ticket.minted", tenant=device.tenant, device=device.device_id, kind="device"
    )
    url = f"{services.settings.socket_base_url}/v1/device/socket?ticket={ticket}"
    return json_response(
        m.ConnectTicket(ticket=ticket, socket_url=url, expires_at=optional_at(claims.exp)), 200
    )
