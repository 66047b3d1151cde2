"""`/v1/operator/tenants/{tenant}/…`: devices, API keys, tenant settings and the vault.

Every route but the OPTIONS answers runs behind `operator_guard`.
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING, Any

from litestar import HttpMethod, Request, Response, delete, get, post, put, route
from litestar.params import FromPath

from understudy import _security
from understudy._problems import ProblemError, invalid_request
from understudy._store import vault
from understudy.generated import models as m
from understudy.generated.protocol import DEVICE_TAB_CAPACITY
from understudy.http._auth import ServicesDep, operator_guard
from understudy.http._parsing import parse, read_body
from understudy.http._responses import json_response, optional_at

if TYPE_CHECKING:
    from understudy._services import Services
    from understudy._store.credentials import Device

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_SECRET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_DEVICES_PATH = "/v1/operator/tenants/{tenant:str}/devices"
_VAULT_PATH = "/v1/operator/tenants/{tenant:str}/secrets/{name:str}"


def _path_name(value: str, parameter: str) -> str:
    if not _NAME.fullmatch(value):
        message = "use 1-64 lowercase letters, digits, '.', '_' or '-', starting alphanumeric"
        raise invalid_request(f"{parameter}: {message}", [{"path": parameter, "message": message}])
    return value


def _secret_name(value: str) -> str:
    # The SecretRef pattern of spec/frames/commands.json, without its `vault:` prefix.
    if not _SECRET_NAME.fullmatch(value):
        message = "use 1-128 letters, digits, '.', '_' or '-', starting alphanumeric"
        raise invalid_request(f"name: {message}", [{"path": "name", "message": message}])
    return value


def _operator_device(services: Services, device: Device) -> m.OperatorDevice:
    used = len(services.repos.sessions.holding_capacity(device.tenant, device.device_id))
    revoked = device.revoked_at is not None
    online = device.online and not revoked
    return m.OperatorDevice(
        device_id=device.device_id,
        state="revoked" if revoked else "online" if online else "offline",
        online=online,
        capacity=DEVICE_TAB_CAPACITY,
        used_capacity=used,
        enrolled_at=optional_at(device.enrolled_at),
        last_seen_at=optional_at(device.last_seen_at),
        revoked_at=optional_at(device.revoked_at),
    )


@route(_DEVICES_PATH, http_method=HttpMethod.OPTIONS, status_code=204, include_in_schema=False)
async def operator_devices_options() -> Response[None]:
    # Two handlers on one path: the Litestar 2 OPTIONS defect of `session_options` again.
    return Response(None, status_code=204, headers={"Allow": "GET, OPTIONS, POST"})


@get(_DEVICES_PATH, guards=[operator_guard])
async def list_tenant_devices(services: ServicesDep, tenant: FromPath[str]) -> Response[Any]:
    name = _path_name(tenant, "tenant")
    devices = services.repos.devices.of_tenant(name, include_revoked=True)
    listed = [_operator_device(services, device) for device in devices]
    return json_response(m.OperatorDeviceList(tenant=name, devices=listed), 200)


@post(_DEVICES_PATH, guards=[operator_guard])
async def enroll_device(
    request: Request[Any, Any, Any], services: ServicesDep, tenant: FromPath[str]
) -> Response[Any]:
    name = _path_name(tenant, "tenant")
    req: m.DeviceEnrollmentRequest = parse(m.DeviceEnrollmentRequest, await read_body(request))
    token = _security.generate_token("device")
    digest = _security.token_digest(token)
    now = services.clock.now()
    device_id = str(req.device_id)
    with services.storage.transaction() as tx:
        existing = tx.devices.get(name, device_id)
        if existing is not None and (existing.revoked_at is not None or not req.rotate):
            state = "was revoked" if existing.revoked_at is not None else "is enrolled"
            raise ProblemError(
                409,
                "device_exists",
                f"device {device_id} {state} in tenant {name} already; "
                + (
                    "a revoked id is never reused, enroll the profile under a new id"
                    if existing.revoked_at is not None
                    else "send rotate: true to give it a new credential, or choose a new id"
                ),
            )
        if existing is None:
            tx.devices.add(tenant=name, device_id=device_id, digest=digest, now=now)
            enrolled_at, status = now, 201
        else:
            tx.devices.rotate_credential(name, device_id, digest)
            enrolled_at, status = existing.enrolled_at, 200
    return json_response(
        m.DeviceEnrollment(
            tenant=name, device_id=device_id, credential=token, enrolled_at=optional_at(enrolled_at)
        ),
        status,
    )


@delete(f"{_DEVICES_PATH}/{{device_id:str}}", status_code=200, guards=[operator_guard])
async def revoke_device(
    services: ServicesDep, tenant: FromPath[str], device_id: FromPath[str]
) -> Response[Any]:
    name = _path_name(tenant, "tenant")
    device_name = _path_name(device_id, "deviceId")
    with services.storage.transaction() as tx:
        tx.devices.revoke(name, device_name, services.clock.now())
        device = tx.devices.get(name, device_name)
    if device is None:
        raise ProblemError(
            404, "device_not_found", f"no device {device_name} was ever enrolled in tenant {name}"
        )
    await services.db.durable()
    await services.revocations.sweep()  # its sockets close now, not at the next watch tick
    return json_response(_operator_device(services, device), 200)


@post("/v1/operator/tenants/{tenant:str}/api-keys", guards=[operator_guard])
async def create_api_key(
    request: Request[Any, Any, Any], services: ServicesDep, tenant: FromPath[str]
) -> Response[Any]:
    name = _path_name(tenant, "tenant")
    req: m.ApiKeyRequest = parse(m.ApiKeyRequest, await read_body(request))
    token = _security.generate_token("consumer")
    key_id = "key_" + secrets.token_hex(6)
    now = services.clock.now()
    with services.storage.transaction() as tx:
        tx.api_keys.add(
            digest=_security.token_digest(token),
            key_id=key_id,
            tenant=name,
            actor=req.actor,
            now=now,
        )
    return json_response(
        m.ApiKeyCreated(
            key_id=key_id, tenant=name, actor=req.actor, api_key=token, created_at=optional_at(now)
        ),
        201,
    )


@put("/v1/operator/tenants/{tenant:str}/settings", guards=[operator_guard])
async def update_tenant_settings(
    request: Request[Any, Any, Any], services: ServicesDep, tenant: FromPath[str]
) -> Response[Any]:
    name = _path_name(tenant, "tenant")
    req: m.TenantSettingsUpdate = parse(m.TenantSettingsUpdate, await read_body(request))
    with services.storage.transaction() as tx:
        tx.operators.set_unattended_flag(name, req.unattended_enabled, services.clock.now())
    by_setting = name in services.settings.unattended_enabled_tenants
    return json_response(
        m.TenantSettings(
            tenant=name,
            unattended_enabled=by_setting or req.unattended_enabled,
            unattended_flag=req.unattended_enabled,
            unattended_by_setting=by_setting,
        ),
        200,
    )


@route(_VAULT_PATH, http_method=HttpMethod.OPTIONS, status_code=204, include_in_schema=False)
async def operator_secret_options() -> Response[None]:
    # Two handlers on one path: the Litestar 2 OPTIONS defect of `session_options` again.
    return Response(None, status_code=204, headers={"Allow": "DELETE, OPTIONS, PUT"})


@put(_VAULT_PATH, status_code=204, guards=[operator_guard])
async def put_vault_secret(
    request: Request[Any, Any, Any],
    services: ServicesDep,
    tenant: FromPath[str],
    name: FromPath[str],
) -> Response[None]:
    tenant_name = _path_name(tenant, "tenant")
    secret_name = _secret_name(name)
    req: m.VaultSecretValue = parse(m.VaultSecretValue, await read_body(request))
    with services.storage.transaction() as tx:
        vault.put(
            tx.vault, services.keys, tenant_name, secret_name, req.value, services.clock.now()
        )
    # A `fill_secret` sent right after the 204 must find it, even after a crash in between.
    await services.db.durable()
    return Response(None, status_code=204)


@delete(_VAULT_PATH, status_code=204, guards=[operator_guard])
async def delete_vault_secret(
    services: ServicesDep, tenant: FromPath[str], name: FromPath[str]
) -> Response[None]:
    tenant_name = _path_name(tenant, "tenant")
    secret_name = _secret_name(name)
    with services.storage.transaction() as tx:
        done = tx.vault.delete(tenant_name, secret_name)
    if not done:
        raise ProblemError(
            404,
            "secret_not_found",
            f"tenant {tenant_name}'s vault holds no secret vault:{secret_name}",
        )
    await services.db.durable()
    return Response(None, status_code=204)
