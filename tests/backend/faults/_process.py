"""A real backend process (`understudy serve`) on a data directory prepared with the real CLI.

    creds = prepare_data_dir(template, devices=4, secrets={"login-password": PLAINTEXT})
    server = ServerProcess(copy_data_dir(template, run_dir / "data"), run_dir)
    crashing = server.spawn(crash_after="granted")  # UNDERSTUDY_CRASH_AFTER: SIGKILL after it
    restart = server.spawn()                         # warms up while the scenario runs
    await server.start(crashing)
    ...
    assert await server.exited() == -signal.SIGKILL
    await server.start(restart)                      # same data directory, no crash point
    await server.stop()

A spawned process runs the CLI's entry point (`understudy.cli:main`, what the `understudy` script
runs) with `serve`, but imports it first and waits for a line on stdin before serving. Importing
the app costs seconds of CPU on a shared machine; paying it before the crash rather than after
keeps the restart as quick as a supervisor's, and the suite within its time budget.

The server's stdout and stderr go to `server.log` in the run directory (scanned for secrets).

The same class runs a node of a several-node deployment (`tests/backend/multinode_faults`): a
`name` of its own for its log and telemetry files, and `env` with the shared
`UNDERSTUDY_DATABASE_URL`, the balancer's `UNDERSTUDY_PUBLIC_URL` and its `UNDERSTUDY_NODE_ID`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from collections.abc import Mapping

CLI = Path(sys.executable).parent / "understudy"
# `understudy serve`, imported ahead and started on a line from stdin (see the module docstring).
_WARM_SERVE = (
    "import sys\n"
    "import understudy.cli, understudy.http\n"
    "if sys.stdin.readline().strip() != 'serve':\n"
    "    sys.exit(0)\n"  # the test went away before starting it
    "sys.exit(understudy.cli.main(['serve']))\n"
)
TENANT = "acme"
START_TIMEOUT_S = 60.0  # from the go signal; the import may still run on a loaded machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _base_env(data_dir: Path, database_url: str | None = None) -> dict[str, str]:
    # The parent's own UNDERSTUDY_* settings (a crash point above all) must not leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNDERSTUDY_")}
    env["UNDERSTUDY_DATA_DIR"] = str(data_dir)
    env["UNATTENDED_ENABLED_TENANTS"] = f'["{TENANT}"]'
    if database_url is not None:
        env["UNDERSTUDY_DATABASE_URL"] = database_url
    return env


def _cli(
    data_dir: Path, *args: str, stdin: str | None = None, database_url: str | None = None
) -> str:
    done = subprocess.run(
        [str(CLI), *args],
        env=_base_env(data_dir, database_url),
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


@dataclass(frozen=True)
class Credentials:
    api_key: str
    devices: dict[str, str]  # device id -> credential


def prepare_data_dir(
    data_dir: Path, *, devices: int, secrets: dict[str, str], database_url: str | None = None
) -> Credentials:
    """Create the database, a consumer key, `devices` devices and `secrets`, all with the CLI.

    With `database_url` the data lands in that PostgreSQL database; `data_dir` still holds the
    master key the vaulted secrets are sealed with, so every node needs a copy of it.
    """

    def cli(*args: str, stdin: str | None = None) -> str:
        return _cli(data_dir, *args, stdin=stdin, database_url=database_url)

    cli("migrate")
    printed = cli("keys", "create", "--tenant", TENANT, "--actor", "faults")
    key = re.search(r"^api key: (\S+)$", printed, re.MULTILINE)
    assert key is not None, printed
    credentials: dict[str, str] = {}
    for i in range(1, devices + 1):
        device_id = f"sim-{i}"
        printed = cli("devices", "enroll", "--tenant", TENANT, "--device", device_id)
        token = re.search(r"^credential: (\S+)$", printed, re.MULTILINE)
        assert token is not None, printed
        credentials[device_id] = token.group(1)
    for name, value in secrets.items():
        cli("secrets", "put", "--tenant", TENANT, "--name", name, stdin=value)
    return Credentials(key.group(1), credentials)


def copy_data_dir(template: Path, target: Path) -> Path:
    shutil.copytree(template, target)
    return target


class ServerProcess:
    """`understudy serve` on one data directory and one port, restartable.

    Args:
        data_dir: The data directory (the SQLite file, or only the master key on PostgreSQL).
        run_dir: Where the log (`{name}.log`) and the telemetry sink go.
        name: Names those files; `server` (`server.log`, `telemetry.jsonl`) by default.
        env: More settings for every spawned process (the database URL, the public URL).
    """

    def __init__(
        self,
        data_dir: Path,
        run_dir: Path,
        *,
        name: str = "server",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.name = name
        self.port = free_port()
        telemetry = "telemetry.jsonl" if name == "server" else f"{name}.telemetry.jsonl"
        self.telemetry_path = run_dir / telemetry
        self.log_path = run_dir / f"{name}.log"
        self.env = dict(env or {})
        self._process: asyncio.subprocess.Process | None = None
        self._spawned: list[asyncio.subprocess.Process] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def spawn(self, crash_after: str | None = None) -> asyncio.subprocess.Process:
        """Launch a process that imports the app now and serves when `start` tells it to."""
        env = _base_env(self.data_dir) | self.env
        env["UNDERSTUDY_PORT"] = str(self.port)
        env["UNDERSTUDY_TELEMETRY_PATH"] = str(self.telemetry_path)
        if crash_after is not None:
            env["UNDERSTUDY_CRASH_AFTER"] = crash_after
        with self.log_path.open("ab") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _WARM_SERVE,
                env=env,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._spawned.append(process)
        return process

    async def start(self, process: asyncio.subprocess.Process) -> None:
        """Let a spawned process serve, and return once `/readyz` answers 200."""
        assert self._process is None or self._process.returncode is not None, "one at a time"
        assert process.stdin is not None
        process.stdin.write(b"serve\n")
        await process.stdin.drain()
        self._process = process
        deadline = time.monotonic() + START_TIMEOUT_S
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as http:
            while True:
                if process.returncode is not None:
                    raise AssertionError(f"server exited at start-up: {self.output()}")
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get("/readyz")).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise AssertionError(f"server not ready in {START_TIMEOUT_S}s: {self.output()}")
                await asyncio.sleep(0.05)

    async def exited(self, within: float = 15.0) -> int:
        """Wait for the serving process to end on its own (a crash point); its return code."""
        assert self._process is not None
        return await asyncio.wait_for(self._process.wait(), within)

    @property
    def serving(self) -> bool:
        """Whether a started process is still running."""
        return self._process is not None and self._process.returncode is None

    def send_signal(self, signum: int) -> None:
        """Send a signal to the serving process (`SIGSTOP`/`SIGCONT`: a node paused)."""
        assert self._process is not None, "not started"
        self._process.send_signal(signum)

    async def kill(self) -> None:
        """SIGKILL the serving process (a node lost), and wait until it is gone."""
        assert self._process is not None, "not started"
        if self._process.returncode is None:
            self._process.kill()
        await self._process.wait()

    async def stop(self) -> None:
        """Stop the serving process and every spawned one still waiting."""
        for process in self._spawned:
            if process.returncode is not None:
                continue
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        self._spawned.clear()
        self._process = None

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
