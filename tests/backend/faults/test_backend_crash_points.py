"""Kill the real backend process with SIGKILL right after each persisted step of the write sequence.

Each run starts `understudy serve` with `UNDERSTUDY_CRASH_AFTER=<step>` on a data directory made
by the CLI, connects a simulated device, opens an unattended session and submits a `fill_secret`
write (a write whose grant carries a vaulted plaintext). The process dies right after the step's
transaction commits; the test restarts it on the same data directory without the crash point and
the device reconnects with the same browser epoch (its write journal kept) or after a browser
restart (a new epoch). Meanwhile the caller keeps to the connector's rules: poll the same command,
resubmit the same id on `504`. Every run: the device executed the write at most once and the
caller's last answer is durable or an explicit unknown; the plaintext is nowhere on disk or in the
server's output.

It stays one node (one process on a SQLite data directory, killed at each crash point): its
three-node counterpart, real processes on one PostgreSQL database killed at the same points, is
`tests/backend/multinode_faults/test_node_crash_points.py`.
"""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.backend.faults._caller import Answer, check_final, drive
from tests.backend.faults._figures import FIGURES
from tests.backend.faults._harness import PLAINTEXT, leaks, open_session, write
from tests.backend.faults._process import ServerProcess, copy_data_dir
from tests.support.simdevice import SimulatedDevice
from understudy.generated import models as m

if TYPE_CHECKING:
    from pathlib import Path

    from tests.backend.faults.conftest import Template

# (crash step, device epoch after the restart) -> the caller's final answer and executions.
# A new browser epoch marks a granted write unknown even when the grant never left the dead
# process: the backend cannot tell, so it says so (and executions stay 0 here).
EXPECTED = {
    ("preparing", "same"): ("200 succeeded", 1),
    ("granted", "same"): ("200 succeeded", 1),
    ("result", "same"): ("200 succeeded", 1),
    ("preparing", "new"): ("409 writes_blocked", 0),
    ("granted", "new"): ("409 command_outcome_unknown", 0),
    ("result", "new"): ("200 succeeded", 1),
}
# What the device's write journal held when the backend died.
JOURNAL_AT_CRASH = {"preparing": None, "granted": "prepared", "result": "completed_unacked"}


@pytest.mark.parametrize("epoch", ["same", "new"])
@pytest.mark.parametrize("step", ["preparing", "granted", "result"])
async def test_backend_killed_after_a_write_step_runs_the_write_at_most_once(
    cli_template: Template, tmp_path: Path, step: str, epoch: str
) -> None:
    server = ServerProcess(copy_data_dir(cli_template.data_dir, tmp_path / "data"), tmp_path)
    credentials = cli_template.credentials
    device = SimulatedDevice(server.url, credentials.devices["sim-1"])
    crashing = await server.spawn(crash_after=step)
    restart = await server.spawn()  # imports while the scenario runs
    caller: asyncio.Task[Answer] | None = None
    await server.start(crashing)
    try:
        async with httpx.AsyncClient(
            base_url=server.url,
            headers={"Authorization": f"Bearer {credentials.api_key}"},
            timeout=30,
        ) as http:
            await device.connect()
            session_id, lease = await open_session(http, device)
            body = write("fill_secret")
            command_id = body["commandId"]
            caller = asyncio.create_task(drive(http, session_id, body, budget_s=45))

            assert await server.exited() == -signal.SIGKILL
            assert lease.journal.get(command_id) == JOURNAL_AT_CRASH[step]
            await server.start(restart)
            if epoch == "same":
                await device.connect()  # the journal survives (chrome.storage.session)
            else:
                await device.restart_browser()
            final = await caller
            durable = await http.get(f"/v1/sessions/{session_id}/commands/{command_id}")
            if epoch == "same":
                # Whatever the device still held is settled: replayed and acked, or cancelled.
                await device.wait_for(lambda: command_id not in lease.journal, within=10)
    finally:
        if caller is not None:
            caller.cancel()  # only still running when the test failed half-way
        await device.stop()
        await server.stop()

    FIGURES.run("backend-sigkill", f"{step}/{epoch}-epoch", [final], device.executions)
    check_final(final, device.executions, allow_blocked=epoch == "new")
    assert (final.label, device.executions.get(command_id, 0)) == EXPECTED[step, epoch], final.trail
    # The plaintext travelled once per execution, in the grant only.
    assert device.secrets_seen == [PLAINTEXT] * device.executions.get(command_id, 0)
    if final.status in (200, 409) and final.code != "writes_blocked":
        assert (durable.status_code, durable.json()) == (final.status, final.body)
    if step == "result" and epoch == "same":
        replayed = [f for f in lease.session_frames if isinstance(f, m.SessionServerResultAck)]
        assert [str(f.command_id) for f in replayed] == [command_id]
    data_files = sorted(p for p in server.data_dir.iterdir() if p.is_file())
    assert {"understudy.db"} <= {p.name for p in data_files}
    assert leaks(PLAINTEXT, [*data_files, server.telemetry_path, server.log_path]) == []
    assert server.telemetry_path.stat().st_size > 0  # the sink was on: the scan read something
