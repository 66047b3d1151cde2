"""`OperatorClient` and `AsyncOperatorClient`: the operator API of spec/openapi.yaml (`operator`).

Provisioning for the services an operator runs on top of Understudy: enroll and revoke devices,
list a tenant's devices, create consumer keys, enable unattended sessions, put and delete the
secrets `fill_secret` types (`vault:<name>`). Authenticated by an
operator token (`uop_...`, from `understudy operator-tokens create`), never by a consumer key.

Reads, revocations and the settings update are idempotent and are repeated once after a network
error; an enrollment or a key creation is not (a repeat could enroll twice or mint a second key),
so a network error there is `BackendUnreachable` at once. Problems raise the connector's
`ProblemError` classes (`DeviceExists`, `OperatorApiDisabled`, `Unauthorized`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import httpx

from understudy_connector import _responses
from understudy_connector._exceptions import BackendUnreachable, SecretNotFound, UsageError
from understudy_connector.generated.models import (
    ApiKeyCreated,
    ApiKeyRequest,
    DeviceEnrollment,
    DeviceEnrollmentRequest,
    OperatorDevice,
    OperatorDeviceList,
    TenantSettings,
    TenantSettingsUpdate,
    VaultSecretValue,
)

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

    from understudy_connector.generated._wire import WireModel

M = TypeVar("M", bound="WireModel")

USER_AGENT: Final = "understudy-connector/0.1.0 (operator)"
DEFAULT_HTTP_TIMEOUT: Final = 30.0
_IDEMPOTENT: Final = frozenset({"GET", "PUT", "DELETE"})


@dataclass(frozen=True)
class _Call:
    """One operator request and what its success looks like."""

    operation: str
    method: str
    path: str
    ok: frozenset[int]
    model: type[Any] | None  # None: the success has no body (204)
    body: dict[str, Any] | None = None

    @property
    def attempts(self) -> int:
        return 2 if self.method in _IDEMPOTENT else 1


def _tenant_path(tenant: str, tail: str = "") -> str:
    if not tenant or "/" in tenant:
        raise UsageError(f"{tenant!r} is no tenant name (lowercase letters, digits, '.', '_', '-')")
    return f"/v1/operator/tenants/{tenant}{tail}"


def _list_devices(tenant: str) -> _Call:
    path = _tenant_path(tenant, "/devices")
    return _Call("listTenantDevices", "GET", path, frozenset({200}), OperatorDeviceList)


def _enroll(tenant: str, device_id: str, rotate: bool) -> _Call:
    body = DeviceEnrollmentRequest(device_id=device_id, rotate=rotate)
    path = _tenant_path(tenant, "/devices")
    return _Call(
        "enrollDevice", "POST", path, frozenset({200, 201}), DeviceEnrollment, body.to_wire()
    )


def _revoke(tenant: str, device_id: str) -> _Call:
    if not device_id or "/" in device_id:
        raise UsageError(f"{device_id!r} is no device id")
    path = _tenant_path(tenant, f"/devices/{device_id}")
    return _Call("revokeDevice", "DELETE", path, frozenset({200}), OperatorDevice)


def _create_key(tenant: str, actor: str) -> _Call:
    body = ApiKeyRequest(actor=actor).to_wire()
    path = _tenant_path(tenant, "/api-keys")
    return _Call("createApiKey", "POST", path, frozenset({201}), ApiKeyCreated, body)


def _settings(tenant: str, unattended_enabled: bool) -> _Call:
    body = TenantSettingsUpdate(unattended_enabled=unattended_enabled).to_wire()
    path = _tenant_path(tenant, "/settings")
    return _Call("updateTenantSettings", "PUT", path, frozenset({200}), TenantSettings, body)


def _secret_path(tenant: str, name: str) -> str:
    if not name or "/" in name or name.startswith("vault:"):
        raise UsageError(f"{name!r} is no secret name (pass the name without 'vault:')")
    return _tenant_path(tenant, f"/secrets/{name}")


def _put_secret(tenant: str, name: str, value: str) -> _Call:
    body = VaultSecretValue(value=value).to_wire()
    path = _secret_path(tenant, name)
    return _Call("putVaultSecret", "PUT", path, frozenset({204}), None, body)


def _delete_secret(tenant: str, name: str) -> _Call:
    path = _secret_path(tenant, name)
    return _Call("deleteVaultSecret", "DELETE", path, frozenset({204}), None)


def _headers(token: str) -> dict[str, str]:
    if not token:
        raise UsageError("an operator token is required (uop_..., `understudy operator-tokens`)")
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, application/problem+json",
        "User-Agent": USER_AGENT,
    }


def _read(call: _Call, response: httpx.Response) -> Any:
    if response.status_code in call.ok:
        if call.model is None:
            return None
        return _responses.parse(response, call.model, call.operation)
    raise _responses.problem(response, call.operation)


def _unreachable(call: _Call, error: httpx.TransportError) -> BackendUnreachable:
    return BackendUnreachable(f"{call.operation}: the backend is unreachable ({error})")


class OperatorClient:
    """A blocking client of the operator API.

    Args:
        base_url: The service origin, e.g. `http://127.0.0.1:8787`.
        operator_token: An operator token (`uop_...`); sent only in the `Authorization` header.
        transport: An httpx transport (tests pass `httpx.MockTransport`).
        http_timeout: Seconds per HTTP request.
    """

    def __init__(
        self,
        base_url: str,
        operator_token: str,
        *,
        transport: httpx.BaseTransport | None = None,
        http_timeout: float = DEFAULT_HTTP_TIMEOUT,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url,
            headers=_headers(operator_token),
            transport=transport,
            timeout=http_timeout,
            follow_redirects=False,
        )

    def __repr__(self) -> str:  # never the token
        return f"OperatorClient({str(self._http.base_url)!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _perform(self, call: _Call) -> Any:
        for attempt in range(call.attempts):
            try:
                response = self._http.request(call.method, call.path, json=call.body)
            except httpx.TransportError as error:
                if attempt + 1 == call.attempts:
                    raise _unreachable(call, error) from error
                continue
            return _read(call, response)
        raise AssertionError("unreachable")  # pragma: no cover

    def list_devices(self, tenant: str) -> OperatorDeviceList:
        """Every device ever enrolled in `tenant`, revoked ones included."""
        result: OperatorDeviceList = self._perform(_list_devices(tenant))
        return result

    def enroll_device(
        self, tenant: str, device_id: str, *, rotate: bool = False
    ) -> DeviceEnrollment:
        """Enroll a device; its `credential` is in the answer and never shown again.

        Raises:
            DeviceExists: the id is enrolled (and `rotate` is False) or was revoked.
        """
        result: DeviceEnrollment = self._perform(_enroll(tenant, device_id, rotate))
        return result

    def revoke_device(self, tenant: str, device_id: str) -> OperatorDevice:
        """Revoke a device (idempotent); its sockets close with 4410.

        Raises:
            DeviceNotFound: no such device was ever enrolled in the tenant.
        """
        result: OperatorDevice = self._perform(_revoke(tenant, device_id))
        return result

    def create_api_key(self, tenant: str, actor: str) -> ApiKeyCreated:
        """A new consumer API key for (`tenant`, `actor`); `api_key` is shown this once."""
        result: ApiKeyCreated = self._perform(_create_key(tenant, actor))
        return result

    def set_unattended(self, tenant: str, enabled: bool) -> TenantSettings:
        """Set the tenant's durable unattended flag (the server setting still applies too)."""
        result: TenantSettings = self._perform(_settings(tenant, enabled))
        return result

    def put_secret(self, tenant: str, name: str, value: str) -> None:
        """Store `value` as `vault:<name>` in `tenant`'s vault (replacing it); never read back.

        Idempotent, so repeated once after a network error like the other PUTs.
        """
        self._perform(_put_secret(tenant, name, value))

    def delete_secret(self, tenant: str, name: str) -> bool:
        """Delete `vault:<name>` from `tenant`'s vault; False when there was none."""
        try:
            self._perform(_delete_secret(tenant, name))
        except SecretNotFound:
            return False
        return True


class AsyncOperatorClient:
    """An asyncio client of the operator API; the same operations as `OperatorClient`.

    Args:
        base_url: The service origin, e.g. `http://127.0.0.1:8787`.
        operator_token: An operator token (`uop_...`); sent only in the `Authorization` header.
        transport: An httpx transport (tests pass `httpx.MockTransport`).
        http_timeout: Seconds per HTTP request.
    """

    def __init__(
        self,
        base_url: str,
        operator_token: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        http_timeout: float = DEFAULT_HTTP_TIMEOUT,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=_headers(operator_token),
            transport=transport,
            timeout=http_timeout,
            follow_redirects=False,
        )

    def __repr__(self) -> str:  # never the token
        return f"AsyncOperatorClient({str(self._http.base_url)!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _perform(self, call: _Call) -> Any:
        for attempt in range(call.attempts):
            try:
                response = await self._http.request(call.method, call.path, json=call.body)
            except httpx.TransportError as error:
                if attempt + 1 == call.attempts:
                    raise _unreachable(call, error) from error
                continue
            return _read(call, response)
        raise AssertionError("unreachable")  # pragma: no cover

    async def list_devices(self, tenant: str) -> OperatorDeviceList:
        """Every device ever enrolled in `tenant`, revoked ones included."""
        result: OperatorDeviceList = await self._perform(_list_devices(tenant))
        return result

    async def enroll_device(
        self, tenant: str, device_id: str, *, rotate: bool = False
    ) -> DeviceEnrollment:
        """Enroll a device; see `OperatorClient.enroll_device`."""
        call = _enroll(tenant, device_id, rotate)
        result: DeviceEnrollment = await self._perform(call)
        return result

    async def revoke_device(self, tenant: str, device_id: str) -> OperatorDevice:
        """Revoke a device (idempotent); see `OperatorClient.revoke_device`."""
        result: OperatorDevice = await self._perform(_revoke(tenant, device_id))
        return result

    async def create_api_key(self, tenant: str, actor: str) -> ApiKeyCreated:
        """A new consumer API key for (`tenant`, `actor`); `api_key` is shown this once."""
        result: ApiKeyCreated = await self._perform(_create_key(tenant, actor))
        return result

    async def set_unattended(self, tenant: str, enabled: bool) -> TenantSettings:
        """Set the tenant's durable unattended flag (the server setting still applies too)."""
        result: TenantSettings = await self._perform(_settings(tenant, enabled))
        return result

    async def put_secret(self, tenant: str, name: str, value: str) -> None:
        """Store `value` as `vault:<name>`; see `OperatorClient.put_secret`."""
        await self._perform(_put_secret(tenant, name, value))

    async def delete_secret(self, tenant: str, name: str) -> bool:
        """Delete `vault:<name>`; False when there was none (see `OperatorClient.delete_secret`)."""
        try:
            await self._perform(_delete_secret(tenant, name))
        except SecretNotFound:
            return False
        return True
