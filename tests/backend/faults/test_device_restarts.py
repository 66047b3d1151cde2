"""Restart the simulated extension at each step of its write journal, against a real process.

The device stops at a journal step (`prepared`: it never says `write_ready`; `started`: it dies
in the middle of the operation; `completed_unacked`: it holds its result), then restarts with the
same browser epoch (`restart_extension`: the journal survives in chrome.storage.session) or with
a new one (`restart_browser`: leases and journal are gone). No run waits for a deadline: the
reconnect itself settles every open command. Deadline-dependent cases run on the manual clock in
`test_device_deadlines.py`.

One `understudy serve` process serves every run of this module; each run has its own device.
It stays one node: it runs the real CLI process on the SQLite data directory the CLI template
prepared. The same restarts on three nodes run in-process in `test_device_deadlines.py` (every
step, both epochs, sockets on another node than the caller), and with real processes behind a
balancer in `tests/backend/multinode_faults/`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx
import pytest
import pytest_asyncio

from tests.backend.faults._caller import Answer, check_final, drive
from tests.backend.faults._figures import FIGURES
from tests.backend.faults._harness import PLAINTEXT, grants, leaks, open_session, write
from tests.backend.faults._process import ServerProcess, copy_data_dir
from tests.support.simdevice import Behaviour, SimulatedDevice

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from tests.backend.faults.conftest import Template

pytestmark = pytest.mark.asyncio(loop_scope="module")

STOPS = {
    "prepared": Behaviour(ready="silent"),
    "started": Behaviour(execute="crash_after_start"),
    "completed_unacked": Behaviour(execute="hold_result"),
}
# (journal step, epoch) -> (final answer, executions). Same epoch: an ungranted preparation is
# cancelled and the retry runs once; a started write with no result is unknown; a held result is
# replayed. New epoch: the journal is gone, so anything granted is unknown and writes are blocked.
EXPECTED = {
    ("prepared", "same"): ("200 succeeded", 1),
    ("started", "same"): ("409 command_outcome_unknown", 1),
    ("completed_unacked", "same"): ("200 succeeded", 1),
    ("prepared", "new"): ("409 writes_blocked", 0),
    ("started", "new"): ("409 command_outcome_unknown", 1),
    ("completed_unacked", "new"): ("409 command_outcome_unknown", 1),
}
RUNS = sorted(EXPECTED)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(
    cli_template: Template, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServerProcess]:
    run_dir = tmp_path_factory.mktemp("device-restarts")
    process = ServerProcess(copy_data_dir(cli_template.data_dir, run_dir / "data"), run_dir)
    await process.start(await process.spawn())
    try:
        yield process
    finally:
        await process.stop()
        data_files = [p for p in process.data_dir.iterdir() if p.is_file()]
        assert leaks(PLAINTEXT, [*data_files, process.telemetry_path, process.log_path]) == []


@pytest.mark.parametrize(("step", "epoch"), RUNS)
async def test_device_restarted_at_a_journal_step_runs_the_write_at_most_once(
    server: ServerProcess, cli_template: Template, step: str, epoch: str
) -> None:
    device_id = f"sim-{2 + RUNS.index((step, epoch))}"  # sim-1 belongs to the crash sweep
    credentials = cli_template.credentials
    device = SimulatedDevice(server.url, credentials.devices[device_id], STOPS[step])
    caller: asyncio.Task[Answer] | None = None
    try:
        async with httpx.AsyncClient(
            base_url=server.url,
            headers={"Authorization": f"Bearer {credentials.api_key}"},
            timeout=30,
        ) as http:
            await device.connect()
            session_id, lease = await open_session(
                http, device, device_id=device_id, profile=device_id
            )
            body = write("fill_secret")
            command_id = body["commandId"]
            caller = asyncio.create_task(drive(http, session_id, body, budget_s=40))
            await device.wait_for(lambda: lease.journal.get(command_id) == step, within=10)

            device.behaviour = Behaviour()  # the restarted extension is healthy
            if epoch == "same":
                await device.restart_extension()
            else:
                await device.restart_browser()
            final = await caller
            durable = await http.get(f"/v1/sessions/{session_id}/commands/{command_id}")
            if epoch == "same":
                await device.wait_for(lambda: command_id not in lease.journal, within=10)
            status = (await http.get(f"/v1/sessions/{session_id}")).json()
    finally:
        if caller is not None:
            caller.cancel()  # only still running when the test failed half-way
        await device.stop()

    FIGURES.run("device-restart", f"{step}/{epoch}-epoch", [final], device.executions)
    check_final(final, device.executions, allow_blocked=epoch == "new")
    executions = device.executions.get(command_id, 0)
    assert (final.label, executions) == EXPECTED[step, epoch], final.trail
    assert device.secrets_seen == [PLAINTEXT] * executions
    # The payload went out in exactly one grant per execution: never resent after the restart.
    leases = {id(lease): lease, **{id(other): other for other in device.leases.values()}}
    assert sum(grants(other, command_id) for other in leases.values()) == executions
    if final.label != "409 writes_blocked":
        assert (durable.status_code, durable.json()) == (final.status, final.body)
    if final.label == "409 command_outcome_unknown" or epoch == "new":
        # The first reason that blocked writes is the one reported: a browser restart blocks
        # them before its in-flight write turns unknown.
        reason = "browser_epoch_changed" if epoch == "new" else "unknown_outcome"
        assert (status["writesBlocked"], status["writesBlockedReason"]) == (True, reason)
