"""The operator API's vault operations (PUT/DELETE /v1/operator/tenants/{tenant}/secrets/{name}):
a service on top of Understudy stores a secret for `fill_secret` without the CLI, and never reads
it back."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.support.stored import stored
from understudy import _security
from understudy._store import vault

if TYPE_CHECKING:
    from tests.backend.conftest import Backend

VAULT_PATH = "/v1/operator/tenants/acme/secrets/su-login"
VALUE = "hunter2-Correct-Horse-9f3a"


def _reveal(backend: Backend, tenant: str, name: str) -> str | None:
    return vault.reveal(backend.services.repos.vault, backend.services.keys, tenant, name)


def _problem(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code


async def test_a_secret_put_by_the_operator_is_sealed_for_fill_secret(backend: Backend) -> None:
    async with backend.client(backend.operator_token()) as http:
        response = await http.put(VAULT_PATH, json={"value": VALUE})
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert _reveal(backend, "acme", "su-login") == VALUE
    assert _reveal(backend, "other", "su-login") is None  # one tenant's vault only
    kept = stored(backend.settings)
    assert b"su-login" in kept  # the scan read the vault's row
    for form in (VALUE.encode(), base64.b64encode(VALUE.encode())):
        assert form not in kept


async def test_putting_a_name_again_replaces_its_value(backend: Backend) -> None:
    async with backend.client(backend.operator_token()) as http:
        assert (await http.put(VAULT_PATH, json={"value": "first"})).status_code == 204
        assert (await http.put(VAULT_PATH, json={"value": VALUE})).status_code == 204
    assert _reveal(backend, "acme", "su-login") == VALUE
    assert backend.services.repos.vault.names("acme") == ["su-login"]


async def test_a_deleted_secret_is_gone_and_deleting_it_again_is_404(backend: Backend) -> None:
    async with backend.client(backend.operator_token()) as http:
        await http.put(VAULT_PATH, json={"value": VALUE})
        deleted = await http.delete(VAULT_PATH)
        again = await http.delete(VAULT_PATH)
    assert deleted.status_code == 204, deleted.text
    assert _reveal(backend, "acme", "su-login") is None
    _problem(again, 404, "secret_not_found")
    assert "vault:su-login" in again.json()["detail"]


@pytest.mark.parametrize("credential", ["consumer", "device", "unknown_operator", "none"])
async def test_only_an_operator_token_may_put_or_delete_secrets(
    backend: Backend, credential: str
) -> None:
    backend.operator_token()  # the API is on
    token = {
        "consumer": backend.api_key(),
        "device": backend.enroll(),
        "unknown_operator": _security.generate_token("operator"),
        "none": "",
    }[credential]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=backend.url, headers=headers) as http:
        _problem(await http.put(VAULT_PATH, json={"value": VALUE}), 401, "unauthorized")
        _problem(await http.delete(VAULT_PATH), 401, "unauthorized")
    assert _reveal(backend, "acme", "su-login") is None


async def test_with_no_operator_token_the_vault_operations_are_disabled(backend: Backend) -> None:
    async with backend.client(_security.generate_token("operator")) as http:
        _problem(await http.put(VAULT_PATH, json={"value": VALUE}), 403, "operator_api_disabled")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", VAULT_PATH, {"value": ""}),
        ("PUT", VAULT_PATH, {"value": "x" * 4097}),
        ("PUT", VAULT_PATH, {"value": 7}),
        ("PUT", VAULT_PATH, {"value": VALUE, "extra": 1}),
        ("PUT", VAULT_PATH, {}),
        ("PUT", VAULT_PATH, None),
        ("PUT", "/v1/operator/tenants/acme/secrets/-login", {"value": VALUE}),
        ("PUT", "/v1/operator/tenants/Acme/secrets/su-login", {"value": VALUE}),
        ("DELETE", "/v1/operator/tenants/acme/secrets/a%20b", None),
    ],
)
async def test_bad_input_is_400_and_never_echoes_the_value(
    backend: Backend, method: str, path: str, body: object
) -> None:
    async with backend.client(backend.operator_token()) as http:
        response = await http.request(method, path, json=body)
    _problem(response, 400, "invalid_request")
    assert VALUE not in response.text
    assert backend.services.repos.vault.names("acme") == []


async def test_a_secret_put_by_the_operator_is_typed_by_fill_secret_until_deleted(
    backend: Backend,
) -> None:
    from tests.backend.api.test_commands import _cmd, _session

    operator = backend.operator_token()
    async with backend.client(operator) as ops:
        assert (await ops.put(VAULT_PATH, json={"value": VALUE})).status_code == 204
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        url = f"/v1/sessions/{sid}/commands"
        command = {"name": "fill_secret", "ref": "g1e3", "secretRef": "vault:su-login"}
        typed = await http.post(url, json=_cmd(command))
        assert typed.status_code == 200, typed.text
        assert typed.json()["status"] == "succeeded"
        assert device.secrets_seen == [VALUE]  # the plaintext reached the browser's grant only
        assert VALUE not in typed.text
        async with backend.client(operator) as ops:
            assert (await ops.delete(VAULT_PATH)).status_code == 204
        gone = await http.post(url, json=_cmd(command))
    assert gone.json()["error"]["code"] == "secret_not_found"
    assert device.secrets_seen == [VALUE]
