"""Drop the session socket right after each step of the write protocol, then reconnect it.

The device side closes its session socket at the chosen step (as a network drop or a tab's
runtime restart would) and asks for a fresh ticket over its device socket, exactly as the
extension does; frames still in flight on the dropped socket are lost with it. The caller keeps
to the connector's rules. Every run: one execution, and the caller's answer is the durable one.
On three nodes the caller talks to node a while both of the device's sockets sit on node b.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from tests.backend.faults._caller import check_final, drive
from tests.backend.faults._harness import hello_acks, open_session, releasing, write
from tests.support.simdevice import SimulatedDevice
from understudy.generated import models as m

if TYPE_CHECKING:
    from tests.backend.faults._deployments import Deployment
    from tests.support.simdevice import Lease


class DroppingDevice(SimulatedDevice):
    """A simulated extension whose session socket drops once, right after a chosen step.

    `write_prepare`: the preparation is journaled, `write_ready` never leaves.
    `write_ready`: `write_ready` leaves, the grant is lost with the socket.
    `write_grant_lost`: the grant reaches the socket but the runtime never reads it.
    `write_grant`: the write runs and its result is journaled, but never sent.
    `result`: the result leaves, its `result_ack` is lost with the socket.
    """

    def __init__(self, base_url: str, credential: str) -> None:
        super().__init__(base_url, credential)
        self.drop_after: str | None = None
        self.dropped = asyncio.Event()

    async def _on_session_frame(
        self, lease: Lease, socket: Any, frame: m.SessionServerFrame
    ) -> None:
        if socket is not lease.session_socket:
            return  # it came in on a socket this side already dropped: lost with it
        point = self.drop_after
        if isinstance(frame, m.SessionServerWritePrepare) and point == "write_prepare":
            lease.journal[str(frame.command_id)] = "prepared"
        elif isinstance(frame, m.SessionServerWritePrepare) and point == "write_ready":
            await super()._on_session_frame(lease, socket, frame)
        elif isinstance(frame, m.SessionServerWriteGrant) and point == "write_grant_lost":
            pass
        elif isinstance(frame, m.SessionServerWriteGrant) and point == "write_grant":
            self.behaviour.execute = "hold_result"
            await super()._on_session_frame(lease, socket, frame)
            self.behaviour.execute = "complete"
        elif isinstance(frame, m.SessionServerWriteGrant) and point == "result":
            await super()._on_session_frame(lease, socket, frame)
        else:
            await super()._on_session_frame(lease, socket, frame)
            return
        self.drop_after = None
        await self._close_session_socket(lease)
        self.dropped.set()

    async def reopen(self, lease: Lease) -> None:
        """Ask for a fresh session ticket, as the extension does after its socket closed."""
        acks = hello_acks(lease)
        await self.request_ticket(lease)
        await self.wait_for(lambda: hello_acks(lease) > acks)


# point -> whether the caller must be told `504 command_not_started` and resubmit.
POINTS = {
    "write_prepare": True,
    "write_ready": True,
    "write_grant_lost": True,
    "write_grant": False,
    "result": False,
}


def _frames_for(lease: Lease, kind: type[Any], command_id: str) -> int:
    return sum(
        isinstance(f, kind) and str(f.command_id) == command_id for f in lease.session_frames
    )


@pytest.mark.parametrize("point", sorted(POINTS))
async def test_a_session_socket_drop_at_each_step_runs_the_write_at_most_once(
    deployment: Deployment, point: str
) -> None:
    backend, socket_node = deployment.http, deployment.device
    device = DroppingDevice(socket_node.url, socket_node.enroll())
    socket_node.devices.append(device)
    await device.connect()
    async with releasing(backend), backend.client(backend.api_key()) as http:
        session_id, lease = await open_session(http, device)
        body = write("click")
        command_id = body["commandId"]
        device.drop_after = point
        caller = asyncio.create_task(drive(http, session_id, body))
        await asyncio.wait_for(device.dropped.wait(), 5)
        agent = socket_node.services.session_agent(session_id)
        await backend.until(lambda: not agent.connected, "the backend saw the socket drop")
        await device.reopen(lease)
        final = await asyncio.wait_for(caller, 30)
        await device.wait_for(lambda: command_id not in lease.journal)
        durable = await http.get(f"/v1/sessions/{session_id}/commands/{command_id}")

    deployment.figures.run("session-socket-drop", point, [final], device.executions)
    check_final(final, device.executions)
    assert final.label == "200 succeeded", final.trail
    assert ("POST 504 command_not_started" in final.trail) == POINTS[point], final.trail
    assert device.executions == {command_id: 1}
    assert (durable.status_code, durable.json()) == (200, final.body)
    # A grant follows only a fresh admission (a `write_prepare`): a payload lost with the socket
    # is never resent on the new one, and without a resubmission there is exactly one of each.
    prepares = _frames_for(lease, m.SessionServerWritePrepare, command_id)
    granted = _frames_for(lease, m.SessionServerWriteGrant, command_id)
    assert granted <= prepares, lease.session_frames
    if not POINTS[point]:
        assert (prepares, granted) == (1, 1)
