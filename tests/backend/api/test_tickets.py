"""Socket tickets over real sockets: single use, expiry, tamper, audience, path, authority, Origin.

A refused ticket is answered either at the handshake (HTTP 403: the route refuses before it
accepts) or right after it (close 4401: the target actor found the JTI consumed or its authority
stale). Either way the socket never becomes authoritative, which is what these tests check.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import websockets

from tests.backend.conftest import post_create, unattended
from tests.support.simdevice import Behaviour, Lease, SimulatedDevice
from understudy.generated import models as m

if TYPE_CHECKING:
    from tests.backend.conftest import Backend

REFUSED = {"http 403", "close 4401"}
EXTENSION_ORIGIN = "chrome-extension://bpeobpapddlllpjoebimcillbkllkega"


async def attempt(url: str, hello: str | None = None, origin: str | None = None) -> str:
    """Open a socket, send `hello`, and say what came back: a refused handshake, a close code or
    the type of the first frame."""
    try:
        socket = await websockets.connect(
            url,
            open_timeout=5,
            origin=websockets.Origin(origin) if origin else None,
        )
    except websockets.InvalidStatus as exc:
        return f"http {exc.response.status_code}"
    try:
        if hello is not None:
            await socket.send(hello)
        raw = await asyncio.wait_for(socket.recv(), 5)
    except websockets.ConnectionClosed as exc:
        return f"close {exc.rcvd.code if exc.rcvd is not None else 1006}"
    finally:
        await socket.close()
    frame_type: str = json.loads(raw)["type"]
    return f"frame {frame_type}"


def device_url(backend: Backend, ticket: str) -> str:
    return f"{backend.settings.socket_base_url}/v1/device/socket?ticket={ticket}"


def session_url(backend: Backend, session_id: str, ticket: str) -> str:
    return f"{backend.settings.socket_base_url}/v1/sessions/{session_id}/socket?ticket={ticket}"


def session_hello(device: SimulatedDevice, frame: m.DeviceServerSessionTicket) -> str:
    """The session hello the extension sends for the lease this ticket is for."""
    lease: Lease = device.leases[str(frame.lease_id)]
    return m.SessionClientHello.model_validate(
        {
            "type": "hello",
            "sessionId": lease.session_id,
            "leaseId": lease.lease_id,
            "leaseEpoch": frame.lease_epoch,
            "browserEpoch": device.browser_epoch,
            "protocolVersion": 2,
            "capabilities": device.behaviour.capabilities,
            "tab": {"tabId": lease.tab_id, "url": "about:blank", "title": "", "active": False},
            "journal": [],
        }
    ).to_wire_json()


def refusals(backend: Backend) -> list[str]:
    return [
        str(event["reason"])
        for event in backend.services.telemetry.events
        if event["event"] == "ticket.refused"
    ]


def flip(text: str, index: int) -> str:
    """`text` with the base64url character at `index` replaced by another one."""
    replacement = "A" if text[index] != "A" else "B"
    return text[:index] + replacement + text[index + 1 :]


async def create_session(backend: Backend, http: Any, n: int = 0) -> str:
    response = await post_create(
        backend, http, unattended([f"https://s{n}.example"], f"profile-{n}")
    )
    assert response.status_code == 201, response.text
    session_id: str = response.json()["sessionId"]
    return session_id


def tickets_for(device: SimulatedDevice, session_id: str) -> list[m.DeviceServerSessionTicket]:
    return [
        f for f in device.frames_of(m.DeviceServerSessionTicket) if str(f.session_id) == session_id
    ]


# -- device tickets --------------------------------------------------------------------------------


async def test_replayed_device_ticket_is_refused_and_the_first_socket_keeps_working(
    backend: Backend,
) -> None:
    device = await backend.device(connect=False)
    ticket = await device.ticket()
    await device.connect(ticket)

    replay = await attempt(ticket.socket_url, hello=device._hello().to_wire_json())

    assert replay in REFUSED
    assert refusals(backend) == ["replayed"]
    await device.heartbeat()
    ack = await device.wait_for(lambda: device.frames_of(m.DeviceServerHeartbeatAck))
    assert ack[0].seq == 1
    assert device._socket.close_code is None


async def test_a_new_valid_device_ticket_supersedes_the_old_connection(backend: Backend) -> None:
    device = await backend.device()
    fresh = await device.ticket()

    outcome = await attempt(fresh.socket_url, hello=device._hello().to_wire_json())

    assert outcome == "frame welcome"
    assert device._reader is not None
    await asyncio.wait_for(device._reader, 5)
    assert device._socket.close_code == 4000


async def test_expired_device_ticket_is_refused(backend: Backend) -> None:
    device = await backend.device(connect=False)
    ticket = await device.ticket()
    await backend.clock.advance(61)

    assert await attempt(ticket.socket_url, hello=device._hello().to_wire_json()) in REFUSED
    assert refusals(backend) == ["expired"]
    # A ticket taken now still works: the refusal was about age, not the device.
    assert (await device.connect()).device_id == "laptop-1"


async def test_tampered_device_tickets_are_refused_and_the_original_still_works(
    backend: Backend,
) -> None:
    device = await backend.device(connect=False)
    ticket = await device.ticket()
    prefix, payload, signature = ticket.ticket.split(".")
    hello = device._hello().to_wire_json()

    for forged in (
        f"{prefix}.{flip(payload, len(payload) // 2)}.{signature}",
        f"{prefix}.{payload}.{flip(signature, 0)}",
    ):
        assert await attempt(device_url(backend, forged), hello=hello) in REFUSED
    assert refusals(backend) == ["bad_signature", "bad_signature"]
    # Refusing a forgery consumed nothing: the genuine ticket opens the socket once.
    assert await attempt(ticket.socket_url, hello=hello) == "frame welcome"


async def test_tickets_of_the_wrong_audience_are_refused(backend: Backend) -> None:
    device = await backend.device(behaviour=Behaviour(open_session_sockets=False))
    async with backend.client(backend.api_key()) as http:
        session_id = await create_session(backend, http)
    session_ticket = (await device.wait_for(lambda: tickets_for(device, session_id)))[0]
    device_ticket = await device.ticket()

    on_device_socket = await attempt(
        device_url(backend, session_ticket.ticket), hello=device._hello().to_wire_json()
    )
    on_session_socket = await attempt(
        session_url(backend, session_id, device_ticket.ticket),
        hello=session_hello(device, session_ticket),
    )

    assert on_device_socket in REFUSED
    assert on_session_socket in REFUSED
    assert refusals(backend) == ["wrong_audience", "wrong_audience"]
    # Both tickets were genuine: each opens the socket it was made for.
    url = session_url(backend, session_id, session_ticket.ticket)
    assert await attempt(url, hello=session_hello(device, session_ticket)) == "frame hello_ack"
    assert (
        await attempt(device_ticket.socket_url, hello=device._hello().to_wire_json())
        == "frame welcome"
    )


async def test_socket_origin_must_be_the_extension_or_absent(backend: Backend) -> None:
    device = await backend.device(connect=False)
    hello = device._hello().to_wire_json()

    evil = await attempt((await device.ticket()).socket_url, hello, origin="https://evil.example")
    extension = await attempt((await device.ticket()).socket_url, hello, origin=EXTENSION_ORIGIN)
    absent = await attempt((await device.ticket()).socket_url, hello)

    assert evil == "http 403"
    assert extension == "frame welcome"
    assert absent == "frame welcome"


# -- session tickets -------------------------------------------------------------------------------


async def test_a_session_ticket_for_another_session_is_refused_on_this_path(
    backend: Backend,
) -> None:
    device = await backend.device(behaviour=Behaviour(open_session_sockets=False))
    async with backend.client(backend.api_key()) as http:
        first = await create_session(backend, http, 0)
        second = await create_session(backend, http, 1)
    ticket = (await device.wait_for(lambda: tickets_for(device, first)))[0]
    hello = session_hello(device, ticket)

    assert await attempt(session_url(backend, second, ticket.ticket), hello) in REFUSED
    assert await attempt(session_url(backend, first, ticket.ticket), hello) == "frame hello_ack"


async def test_a_replayed_session_ticket_does_not_replace_the_session_socket(
    backend: Backend,
) -> None:
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        session_id = await create_session(backend, http)
    lease = next(iter(device.leases.values()))
    await device.wait_for(lambda: lease.session_frames)
    ticket = tickets_for(device, session_id)[0]  # the one the device already used

    assert await attempt(session_url(backend, session_id, ticket.ticket), "{}") in REFUSED
    assert refusals(backend) == ["replayed"]
    assert lease.session_socket.close_code is None


async def test_a_session_ticket_from_before_a_browser_restart_is_refused(backend: Backend) -> None:
    device = await backend.device(behaviour=Behaviour(open_session_sockets=False))
    async with backend.client(backend.api_key()) as http:
        session_id = await create_session(backend, http)
    stale = (await device.wait_for(lambda: tickets_for(device, session_id)))[0]
    stale_hello = session_hello(device, stale)

    await device.restart_browser()
    current = await device.wait_for(
        lambda: [t for t in tickets_for(device, session_id) if t.lease_epoch == 2]
    )

    assert stale.lease_epoch == 1
    assert await attempt(session_url(backend, session_id, stale.ticket), stale_hello) in REFUSED
    assert refusals(backend) == ["stale"]
    fresh = await attempt(
        session_url(backend, session_id, current[0].ticket), session_hello(device, current[0])
    )
    assert fresh == "frame hello_ack"


async def test_a_new_session_ticket_supersedes_the_old_session_socket(backend: Backend) -> None:
    device = await backend.device(behaviour=Behaviour(open_session_sockets=False))
    async with backend.client(backend.api_key()) as http:
        session_id = await create_session(backend, http)
    first = (await device.wait_for(lambda: tickets_for(device, session_id)))[0]
    async with websockets.connect(session_url(backend, session_id, first.ticket)) as old:
        await old.send(session_hello(device, first))
        assert json.loads(await asyncio.wait_for(old.recv(), 5))["type"] == "hello_ack"

        await device.send_frame(
            m.DeviceClientTicketRequest(
                type="ticket_request",
                session_id=first.session_id,
                lease_id=first.lease_id,
                lease_epoch=first.lease_epoch,
            )
        )
        fresh = (await device.wait_for(lambda: tickets_for(device, session_id)[1:]))[0]
        outcome = await attempt(
            session_url(backend, session_id, fresh.ticket), session_hello(device, fresh)
        )

        assert outcome == "frame hello_ack"
        await asyncio.wait_for(old.wait_closed(), 5)
        assert old.close_code == 4000


async def test_session_socket_refuses_a_page_origin(backend: Backend) -> None:
    device = await backend.device(behaviour=Behaviour(open_session_sockets=False))
    async with backend.client(backend.api_key()) as http:
        session_id = await create_session(backend, http)
    ticket = (await device.wait_for(lambda: tickets_for(device, session_id)))[0]
    url = session_url(backend, session_id, ticket.ticket)
    hello = session_hello(device, ticket)

    assert await attempt(url, hello, origin="https://evil.example") == "http 403"
    assert await attempt(url, hello, origin=EXTENSION_ORIGIN) == "frame hello_ack"
