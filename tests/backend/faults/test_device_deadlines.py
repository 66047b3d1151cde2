"""Device restarts after a deadline already decided, on the in-process backend's manual clock.

A deadline turns an ungranted write into `not_started` (5 s) and granted work into `unknown`
(25 s). A device that restarts afterwards must not revive either: a not-started write runs only
when the caller resubmits it, and an unknown one stays unknown even when its result is replayed
later, so the caller's answer never changes after it was given. On three nodes the caller talks to
node a while the device's sockets sit on node b; the nodes share one manual clock.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from tests.backend.faults._caller import Answer, check_final, drive
from tests.backend.faults._harness import grants, hello_acks, open_session, releasing, write
from tests.support.simdevice import Behaviour, SimulatedDevice
from understudy.generated import models as m

if TYPE_CHECKING:
    import httpx

    from tests.backend.conftest import Backend
    from tests.backend.faults._deployments import Deployment


async def _restart(device: SimulatedDevice, epoch: str) -> None:
    device.behaviour = Behaviour()  # the restarted extension is healthy
    if epoch == "same":
        await device.restart_extension()
    else:
        await device.restart_browser()


async def _wait_session(backend: Backend, device: SimulatedDevice, session_id: str) -> None:
    # After a browser restart the lease is re-provisioned: wait for it rather than assume it.
    await device.wait_for(
        lambda: any(lease.session_id == session_id for lease in device.leases.values())
    )
    lease = next(lease for lease in device.leases.values() if lease.session_id == session_id)
    await device.wait_for(lambda: hello_acks(lease) > 0)
    await backend.until(lambda: backend.session_status(session_id) == "connected", "connected")


async def _answer(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await http.get(url)
    return {"status": response.status_code, **response.json()}


@pytest.mark.parametrize("epoch", ["same", "new"])
async def test_a_preparation_past_its_ready_deadline_runs_only_when_resubmitted(
    deployment: Deployment, epoch: str
) -> None:
    backend, socket_node = deployment.http, deployment.device
    async with releasing(backend), backend.client(backend.api_key()) as http:
        device = await socket_node.device(behaviour=Behaviour(ready="silent"))
        session_id, lease = await open_session(http, device)
        body = write("type")
        command_id = body["commandId"]
        url = f"/v1/sessions/{session_id}/commands"
        first = asyncio.ensure_future(http.post(url, json=body))
        await device.wait_for(lambda: lease.journal.get(command_id) == "prepared")
        await backend.clock.advance(5)
        answer = await first
        assert (answer.status_code, answer.json()["code"]) == (504, "command_not_started")
        await device.wait_for(lambda: command_id not in lease.journal)  # the cancel arrived
        assert device.executions == {}

        await _restart(device, epoch)
        await _wait_session(backend, device, session_id)
        assert device.executions == {}  # nothing ran by itself
        final = await drive(http, session_id, body)

    deployment.figures.run(
        "device-after-deadline", f"ready-deadline/{epoch}-epoch", [final], device.executions
    )
    check_final(final, device.executions, allow_blocked=epoch == "new")
    expected = ("200 succeeded", 1) if epoch == "same" else ("409 writes_blocked", 0)
    assert (final.label, device.executions.get(command_id, 0)) == expected, final.trail


@pytest.mark.parametrize("epoch", ["same", "new"])
@pytest.mark.parametrize(
    ("step", "behaviour"),
    [
        ("started", Behaviour(execute="crash_after_start")),
        ("completed_unacked", Behaviour(execute="hold_result")),
    ],
)
async def test_granted_work_past_its_deadline_stays_unknown_after_a_device_restart(
    deployment: Deployment, step: str, behaviour: Behaviour, epoch: str
) -> None:
    backend, socket_node = deployment.http, deployment.device
    async with releasing(backend), backend.client(backend.api_key()) as http:
        device = await socket_node.device(behaviour=behaviour)
        session_id, lease = await open_session(http, device)
        body = write("navigate")
        command_id = body["commandId"]
        url = f"/v1/sessions/{session_id}/commands"
        first = asyncio.ensure_future(http.post(url, json=body))
        await device.wait_for(lambda: lease.journal.get(command_id) == step)
        await backend.clock.advance(20)
        pending = await first
        assert (pending.status_code, pending.json()["retryPolicy"]) == (202, "poll_same_command")
        await backend.clock.advance(5)
        await backend.until(
            lambda: backend.command_state(session_id, command_id) == "unknown", "unknown"
        )
        unknown = await _answer(http, f"{url}/{command_id}")
        assert (unknown["status"], unknown["code"]) == (409, "command_outcome_unknown")

        await _restart(device, epoch)
        await _wait_session(backend, device, session_id)
        if epoch == "same":
            # The device learns the write is settled and drops it from its journal: a replayed
            # result is acknowledged, a started entry is named unknown.
            await device.wait_for(lambda: command_id not in lease.journal)
        after = await _answer(http, f"{url}/{command_id}")
        final = Answer(command_id, after["status"], after.get("code"), after)

    deployment.figures.run(
        "device-after-deadline", f"grant-deadline/{step}/{epoch}-epoch", [final], device.executions
    )
    check_final(final, device.executions)
    assert after == unknown  # the answer given once never changes
    assert device.executions == {command_id: 1}
    assert grants(lease, command_id) == 1
    if step == "completed_unacked" and epoch == "same":
        replays = [
            f
            for f in lease.session_frames
            if isinstance(f, m.SessionServerResultAck) and str(f.command_id) == command_id
        ]
        assert len(replays) == 1


async def test_a_granted_write_of_an_older_lease_epoch_is_settled_by_its_own_session_agent(
    deployment: Deployment,
) -> None:
    backend, socket_node = deployment.http, deployment.device
    """The coordinator's turn for a browser restart committed the new lease epoch, and the process
    died before the session agent settled its commands: at start-up the agent finds the command
    of the older epoch due at once and declares it unknown, before any deadline."""
    async with releasing(backend), backend.client(backend.api_key()) as http:
        device = await socket_node.device(behaviour=Behaviour(execute="hold_result"))
        session_id, lease = await open_session(http, device)
        body = write("click")
        url = f"/v1/sessions/{session_id}/commands"
        answer = asyncio.ensure_future(http.post(url, json=body))
        await device.wait_for(lambda: grants(lease, body["commandId"]) == 1)
        services = socket_node.services
        # What the coordinator's turn leaves behind, reduced to the one column this test is
        # about: no repository method moves the lease epoch alone, so the test writes it.
        with services.db.transaction():
            services.db.sql.run(
                "UPDATE sessions SET lease_epoch = :epoch WHERE session_id = :sid",
                {"epoch": lease.lease_epoch + 1, "sid": session_id},
            )
        services.session_agent(session_id).arm()  # what start-up does for open commands
        response = await asyncio.wait_for(answer, 5)  # the clock never moved
        assert (response.status_code, response.json()["code"]) == (409, "command_outcome_unknown")
        row = services.repos.sessions.require(session_id)
        assert (row.writes_blocked_reason, row.writes_blocked_command) == (
            "unknown_outcome",
            body["commandId"],
        )
