"""Dry runs through HTTP and real sockets: what the device is sent, what the caller gets back."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from tests.backend.conftest import Backend, post_create, unattended
from tests.support.simdevice import Behaviour, SimulatedDevice
from understudy._store import vault
from understudy.generated import models as m

if TYPE_CHECKING:
    import httpx
    import pytest

PLAINTEXT = "4711-never-on-the-wire"


async def _session(
    backend: Backend, http: httpx.AsyncClient, behaviour: Behaviour | None = None
) -> tuple[SimulatedDevice, str]:
    device = await backend.device(behaviour=behaviour)
    response = await post_create(backend, http, unattended())
    assert response.status_code == 201, response.text
    lease = next(iter(device.leases.values()))
    await device.wait_for(lambda: lease.session_frames)  # hello_ack: the socket is up
    return device, str(response.json()["sessionId"])


async def _dry_run(http: httpx.AsyncClient, sid: str, command: dict[str, Any]) -> dict[str, Any]:
    body = {"commandId": str(uuid.uuid4()), "command": command, "dryRun": True}
    response = await http.post(f"/v1/sessions/{sid}/commands", json=body)
    assert response.status_code == 200, response.text
    outcome: dict[str, Any] = response.json()
    return outcome


async def test_a_fill_secret_dry_run_checks_the_vault_entry_and_sends_no_plaintext(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = backend.services
    with services.storage.transaction() as tx:
        vault.put(tx.vault, services.keys, "acme", "pin", PLAINTEXT, services.clock.now())

    def no_decrypting(*args: object) -> str:
        raise AssertionError("a dry run decrypted the secret")

    monkeypatch.setattr(vault, "reveal", no_decrypting)
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        command = {"name": "fill_secret", "ref": "g1e3", "secretRef": "vault:pin"}
        outcome = await _dry_run(http, sid, command)
        missing = await _dry_run(http, sid, {**command, "secretRef": "vault:absent"})
        status = await http.get(f"/v1/sessions/{sid}")

    assert outcome["status"] == "succeeded", outcome
    assert outcome["dryRun"] is True
    assert outcome["result"]["preview"] == {
        "targetRole": "textbox",
        "targetName": "Password",
        "allowed": True,
    }
    lease = next(iter(device.leases.values()))
    grants = [f for f in lease.session_frames if isinstance(f, m.SessionServerWriteGrant)]
    assert [(g.dry_run, g.secret_value) for g in grants] == [(True, None)]
    assert device.secrets_seen == []
    assert device.executions == {}, "a dry run executed nothing"
    # A name missing from the vault fails before any grant, and says where to add it.
    assert missing["status"] == "failed"
    assert missing["error"]["code"] == "secret_not_found"
    assert "understudy secrets put" in missing["error"]["message"]
    assert PLAINTEXT not in status.text + str(outcome) + str(missing)
    stored = [p for p in backend.settings.data_dir.rglob("*") if p.is_file()]
    assert stored, "the backend stored nothing"
    assert [p.name for p in stored if PLAINTEXT.encode() in p.read_bytes()] == []


async def test_a_click_dry_run_carries_where_the_click_navigates(backend: Backend) -> None:
    submit = {"url": "https://example.com/login", "method": "POST", "target": ""}
    behaviour = Behaviour(navigations={"g1e1": submit})
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, behaviour)
        outcome = await _dry_run(http, sid, {"name": "click", "ref": "g1e1"})
        # The same element, now a link out of the session's origins into a new window.
        behaviour.navigations["g1e1"] = {
            "url": "https://elsewhere.example.net/help",
            "method": "GET",
            "target": "_blank",
        }
        away = await _dry_run(http, sid, {"name": "click", "ref": "g1e1"})
        polled = await http.get(f"/v1/sessions/{sid}/commands/{away['commandId']}")

    assert outcome["status"] == "succeeded", outcome
    assert outcome["result"]["preview"] == {
        "targetRole": "button",
        "targetName": "Sign in",
        "navigatesTo": "https://example.com/login",
        "method": "POST",
        "allowed": True,
        "opensPopup": False,
    }
    expected = {
        "navigatesTo": "https://elsewhere.example.net/help",
        "method": "GET",
        "allowed": False,
        "opensPopup": True,
    }
    assert away["status"] == "succeeded", away
    target = {"targetRole": "button", "targetName": "Sign in"}
    assert away["result"]["preview"] == {**target, **expected}
    # The preview is part of the durable outcome: a poll returns the same.
    assert polled.json()["result"] == away["result"]
    assert device.executions == {}
