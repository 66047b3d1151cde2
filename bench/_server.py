"""Run the real backend as an `understudy serve` subprocess for a benchmark.

The load generator and the simulated devices run in other processes, so the server's CPU time and
resident memory (read from /proc/<pid>) are its own. Each server gets a fresh data directory; the
consumer API key comes from the operator CLI (`understudy keys create`), and devices are
enrolled through the documented ``DEVICE_TOKENS`` setting (a ``device_tokens`` table in the TOML
file named by ``UNDERSTUDY_CONFIG``), because enrolling 10,000 devices one CLI process at a time
(~0.3 s each) would take most of an hour.

The server binds a port it picks itself (``UNDERSTUDY_PORT=0``) and the benchmark reads it from
the line ``understudy: serving on …`` it prints: a port probed free here and handed over would
be free only until someone else took it, and once another benchmark's server answered on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal

from bench._http import HttpConnection
from bench._proc import ProcSample, sample
from understudy import _security

if TYPE_CHECKING:
    from collections.abc import Mapping

TENANT: Final = "bench"
ACTOR: Final = "bench"
# Every exact quota raised to the largest value QUOTA_POLICY accepts, so the benchmark measures
# the command path, not the limits (the limits are still counted in SQLite on every command).
RAISED_QUOTAS: Final = {
    "sessionCreatesPerActorPerMin": 1_000_000,
    "commandsPerSessionPerMin": 1_000_000,
    "commandsPerTenantPerMin": 1_000_000,
    "commandsPerSessionLifetime": 1_000_000,
    "requestsPerCredentialPerMin": 1_000_000,
}
_API_KEY = re.compile(r"^api key:\s+(usk_\S+)$", re.MULTILINE)
# What `understudy serve` and `synthetic-users serve` print once they listen (on the bound port).
_SERVING = re.compile(r"^[a-z-]+: serving on https?://[^\s/]+:(\d+)", re.MULTILINE)
_READY_TIMEOUT_S: Final = 120.0
_STOP_TIMEOUT_S: Final = 30.0


def new_devices(count: int, prefix: str = "d") -> dict[str, str]:
    """``count`` fresh device ids mapped to fresh device credentials (``udc_…`` tokens)."""
    width = max(3, len(str(count - 1)))
    return {f"{prefix}{i:0{width}d}": _security.generate_token("device") for i in range(count)}


def _understudy_command() -> list[str]:
    script = Path(sys.executable).with_name("understudy")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "understudy.cli"]


def serving_port(output: Path) -> int | None:
    """The port a server started on port 0 says it serves on, once its output says so."""
    try:
        text = output.read_text(errors="replace")
    except FileNotFoundError:
        return None
    match = _SERVING.search(text)
    return int(match.group(1)) if match else None


async def answers_ok(port: int, path: str) -> bool:
    """Whether ``GET path`` on 127.0.0.1:``port`` answers 200 (False while nothing listens)."""
    connection = HttpConnection("127.0.0.1", port)
    try:
        return (await connection.request("GET", path)).status == 200
    except OSError:
        return False
    finally:
        await connection.close()


@dataclass
class Server:
    """One `understudy serve` process and what a benchmark needs to drive it.

    Args:
        data_dir: A fresh directory for SQLite, the master key and telemetry.
        synchronous: ``UNDERSTUDY_SQLITE_SYNCHRONOUS``.
        devices: Device id to credential, enrolled through ``DEVICE_TOKENS``.
        device_tenants: Device id to tenant, for devices outside the ``bench`` tenant.
        telemetry: Write content-free telemetry to ``data_dir/telemetry.jsonl``.
        profile: Run under ``bench._cprofile_serve`` so phases can be CPU-profiled.
        wiretap: Run under ``bench._wiretap_serve`` so a phase's socket frames and HTTP
            exchanges can be stamped on the server's side (``wire_record``); not with
            ``profile``.
        group_commit: ``UNDERSTUDY_SQLITE_GROUP_COMMIT``.
        extra_env: More settings (e.g. ``UNDERSTUDY_CONNECTION_LIMITS``); not
            ``UNDERSTUDY_PUBLIC_URL``, whose port the served line would print instead.
        port: 0 (the server picks a free one; set once it serves) or a fixed port.
    """

    data_dir: Path
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    devices: Mapping[str, str] = field(default_factory=dict)
    device_tenants: Mapping[str, str] = field(default_factory=dict)
    telemetry: bool = True
    profile: bool = False
    wiretap: bool = False
    group_commit: bool = True
    extra_env: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    api_key: str = ""
    process: asyncio.subprocess.Process | None = None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None  # noqa: S101 - started
        return self.process.pid

    @property
    def db_path(self) -> Path:
        return self.data_dir / "understudy.db"

    @property
    def profile_path(self) -> Path:
        return self.data_dir / "profile.pstats"

    @property
    def wire_path(self) -> Path:
        return self.data_dir / "wire.json"

    @property
    def telemetry_path(self) -> Path:
        return self.data_dir / "telemetry.jsonl"

    def _env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("UNDERSTUDY_") and key not in ("QUOTA_POLICY", "DEVICE_TOKENS")
        }
        env.update(
            UNDERSTUDY_DATA_DIR=str(self.data_dir),
            UNDERSTUDY_HOST=self.host,
            UNDERSTUDY_PORT=str(self.port),
            UNDERSTUDY_SQLITE_SYNCHRONOUS=self.synchronous,
            UNDERSTUDY_SQLITE_GROUP_COMMIT=str(self.group_commit).lower(),
            UNATTENDED_ENABLED_TENANTS=json.dumps([TENANT]),
            QUOTA_POLICY=json.dumps(RAISED_QUOTAS),
        )
        env.update(self.extra_env)
        if self.profile:
            env["BENCH_PROFILE_OUT"] = str(self.profile_path)
        if self.wiretap:
            env["BENCH_WIRE_OUT"] = str(self.wire_path)
        if self.telemetry:
            env["UNDERSTUDY_TELEMETRY_PATH"] = str(self.telemetry_path)
        if self.devices:
            env["UNDERSTUDY_CONFIG"] = str(self._write_device_tokens())
        return env

    def _write_device_tokens(self) -> Path:
        # Only digests go to disk, as an operator would store them.
        lines = ["# written by bench: DEVICE_TOKENS as a TOML table (digest -> tenant, device)"]
        for device_id, credential in self.devices.items():
            lines += [
                f'[device_tokens."{_security.token_digest(credential)}"]',
                f'tenant = "{self.device_tenants.get(device_id, TENANT)}"',
                f'device = "{device_id}"',
            ]
        path = self.data_dir / "bench-config.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    async def start(self, setup: bool = True) -> None:
        """Create the API key with the CLI, start `understudy serve` and wait for /readyz.

        Args:
            setup: Migrate and create the key first; a further node of a database another
                `Server` set up passes False (and that server's ``api_key``).
        """
        env = _prepare(self)
        if setup:
            await self._setup(env)
        await self._launch(env)

    async def _setup(self, env: Mapping[str, str]) -> None:
        # Only `migrate` and `serve` create a database; the key is made before the service runs.
        migrated = await asyncio.create_subprocess_exec(
            *_understudy_command(), "migrate", env=env, stdout=asyncio.subprocess.DEVNULL
        )
        if await migrated.wait() != 0:
            raise RuntimeError("`understudy migrate` failed")
        created = await asyncio.create_subprocess_exec(
            *_understudy_command(),
            *("keys", "create", "--tenant", TENANT, "--actor", ACTOR),
            env=env,
            stdout=asyncio.subprocess.PIPE,
        )
        stdout, _ = await created.communicate()
        match = _API_KEY.search(stdout.decode())
        if created.returncode != 0 or match is None:
            raise RuntimeError("`understudy keys create` failed or printed no api key")
        self.api_key = match.group(1)

    async def _launch(self, env: Mapping[str, str]) -> None:
        if self.profile and self.wiretap:
            raise ValueError("a server is either profiled or wiretapped, not both")
        if self.profile:
            serve = [sys.executable, "-m", "bench._cprofile_serve"]
        elif self.wiretap:
            serve = [sys.executable, "-m", "bench._wiretap_serve"]
        else:
            serve = [*_understudy_command(), "serve"]
        with _open_log(self.data_dir / "server.log") as log:
            self.process = await asyncio.create_subprocess_exec(
                *serve,
                env=env,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the bench terminal is ours to handle
            )
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        log = self.data_dir / "server.log"
        while True:
            assert self.process is not None  # noqa: S101 - started
            if self.process.returncode is not None:
                last = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
                raise RuntimeError(
                    f"understudy serve exited with {self.process.returncode}: {last[0]} (see {log})"
                )
            if self.port == 0:
                self.port = serving_port(log) or 0
            if self.port != 0 and await answers_ok(self.port, "/readyz"):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"understudy serve not ready after {_READY_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.05)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the server process (the profiler's switches)."""
        assert self.process is not None  # noqa: S101 - started
        self.process.send_signal(signum)

    def wire_start(self) -> None:
        """Start an empty record of the server's socket frames and HTTP exchanges."""
        if not self.wiretap:
            raise ValueError("the server was not started with wiretap=True")
        self.wire_path.unlink(missing_ok=True)
        self.signal(signal.SIGUSR1)

    async def wire_record(self, timeout_s: float = 30.0) -> list[list[Any]]:
        """Stop the record ``wire_start`` opened and read it: ``[kind, type, command id, ms]``
        per stamp (``bench._wiretap_serve``)."""
        self.signal(signal.SIGUSR2)
        if not await appeared(self.wire_path, timeout_s):
            raise RuntimeError("the wiretapped server wrote no record")
        record: list[list[Any]] = json.loads(self.wire_path.read_text())
        return record

    def sample(self) -> ProcSample:
        """CPU seconds and memory of the server process now."""
        return sample(self.pid)

    async def settle(
        self, below: float = 0.05, window_s: float = 1.0, timeout_s: float = 600.0
    ) -> float:
        """Wait until the server uses less than ``below`` of a core over ``window_s``; returns
        the seconds waited. Work queued behind the replies a client saw (actor turns that run
        after a ``welcome``) must not be billed to the next measurement."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            before = self.sample().cpu_s
            await asyncio.sleep(window_s)
            if (self.sample().cpu_s - before) / window_s < below:
                break
        return time.monotonic() - started

    def connection(self) -> HttpConnection:
        """A keep-alive HTTP connection that sends the consumer API key."""
        return HttpConnection(self.host, self.port, {"Authorization": f"Bearer {self.api_key}"})

    async def stop(self) -> int:
        """SIGTERM (uvicorn shuts down gracefully), then SIGKILL after a timeout; the exit code.

        uvicorn re-raises the signal it handled once it has shut down, so a clean stop is -15.
        """
        process = self.process
        if process is None:
            return 0
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), _STOP_TIMEOUT_S)
            except TimeoutError:
                process.kill()
                await process.wait()
        assert process.returncode is not None  # noqa: S101 - waited
        return process.returncode


async def appeared(path: Path, timeout_s: float) -> bool:
    """Whether the file another process writes (and renames into place) exists within
    `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not path.exists():  # noqa: ASYNC240 - one stat per poll; another process writes it
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _prepare(server: Server) -> dict[str, str]:
    server.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return server._env()


def _open_log(path: Path) -> IO[bytes]:
    return path.open("wb")
