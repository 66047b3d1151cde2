"""Frames another node wrote for this node's socket leave before a turn's own, even when that
turn runs again after a conflict."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from tests.backend.faults._harness import open_session, write
from understudy import _node
from understudy._store._errors import RetryableConflictError

if TYPE_CHECKING:
    import pytest

    from tests.backend.conftest import Backend
    from tests.backend.multinode.conftest import Nodes
    from tests.support.simdevice import Lease, SimulatedDevice

DIALOG = {
    "dialogType": "alert",
    "message": "m",
    "accepted": True,
    "openedAt": "2026-11-30T09:00:00Z",
    "delivery": "delivered",
}


async def test_a_turn_run_again_still_sends_the_rows_waiting_for_its_socket_first(
    nodes: Nodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Node b learns of rows only from its own turns here: no notification, no poll.
    monkeypatch.setattr(_node, "POLL_S", 3600.0)
    a = await nodes.start("a")
    b = await nodes.start("b")
    assert b.services.node is not None and a.services.node is not None
    b.services.node._notified = lambda payload: None  # type: ignore[method-assign]
    device = await b.device()
    async with b.client(b.api_key()) as on_b, a.client(a.api_key()) as on_a:
        sid, lease = await open_session(on_b, device)
        # Admitted on a: its write_prepare waits in the outbox for b's socket.
        body = write("click")
        answer = asyncio.ensure_future(on_a.post(f"/v1/sessions/{sid}/commands", json=body))
        try:
            await _turn_run_again(a, b, device, lease, sid, monkeypatch)
        except BaseException:
            await a.clock.advance(60)  # a failed test must not leave the request waiting
            await asyncio.wait([answer], timeout=5)
            raise
        response = await answer  # and the write goes on to its outcome
        assert response.status_code == 200, response.text
        assert device.executions == {body["commandId"]: 1}


async def _turn_run_again(
    a: Backend,
    b: Backend,
    device: SimulatedDevice,
    lease: Lease,
    sid: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn of the session on b takes the waiting row, meets a conflict, and runs again."""
    node_a = a.services.node
    assert node_a is not None
    await a.until(lambda: node_a.outbox_written >= 1, "the row for b is written")

    agent = b.services.session_agent(sid)
    stage, runs = agent._turns._stage, []

    def conflicting_once(out: Any) -> None:
        assert stage is not None
        stage(out)  # takes the waiting rows, inside the transaction
        runs.append(len(out.pending))
        if len(runs) == 1:  # a later statement of the turn meets a conflict
            raise RetryableConflictError("injected after staging")

    monkeypatch.setattr(agent._turns, "_stage", conflicting_once)
    # A turn on b for this session: the device reports a dialog, which b acknowledges.
    await device.send_dialog(sid, {"dialogId": str(uuid.uuid4()), **DIALOG})
    await device.wait_for(lambda: any(f.type == "dialog_ack" for f in lease.session_frames))

    kinds = [f.type for f in lease.session_frames]
    assert runs[:2] == [1, 1]  # the rows were taken again when the turn ran again
    assert "write_prepare" in kinds, kinds
    assert kinds.index("write_prepare") < kinds.index("dialog_ack")
