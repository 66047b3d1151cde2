"""Shared steps of the fault scenarios: open a session on a simulated device, build commands, and
look for a plaintext secret where it must never be."""

from __future__ import annotations

import base64
import contextlib
import uuid
from typing import TYPE_CHECKING, Any

from understudy.generated import models as m

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable
    from pathlib import Path

    import httpx

    from tests.backend.conftest import Backend
    from tests.support.simdevice import Lease, SimulatedDevice

SECRET_NAME = "login-password"  # noqa: S105 - a vault entry name, not a password
PLAINTEXT = "fault-suite plaintext q7Zt horse battery 5c1e"


@contextlib.asynccontextmanager
async def releasing(backend: Backend) -> AsyncIterator[None]:
    """On the way out, move the manual clock past every command deadline.

    A test that fails half-way can leave a request waiting on the manual clock; the server's
    graceful stop waits for it, so the failure would hang instead of being reported.
    """
    try:
        yield
    finally:
        await backend.clock.advance(60)
        await backend.settle()


def write(name: str = "click", command_id: str | None = None) -> dict[str, Any]:
    """A write request body; `fill_secret` names the vaulted test secret."""
    commands: dict[str, dict[str, Any]] = {
        "click": {"name": "click", "ref": "g1e1"},
        "type": {"name": "type", "ref": "g1e2", "text": "hello"},
        "navigate": {"name": "navigate", "url": "https://example.com/next"},
        "fill_secret": {"name": "fill_secret", "ref": "g1e3", "secretRef": f"vault:{SECRET_NAME}"},
    }
    return {"commandId": command_id or str(uuid.uuid4()), "command": commands[name]}


def read(name: str = "snapshot") -> dict[str, Any]:
    commands: dict[str, dict[str, Any]] = {
        "snapshot": {"name": "snapshot", "interactiveOnly": True},
        "get_tabs": {"name": "get_tabs"},
        "hello": {"name": "hello"},
    }
    return {"commandId": str(uuid.uuid4()), "command": commands[name]}


def hello_acks(lease: Lease) -> int:
    return sum(isinstance(f, m.SessionServerHelloAck) for f in lease.session_frames)


async def open_session(
    http: httpx.AsyncClient,
    device: SimulatedDevice,
    *,
    device_id: str | None = None,
    origin: str = "https://example.com",
    profile: str = "profile-a",
    within: float | None = None,
) -> tuple[str, Lease]:
    """Create an unattended session on `device` and wait until its session socket is up.

    `within` seconds (for a loaded machine or a tab provisioned through another node) also
    admits a `202` (still provisioning) and waits that long for the tab; by default the create
    must answer `201`.
    """
    body: dict[str, Any] = {
        "mode": "unattended",
        "allowedOrigins": [origin],
        "profileStateKey": profile,
    }
    if device_id is not None:
        body["deviceId"] = device_id
    response = await http.post(
        "/v1/sessions", json=body, headers={"Idempotency-Key": str(uuid.uuid4())}
    )
    assert response.status_code in ((201,) if within is None else (201, 202)), response.text
    session_id: str = response.json()["sessionId"]

    def leased() -> Lease | None:
        return next((x for x in device.leases.values() if x.session_id == session_id), None)

    lease: Lease = await device.wait_for(leased, within=within or 5.0)
    await device.wait_for(lambda: hello_acks(lease) > 0, within=within or 5.0)
    return session_id, lease


def grants(lease: Lease, command_id: str) -> int:
    """How many `write_grant` frames for `command_id` reached the device (on any socket)."""
    return sum(
        isinstance(f, m.SessionServerWriteGrant) and str(f.command_id) == command_id
        for f in lease.session_frames
    )


def secret_forms(plaintext: str) -> list[bytes]:
    """The plaintext as it could sit in a file: UTF-8, UTF-16 (either order), base64."""
    raw = plaintext.encode()
    return [
        raw,
        plaintext.encode("utf-16-le"),
        plaintext.encode("utf-16-be"),
        base64.b64encode(raw),
    ]


def leaks(plaintext: str, files: Iterable[Path] = (), texts: Iterable[str] = ()) -> list[str]:
    """Where the plaintext (in any of its forms) was found; empty when nowhere."""
    forms = secret_forms(plaintext)
    found = [
        str(path)
        for path in files
        if path.is_file() and any(form in path.read_bytes() for form in forms)
    ]
    text_forms = [plaintext, base64.b64encode(plaintext.encode()).decode()]
    found += [
        f"text #{i}" for i, text in enumerate(texts) if any(form in text for form in text_forms)
    ]
    return found
