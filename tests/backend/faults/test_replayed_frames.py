"""Duplicated, replayed, forged and stale frames on the session socket are refused or deduplicated.

Frames are sent by hand through the simulated device's session socket, or through a raw socket
opened with a ticket the backend minted, so each arrives exactly as a misbehaving or late peer
would send it. On three nodes the caller talks to node a while the device's sockets, and so the
frames under test, sit on node b.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import TYPE_CHECKING, Any

import websockets

from tests.backend.faults._caller import Answer, check_final
from tests.backend.faults._harness import grants, hello_acks, open_session, releasing, write
from tests.support.simdevice import Behaviour
from understudy.generated import models as m

if TYPE_CHECKING:
    from tests.backend.faults._deployments import Deployment
    from tests.support.simdevice import Lease, SimulatedDevice


def _of(lease: Lease, kind: type[Any], command_id: str) -> list[Any]:
    return [
        f
        for f in lease.session_frames
        if isinstance(f, kind) and str(getattr(f, "command_id", "")) == command_id
    ]


def _errors(lease: Lease) -> list[m.SessionServerError]:
    return [f for f in lease.session_frames if isinstance(f, m.SessionServerError)]


async def _handled(device: SimulatedDevice, session_id: str, lease: Lease) -> None:
    """Return once the backend has handled every frame sent on the session socket so far.

    The socket's frames are handled in order, so the error answering a result for a command
    nobody sent (a frame with no effect) comes after everything sent before it.
    """
    probe = str(uuid.uuid4())
    error = {"code": "internal_error", "message": "probe"}
    frame = {"type": "result", "commandId": probe, "outcome": "failed", "error": error}
    await device.send_session_frame(session_id, frame)
    await device.wait_for(lambda: [e for e in _errors(lease) if str(e.command_id) == probe])


async def test_a_second_write_ready_for_a_granted_write_never_grants_again(
    deployment: Deployment,
) -> None:
    backend, socket_node = deployment.http, deployment.device
    async with releasing(backend), backend.client(backend.api_key()) as http:
        device = await socket_node.device(behaviour=Behaviour(execute="hold_result"))
        session_id, lease = await open_session(http, device)
        body = write("click")
        cid = body["commandId"]
        url = f"/v1/sessions/{session_id}/commands"
        answer = asyncio.ensure_future(http.post(url, json=body))
        await device.wait_for(lambda: lease.journal.get(cid) == "completed_unacked")
        ready = {"type": "write_ready", "commandId": cid, "leaseEpoch": lease.lease_epoch}
        for _ in range(2):
            await device.send_session_frame(session_id, ready)
        await _handled(device, session_id, lease)
        assert (grants(lease, cid), _of(lease, m.SessionServerCancel, cid)) == (1, [])

        await device.send_session_frame(session_id, lease.journal_results[cid].to_wire())
        response = await asyncio.wait_for(answer, 10)
        assert response.status_code == 200, response.text
        # A write_ready for a settled write is answered with a cancel, never with a grant.
        await device.send_session_frame(session_id, ready)
        await device.wait_for(lambda: _of(lease, m.SessionServerCancel, cid))
        assert grants(lease, cid) == 1
    final = Answer(cid, 200, None, response.json())
    deployment.figures.run("replayed-frame", "write_ready-after-grant", [final], device.executions)
    check_final(final, device.executions)


async def test_a_replayed_result_is_acked_and_not_counted_twice(deployment: Deployment) -> None:
    backend, socket_node = deployment.http, deployment.device
    async with releasing(backend), backend.client(backend.api_key()) as http:
        device = await socket_node.device()
        session_id, lease = await open_session(http, device)
        body = write("type")
        cid = body["commandId"]
        url = f"/v1/sessions/{session_id}/commands"
        response = await http.post(url, json=body)
        assert response.status_code == 200, response.text
        telemetry = socket_node.services.telemetry
        outcomes = telemetry.counter("command.outcome", "succeeded")
        count = (await http.get(f"/v1/sessions/{session_id}")).json()["commandCount"]

        replay = {
            "type": "result",
            "commandId": cid,
            "outcome": "succeeded",
            "result": response.json()["result"],
            "replayed": True,
        }
        contradiction = {
            "type": "result",
            "commandId": cid,
            "outcome": "failed",
            "error": {"code": "element_not_found", "message": "late and wrong"},
            "replayed": True,
        }
        for frame in (replay, contradiction, replay):
            await device.send_session_frame(session_id, frame)
        await device.wait_for(lambda: len(_of(lease, m.SessionServerResultAck, cid)) == 4)

        polled = await http.get(f"{url}/{cid}")
        assert polled.json() == response.json()  # the first durable result stands
        assert telemetry.counter("command.outcome", "succeeded") == outcomes
        assert telemetry.counter("command.outcome", "failed") == 0
        status = (await http.get(f"/v1/sessions/{session_id}")).json()
        assert status["commandCount"] == count
        assert device.executions == {cid: 1}
    final = Answer(cid, 200, None, polled.json())
    deployment.figures.run("replayed-frame", "result-replayed", [final], device.executions)
    check_final(final, device.executions)


async def test_a_result_for_a_write_never_granted_is_refused_with_an_error(
    deployment: Deployment,
) -> None:
    backend, socket_node = deployment.http, deployment.device
    async with releasing(backend), backend.client(backend.api_key()) as http:
        device = await socket_node.device(behaviour=Behaviour(ready="silent"))
        session_id, lease = await open_session(http, device)
        body = write("navigate")
        cid = body["commandId"]
        url = f"/v1/sessions/{session_id}/commands"
        answer = asyncio.ensure_future(http.post(url, json=body))
        await device.wait_for(lambda: lease.journal.get(cid) == "prepared")
        forged = {
            "type": "result",
            "commandId": cid,
            "outcome": "succeeded",
            "result": {
                "name": "navigate",
                "url": "https://example.com/",
                "title": "Example",
                "generation": 1,
            },
        }
        stranger = {**forged, "commandId": str(uuid.uuid4())}
        await device.send_session_frame(session_id, forged)
        await device.send_session_frame(session_id, stranger)
        await device.wait_for(lambda: len(_errors(lease)) == 2)
        assert [(e.code, str(e.command_id)) for e in _errors(lease)] == [
            ("not_granted", cid),
            ("unknown_command", stranger["commandId"]),
        ]
        assert _of(lease, m.SessionServerResultAck, cid) == []
        # The forged result settled nothing: the ready deadline still decides.
        await backend.clock.advance(5)
        response = await asyncio.wait_for(answer, 10)
        assert (response.status_code, response.json()["code"]) == (504, "command_not_started")
        assert device.executions == {}
    deployment.figures.run("replayed-frame", "result-never-granted", [], device.executions)


async def _ticket(device: SimulatedDevice, lease: Lease) -> m.DeviceServerSessionTicket:
    """A fresh session ticket the backend minted for `lease`, left unused."""
    seen = len(device.frames_of(m.DeviceServerSessionTicket))
    device.behaviour.open_session_sockets = False
    await device.send_frame(
        m.DeviceClientTicketRequest.model_validate(
            {
                "type": "ticket_request",
                "sessionId": lease.session_id,
                "leaseId": lease.lease_id,
                "leaseEpoch": lease.lease_epoch,
            }
        )
    )
    minted: list[m.DeviceServerSessionTicket] = await device.wait_for(
        lambda: device.frames_of(m.DeviceServerSessionTicket)[seen:]
    )
    return minted[0]


def _hello(lease: Lease, browser_epoch: str, lease_epoch: int) -> str:
    return json.dumps(
        {
            "type": "hello",
            "sessionId": lease.session_id,
            "leaseId": lease.lease_id,
            "leaseEpoch": lease_epoch,
            "browserEpoch": browser_epoch,
            "protocolVersion": 2,
            "capabilities": ["safe_write_v2", "dialogs_v1", "unattended_v1"],
            "tab": {"tabId": lease.tab_id, "url": "about:blank", "title": "", "active": False},
            "journal": [],
        }
    )


async def _refusal(ticket: m.DeviceServerSessionTicket, hello: str) -> tuple[list[Any], int]:
    """Open a raw session socket with `ticket`, say `hello`; the frames received and the close
    code once the backend closed it."""
    frames: list[Any] = []
    async with websockets.connect(f"{ticket.socket_url}?ticket={ticket.ticket}") as socket:
        with contextlib.suppress(websockets.ConnectionClosed):
            await socket.send(hello)
            async for raw in socket:
                frames.append(json.loads(raw))
        assert socket.close_code is not None
        return frames, socket.close_code


async def test_frames_on_a_superseded_socket_are_ignored(deployment: Deployment) -> None:
    backend, socket_node = deployment.http, deployment.device
    async with releasing(backend), backend.client(backend.api_key()) as http:
        device = await socket_node.device(behaviour=Behaviour(ready="silent"))
        session_id, lease = await open_session(http, device)
        agent = socket_node.services.session_agent(session_id)
        old_socket, old_serial = lease.session_socket, agent._serial
        ticket = await _ticket(device, lease)
        async with websockets.connect(f"{ticket.socket_url}?ticket={ticket.ticket}") as fresh:
            await fresh.send(_hello(lease, device.browser_epoch, lease.lease_epoch))
            assert json.loads(await fresh.recv())["type"] == "hello_ack"
            await old_socket.wait_closed()
            assert old_socket.close_code == 4000  # superseded by the newer connection

            body = write("click")
            cid = body["commandId"]
            answer = asyncio.ensure_future(
                http.post(f"/v1/sessions/{session_id}/commands", json=body)
            )
            prepare = json.loads(await fresh.recv())
            assert (prepare["type"], prepare["commandId"]) == ("write_prepare", cid)
            ready = {"type": "write_ready", "commandId": cid, "leaseEpoch": lease.lease_epoch}
            # A frame that was still in flight on the old connection reaches the agent under the
            # old connection's serial: it is ignored, no grant goes out.
            await agent.handle(old_serial, json.dumps(ready))
            with contextlib.suppress(TimeoutError):
                unexpected = await asyncio.wait_for(fresh.recv(), 0.3)
                raise AssertionError(f"a stale frame was answered: {unexpected!r}")
            polled = await http.get(f"/v1/sessions/{session_id}/commands/{cid}")
            assert polled.json()["status"] == "pending"
            # The same frame on the authoritative connection is obeyed.
            await fresh.send(json.dumps(ready))
            grant = json.loads(await fresh.recv())
            assert (grant["type"], grant["commandId"]) == ("write_grant", cid)
            await fresh.send(
                json.dumps(
                    {
                        "type": "result",
                        "commandId": cid,
                        "outcome": "succeeded",
                        "result": {
                            "name": "click",
                            "url": "https://example.com/",
                            "title": "Example",
                            "generation": 1,
                        },
                    }
                )
            )
            response = await asyncio.wait_for(answer, 10)
            assert response.status_code == 200, response.text
    deployment.figures.run(
        "replayed-frame", "superseded-socket", [Answer(cid, 200, None, response.json())], {}
    )


async def test_stale_epochs_are_refused_on_the_session_socket(deployment: Deployment) -> None:
    backend, socket_node = deployment.http, deployment.device
    async with releasing(backend), backend.client(backend.api_key()) as http:
        device = await socket_node.device()
        session_id, lease = await open_session(http, device)
        old_browser_epoch = device.browser_epoch
        unused = await _ticket(device, lease)  # minted for lease epoch 1

        await device.restart_browser()  # a new browser epoch: the lease moves to epoch 2
        await device.wait_for(lambda: [x for x in device.leases.values() if x.lease_epoch == 2])
        current = next(iter(device.leases.values()))
        assert current.lease_epoch == lease.lease_epoch + 1

        # A ticket minted for the previous epoch no longer opens a connection.
        frames, code = await _refusal(unused, _hello(current, device.browser_epoch, 2))
        assert (frames, code) == ([], 4401)
        # A fresh ticket, but the hello speaks for the previous lease epoch or browser epoch.
        for browser_epoch, lease_epoch in (
            (device.browser_epoch, current.lease_epoch - 1),
            (old_browser_epoch, current.lease_epoch),
        ):
            ticket = await _ticket(device, current)
            frames, code = await _refusal(ticket, _hello(current, browser_epoch, lease_epoch))
            assert [(f["type"], f["code"]) for f in frames] == [("error", "not_authoritative")]
            assert code == 4403
        # A ticket request for the previous lease epoch is refused on the device socket.
        errors = len(device.frames_of(m.DeviceServerError))
        await device.send_frame(
            m.DeviceClientTicketRequest.model_validate(
                {
                    "type": "ticket_request",
                    "sessionId": session_id,
                    "leaseId": current.lease_id,
                    "leaseEpoch": lease.lease_epoch,
                }
            )
        )
        refused = await device.wait_for(lambda: device.frames_of(m.DeviceServerError)[errors:])
        assert refused[0].code == "stale_lease"
        # The current epochs are accepted: the refusals above were about the epochs alone.
        acks = hello_acks(current)
        await device._open_session(current, await _ticket(device, current))
        await device.wait_for(lambda: hello_acks(current) > acks)
        ack = current.session_frames[-1]
        assert isinstance(ack, m.SessionServerHelloAck)
        assert ack.writes_blocked is True
