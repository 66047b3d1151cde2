"""The operator clients against the running backend: provisioning without touching its database."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.backend.conftest import start_backend, stop_backend
from tests.support.simdevice import SimulatedDevice
from understudy_connector import (
    AsyncClient,
    AsyncOperatorClient,
    BackendUnreachable,
    DeviceExists,
    DeviceNotFound,
    OperatorApiDisabled,
    OperatorClient,
    Unauthorized,
    UsageError,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from tests.backend.conftest import Backend


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[Backend]:
    running = await start_backend(tmp_path)
    try:
        yield running
    finally:
        await stop_backend(running)


async def test_the_async_client_provisions_a_tenant_end_to_end(backend: Backend) -> None:
    async with AsyncOperatorClient(backend.url, backend.operator_token()) as operator:
        settings = await operator.set_unattended("synthetic-users", True)
        assert settings.unattended_enabled
        enrolled = await operator.enroll_device("synthetic-users", "su-browser-1")
        with pytest.raises(DeviceExists):
            await operator.enroll_device("synthetic-users", "su-browser-1")
        key = await operator.create_api_key("synthetic-users", "fleet")
        device = SimulatedDevice(backend.url, enrolled.credential)
        backend.devices.append(device)
        await device.connect()
        async with AsyncClient(backend.url, key.api_key) as consumer:
            listed = await consumer.list_devices()
        assert [(d.device_id, d.online) for d in listed.devices] == [("su-browser-1", True)]
        revoked = await operator.revoke_device("synthetic-users", "su-browser-1")
        assert revoked.state == "revoked"
        with pytest.raises(DeviceNotFound):
            await operator.revoke_device("synthetic-users", "su-browser-9")
        assert [d.state for d in (await operator.list_devices("synthetic-users")).devices] == [
            "revoked"
        ]


async def test_the_blocking_client_rotates_a_credential(backend: Backend) -> None:
    token = backend.operator_token()

    def provision() -> tuple[str, str]:
        with OperatorClient(backend.url, token) as operator:
            first = operator.enroll_device("acme", "laptop-1").credential
            second = operator.enroll_device("acme", "laptop-1", rotate=True).credential
            return first, second

    first, second = await asyncio.to_thread(provision)
    assert first != second
    device = SimulatedDevice(backend.url, second)
    backend.devices.append(device)
    assert (await device.connect()).device_id == "laptop-1"


async def test_refusals_raise_their_problem_classes(backend: Backend) -> None:
    async with AsyncOperatorClient(backend.url, backend.api_key()) as wrong:
        with pytest.raises(OperatorApiDisabled):
            await wrong.list_devices("acme")
        backend.operator_token()
        with pytest.raises(Unauthorized):
            await wrong.list_devices("acme")
    with pytest.raises(UsageError):
        AsyncOperatorClient(backend.url, "")


async def test_a_network_error_on_an_enrollment_is_not_repeated() -> None:
    calls: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        raise httpx.ConnectError("refused", request=request)

    transport = httpx.MockTransport(refuse)
    async with AsyncOperatorClient("http://op.test", "uop_x", transport=transport) as operator:
        with pytest.raises(BackendUnreachable):
            await operator.enroll_device("acme", "laptop-1")
        assert calls == ["POST"]
        with pytest.raises(BackendUnreachable):
            await operator.list_devices("acme")
    assert calls == ["POST", "GET", "GET"]


async def test_both_clients_put_and_delete_a_vault_secret(backend: Backend) -> None:
    from understudy._store import vault

    token = backend.operator_token()

    def reveal() -> str | None:
        return vault.reveal(backend.services.repos.vault, backend.services.keys, "acme", "su-ses-1")

    async with AsyncOperatorClient(backend.url, token) as operator:
        await operator.put_secret("acme", "su-ses-1", "s3cret-async")
        assert reveal() == "s3cret-async"
        assert await operator.delete_secret("acme", "su-ses-1") is True
        assert reveal() is None
        assert await operator.delete_secret("acme", "su-ses-1") is False
        with pytest.raises(UsageError):
            await operator.put_secret("acme", "vault:su-ses-1", "x")

    def blocking() -> tuple[str | None, bool, bool]:
        with OperatorClient(backend.url, token) as operator:
            operator.put_secret("acme", "su-ses-1", "s3cret-sync")
            stored = reveal()
            return stored, operator.delete_secret("acme", "su-ses-1"), (reveal() is None)

    assert await asyncio.to_thread(blocking) == ("s3cret-sync", True, True)
