"""The operator CLI around a service: status, sessions, closes through the service, `serve`'s
start-up refusals, versions and telemetry pseudonyms."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.backend.conftest import Backend, idem, start_backend, stop_backend, unattended
from tests.backend.test_cli import SETTINGS_VARIABLES, subprocess_env
from understudy._bootstrap import DB_FILE
from understudy.cli import main, parser
from understudy.generated import models as m
from understudy.generated.versions import API_VERSION

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in list(os.environ):
        if variable.startswith("UNDERSTUDY_") or variable in SETTINGS_VARIABLES:
            monkeypatch.delenv(variable)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def run_async(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The CLI in a thread: it is another process's worth of blocking work beside the service."""
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def live_session(backend: Backend) -> tuple[str, str]:
    """A connected unattended session on a simulated device; returns (api key, session id)."""
    await backend.device()
    key = backend.api_key()
    async with backend.client(key) as http:
        created = await http.post("/v1/sessions", json=unattended(), headers=idem())
    assert created.status_code == 201, created.text
    session_id: str = created.json()["sessionId"]
    await backend.until(lambda: backend.session_status(session_id) == "connected", "connected")
    return key, session_id


# -- refusing to create a database ----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["sessions", "list"],
        ["keys", "list"],
        ["keys", "create", "--tenant", "acme", "--actor", "bot"],
        ["devices", "enroll", "--tenant", "acme", "--device", "laptop-1"],
        ["tenants", "list", "--json"],
    ],
)
def test_management_commands_refuse_a_data_dir_without_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    missing = tmp_path / "typo"
    code, out, err = run(capsys, "--data-dir", str(missing), *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert f"no database at {missing / DB_FILE}" in err
    assert "understudy migrate" in err
    assert not missing.exists()


def test_data_dir_given_after_the_subcommand_wins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNDERSTUDY_DATA_DIR", str(tmp_path / "from-env"))
    assert run(capsys, "migrate", "--data-dir", str(tmp_path / "given"))[0] == 0
    assert (tmp_path / "given" / DB_FILE).is_file()
    assert not (tmp_path / "from-env").exists()


# -- help and versions -----------------------------------------------------------------------------


def _parsers(top: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield top.prog, top
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_every_option_and_argument_of_every_command_has_help_text() -> None:
    missing = [
        f"{prog} {action.dest}"
        for prog, command in _parsers(parser())
        for action in command._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []
    progs = {prog for prog, _ in _parsers(parser())}
    assert {"understudy status", "understudy sessions close", "understudy telemetry pseudonym"} <= (
        progs
    )


def test_version_names_the_package_the_api_and_the_protocols(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("understudy 0.1.0 ")
    assert f"HTTP API {API_VERSION}" in out
    assert "device protocol 1, 2" in out


# -- status and sessions ---------------------------------------------------------------------------


async def test_status_shows_tenants_devices_and_live_sessions_of_a_running_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = await start_backend(tmp_path)
    try:
        _, session_id = await live_session(backend)
        data_dir = str(backend.settings.data_dir)
        code, out, _ = await run_async(capsys, "status", "--data-dir", data_dir, "--json")
        assert code == 0
        view = json.loads(out)
        assert view["service"]["running"] is True
        assert f"pid {os.getpid()}" in view["service"]["holder"]
        assert view["tenants"] == ["acme"]
        [device] = view["devices"]
        assert (device["deviceId"], device["state"]) == ("laptop-1", "online")
        assert (device["capacity"], device["usedCapacity"], device["freeCapacity"]) == (2, 1, 1)
        assert device["lastSeenAt"] is not None
        [session] = view["sessions"]
        assert session["sessionId"] == session_id
        assert (session["status"], session["writesBlocked"]) == ("connected", False)
        assert "profileStateKey" not in out
        assert "profile_hash" not in out

        code, text, _ = await run_async(capsys, "status", "--data-dir", data_dir)
        assert "service: running" in text
        assert "acme  laptop-1  online  1/2 free" in text
        assert session_id in text

        code, out, _ = await run_async(capsys, "sessions", "list", "--data-dir", data_dir, "--json")
        assert [s["sessionId"] for s in json.loads(out)] == [session_id]
        code, out, _ = await run_async(
            capsys, "sessions", "list", "--data-dir", data_dir, "--tenant", "globex", "--json"
        )
        assert json.loads(out) == []
        code, out, _ = await run_async(
            capsys, "sessions", "show", session_id, "--data-dir", data_dir, "--json"
        )
        detail = json.loads(out)
        assert (detail["actor"], detail["allowedOrigins"]) == ("bot", ["https://example.com"])
        code, _, err = await run_async(
            capsys,
            "sessions",
            "show",
            "0" * 8 + "-0000-4000-8000-" + "0" * 12,
            "--data-dir",
            data_dir,
        )
        assert code == 1
        assert "no session" in err
    finally:
        await stop_backend(backend)


async def test_sessions_close_goes_through_the_running_services_close(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = await start_backend(tmp_path)
    try:
        key, session_id = await live_session(backend)
        [device] = backend.devices
        data_dir = str(backend.settings.data_dir)
        code, out, err = await run_async(
            capsys, "sessions", "close", session_id, "--data-dir", data_dir
        )
        assert code == 0, err
        assert session_id in out
        await device.wait_for(lambda: device.frames_of(m.DeviceServerClose))
        await backend.until(lambda: backend.session_status(session_id) == "closed", "closed")
        # The device got the close frame a DELETE sends, and acknowledged it: the tab is gone.
        closes = device.frames_of(m.DeviceServerClose)
        assert [str(f.session_id) for f in closes] == [session_id]
        assert [f.reason for f in closes] == ["deleted"]
        async with backend.client(key) as http:
            tomb = await http.get(f"/v1/sessions/{session_id}")
        assert tomb.status_code == 410
        assert (tomb.json()["status"], tomb.json()["reason"]) == ("closed", "deleted")
        transitions = [
            e["to_state"]
            for e in backend.services.telemetry.events
            if e["event"] == "lifecycle.transition"
        ]
        assert transitions[-2:] == ["closing", "closed"]

        code, out, _ = await run_async(
            capsys, "sessions", "close", session_id, "--data-dir", data_dir
        )
        assert (code, out) == (0, f"session {session_id} is already closed\n")
    finally:
        await stop_backend(backend)


async def test_a_close_requested_while_no_service_runs_happens_at_its_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = await start_backend(tmp_path)
    key, session_id = await live_session(backend)
    await stop_backend(backend)
    data_dir = str(backend.settings.data_dir)

    code, out, _ = run(capsys, "sessions", "close", session_id, "--data-dir", data_dir)
    assert code == 0
    assert "no service is running" in out
    code, out, _ = run(capsys, "sessions", "show", session_id, "--data-dir", data_dir, "--json")
    # The CLI wrote a request, not the session row: that stays as the service left it.
    assert json.loads(out)["status"] in ("connected", "recovering")

    backend = await start_backend(tmp_path)
    try:
        async with backend.client(key) as http:
            shown = (await http.get(f"/v1/sessions/{session_id}")).json()
        assert shown["status"] in ("closing", "closed")
    finally:
        await stop_backend(backend)


async def test_telemetry_pseudonym_is_the_one_the_services_events_carry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = await start_backend(tmp_path)
    try:
        await live_session(backend)
        data_dir = str(backend.settings.data_dir)
        code, out, _ = await run_async(
            capsys, "telemetry", "pseudonym", "--tenant", "acme", "--data-dir", data_dir
        )
        assert code == 0
        tenants = {e["tenant"] for e in backend.services.telemetry.events if "tenant" in e}
        assert tenants == {out.strip()}
        other = await run_async(
            capsys, "telemetry", "pseudonym", "--tenant", "globex", "--data-dir", data_dir
        )
        assert other[1].strip() != out.strip()
    finally:
        await stop_backend(backend)


def test_telemetry_pseudonym_refuses_to_invent_a_master_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys, "telemetry", "pseudonym", "--tenant", "acme", "--data-dir", str(tmp_path)
    )
    assert code == 2
    assert "no master key" in err
    assert not (tmp_path / "master.key").exists()


# -- serve -----------------------------------------------------------------------------------------


def _serve(data_dir: Path, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "understudy.cli", "serve", *args],
        env=subprocess_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_serve_says_serving_only_once_it_answers_and_serves_the_references(
    tmp_path: Path,
) -> None:
    process = _serve(tmp_path / "data", "--port", "0")
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("understudy: serving on http://127.0.0.1:"), line
        url = line.split()[3]
        assert not url.endswith(":0")
        # No retry loop: the line is printed only after the socket listens and start-up ran.
        assert httpx.get(f"{url}/readyz", timeout=5).status_code == 200
        yaml_doc = httpx.get(f"{url}/openapi.yaml", timeout=5)
        assert yaml_doc.status_code == 200
        assert yaml_doc.text.startswith("openapi: 3.1.0")
        assert httpx.get(f"{url}/openapi.json", timeout=5).json()["info"]["version"] == API_VERSION
        assert "<html" in httpx.get(f"{url}/docs", timeout=5).text.lower()
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    # uvicorn re-raises the SIGTERM it handled once it has shut down, so the exit is by it.
    assert process.returncode == -signal.SIGTERM, err
    assert "Traceback" not in err


def test_serve_refuses_a_taken_port_with_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        process = _serve(tmp_path / "data", "--port", port)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert err.count("\n") == 1, err
    assert f"cannot listen on 127.0.0.1:{port}" in err
    assert "serving" not in out


@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_serve_turns_an_unusable_data_dir_into_one_line_and_exit_2(
    tmp_path: Path, kind: str
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    data_dir = blocker if kind == "a file" else blocker / "data"
    process = _serve(data_dir)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert f"data directory {data_dir} is unusable" in err
    assert "serving" not in out


def test_serve_refuses_a_port_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--port", "70000"])
    assert exited.value.code == 2
    assert "port number from 0 to 65535" in capsys.readouterr().err
