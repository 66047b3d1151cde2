"""Any node serves any request: frames, outcomes and wake-ups cross nodes through PostgreSQL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.backend.conftest import idem, unattended
from tests.backend.faults._harness import open_session, write
from understudy.generated import models as m

if TYPE_CHECKING:
    from tests.backend.multinode.conftest import Nodes


async def test_a_create_on_one_node_provisions_through_the_device_socket_on_another(
    nodes: Nodes,
) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    device = await b.device()
    async with a.client(a.api_key()) as http:
        created = await http.post("/v1/sessions", json=unattended(), headers=idem())
    assert created.status_code == 201, created.text
    assert created.json()["status"] == "connected"
    lease = next(iter(device.leases.values()))
    await device.wait_for(lambda: lease.session_frames)  # hello_ack from node b
    assert b.services.node is not None and b.services.node.outbox_delivered >= 1


async def test_a_command_admitted_on_one_node_runs_on_the_socket_of_another_and_returns(
    nodes: Nodes,
) -> None:
    a = await nodes.start("a")
    c = await nodes.start("c")
    device = await c.device()
    async with a.client(a.api_key()) as http:
        sid, lease = await open_session(http, device)
        body = write("click")
        response = await http.post(f"/v1/sessions/{sid}/commands", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["name"] == "click"
        kinds = [f.type for f in lease.session_frames]
        assert kinds[-3:] == ["write_prepare", "write_grant", "result_ack"]
        assert device.executions == {body["commandId"]: 1}
        # Asked again on the socket's own node: the durable outcome, nothing runs again.
        async with c.client(a.api_key()) as other:
            again = await other.post(f"/v1/sessions/{sid}/commands", json=body)
        assert again.json() == response.json()
        assert device.executions == {body["commandId"]: 1}
    assert a.services.node is not None and a.services.node.outbox_written >= 1
    prepare = next(f for f in lease.session_frames if isinstance(f, m.SessionServerWritePrepare))
    assert "command" not in prepare.to_wire()


async def test_an_outbox_row_is_delivered_when_its_notification_is_missed(nodes: Nodes) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    assert b.services.node is not None
    b.services.node._notified = lambda payload: None  # type: ignore[method-assign]
    device = await b.device()
    async with a.client(a.api_key()) as http:
        created = await http.post("/v1/sessions", json=unattended(), headers=idem())
    # The provision reached node b by its poll alone; the create's waiter on node a re-read.
    assert created.status_code == 201, created.text
    assert device.frames_of(m.DeviceServerProvision)
