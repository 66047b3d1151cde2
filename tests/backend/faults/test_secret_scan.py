"""After `fill_secret` runs through faults, the plaintext is nowhere but in the device's grant.

The run stores a secret with the vault, then fills it: once plainly, once through a same-epoch
extension restart with the result held (a replay), once after a missed ready deadline and a
resubmission, once for a missing secret, and once through a crash in the middle of the operation
(unknown). Then it scans the SQLite files (database, WAL and shared memory, while the server runs
and after it stopped), the telemetry JSON-lines file, every server log record captured at DEBUG
(uvicorn's own loggers included) and every HTTP answer. The plaintext must have reached the device
(or the scan proves nothing) and nothing else.

On three nodes (the caller on node a, the device's sockets on node b) the scan reads every node's
data directory, telemetry file, log records and answers, and every row of the PostgreSQL schema
the nodes share (the outbox included), rendered as text, in place of the SQLite files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from tests.backend.faults._caller import Answer, check_final, drive
from tests.backend.faults._deployments import deployed
from tests.backend.faults._harness import (
    PLAINTEXT,
    SECRET_NAME,
    leaks,
    open_session,
    releasing,
    write,
)
from tests.support.simdevice import Behaviour
from tests.support.stored import database_rows
from understudy._store import vault

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import httpx
    import pytest

    from tests.backend.conftest import Backend
    from tests.backend.faults._deployments import Deployment
    from tests.support.simdevice import Lease, SimulatedDevice

# The app's loggers and the server's. Litestar configures the root logger when the app is built
# (its handlers replace pytest's, its level is INFO), and uvicorn's loggers do not propagate, so
# the capture handler is attached to each of them directly, after start-up, at DEBUG.
SERVER_LOGGERS = ("", "understudy", "litestar", "uvicorn", "uvicorn.error", "uvicorn.access")


@contextlib.contextmanager
def _listen_to_server(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in SERVER_LOGGERS]
    saved = [(logger, logger.level, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.propagate = False  # each one hands its records to the capture handler once
        logger.addHandler(caplog.handler)
    try:
        yield
    finally:
        for logger, level, propagate in saved:
            logger.setLevel(level)
            logger.propagate = propagate
            logger.removeHandler(caplog.handler)


def _data_files(deployment: Deployment) -> list[Path]:
    return sorted(
        p for node in deployment.nodes for p in node.settings.data_dir.iterdir() if p.is_file()
    )


async def _fill(
    backend: Backend,
    http: httpx.AsyncClient,
    device: SimulatedDevice,
    session_id: str,
    lease: Lease,
    stop_at: str | None,
) -> Answer:
    """One `fill_secret`; `stop_at` names the fault it goes through."""
    body = write("fill_secret")
    command_id = body["commandId"]
    if stop_at is None:
        return await drive(http, session_id, body)
    device.behaviour = {
        "prepared": Behaviour(ready="silent"),
        "started": Behaviour(execute="crash_after_start"),
        "completed_unacked": Behaviour(execute="hold_result"),
    }[stop_at]
    caller = asyncio.create_task(drive(http, session_id, body))
    await device.wait_for(lambda: lease.journal.get(command_id) == stop_at)
    device.behaviour = Behaviour()
    if stop_at == "prepared":
        await backend.clock.advance(5)  # the ready deadline: not started, the caller resubmits
    else:
        await device.restart_extension()
    return await asyncio.wait_for(caller, 30)


async def _run(deployment: Deployment, answers: list[str], finals: list[Answer]) -> None:
    backend, socket_node = deployment.http, deployment.device
    services = backend.services
    with services.storage.transaction() as tx:
        vault.put(tx.vault, services.keys, "acme", SECRET_NAME, PLAINTEXT, services.clock.now())
    async with releasing(backend), backend.client(backend.api_key()) as http:
        device = await socket_node.device()
        session_id, lease = await open_session(http, device)
        for stop_at in (None, "completed_unacked", "prepared", "started"):
            finals.append(await _fill(backend, http, device, session_id, lease, stop_at))
        missing = write("fill_secret")
        missing["command"]["secretRef"] = "vault:no-such-secret"
        # The session holds an unknown write now; a new session runs the last fill.
        other, _ = await open_session(
            http, device, profile="profile-b", origin="https://other.example"
        )
        finals.append(await drive(http, other, missing))
        for final in finals:
            answers.append(str(final.body))
        answers.append((await http.get(f"/v1/sessions/{session_id}")).text)
        answers.append((await http.get(f"/v1/sessions/{other}")).text)
        answers.append((await http.get("/metrics")).text)
        # While the server runs: the WAL and shared memory hold the latest pages.
        assert leaks(PLAINTEXT, _data_files(deployment)) == []


async def test_no_plaintext_secret_in_storage_telemetry_logs_or_answers(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    deployment_kind: str,
    request: pytest.FixtureRequest,
) -> None:
    caplog.set_level(logging.DEBUG)
    answers: list[str] = []
    finals: list[Answer] = []
    rows: list[str] = []
    # Listening starts after start-up (see SERVER_LOGGERS) and ends after the nodes stopped.
    running = deployed(deployment_kind, tmp_path, request, telemetry=True)
    deployment = await running.__aenter__()
    with _listen_to_server(caplog):
        try:
            await _run(deployment, answers, finals)
            if deployment.three_nodes:
                rows = database_rows(request.getfixturevalue("postgresql_url"))
        finally:
            await running.__aexit__(None, None, None)
    device = deployment.device.devices[0]
    files = _data_files(deployment)
    # Node c served nothing in this run, so it may have written no telemetry at all.
    telemetry = [
        path
        for node in deployment.nodes
        if (path := node.settings.telemetry_path) is not None and path.exists()
    ]
    labels = [final.label for final in finals]
    assert labels == [
        "200 succeeded",
        "200 succeeded",
        "200 succeeded",
        "409 command_outcome_unknown",
        "200 failed",
    ]
    assert finals[-1].body["error"]["code"] == "secret_not_found"
    for final in finals:
        check_final(final, device.executions)
    # The plaintext did travel (in the four grants), so finding it nowhere else means something.
    assert device.secrets_seen == [PLAINTEXT] * 4
    # The scan reads the vault's own storage: the entry's name is there, its value is not.
    if deployment.three_nodes:
        assert any(row.startswith("vault") and SECRET_NAME in row for row in rows), rows[:5]
        assert not any(PLAINTEXT.encode().hex() in row for row in rows)
    else:
        assert {"understudy.db"} <= {p.name for p in files}
        assert any(SECRET_NAME.encode() in path.read_bytes() for path in files)
    for node in {id(n): n for n in (deployment.http, deployment.device)}.values():
        path = node.settings.telemetry_path
        assert path is not None and path.stat().st_size > 0, path
    # The simulated extension's own socket log (websockets.client, in this process) shows the
    # grant it received: the device is where the plaintext belongs. Every other record is scanned.
    records = [
        f"{r.name} {r.levelname} {r.getMessage()} {r.args!r} {r.exc_text}"
        for r in caplog.records
        if r.name != "websockets.client"
    ]
    assert any(r.startswith("uvicorn.error DEBUG") for r in records)  # DEBUG reached the capture
    assert leaks(PLAINTEXT, [*files, *telemetry], [*records, *answers, *rows]) == []
    deployment.figures.run("secret-scan", "fill_secret-through-faults", finals, device.executions)
