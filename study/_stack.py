"""The three services of a study on the embedded default, as separate processes.

Understudy (`understudy serve`, SQLite), the demo shop (in this process) and Synthetic Users
(`synthetic-users serve`, SQLite, with its browser fleet of local Chromium profiles). Each
service is a process group of its own, so stopping (or SIGKILLing, as the fault test does) one
reaches everything it started. `stop()` leaves nothing running.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

import httpx

from demo.build import DIST, ROOT, free_port
from study.shop import DemoShop

CUSTOMER = "demo-team"
T = TypeVar("T")
READY_TIMEOUT_S = 30.0


def started(value: T | None, what: str) -> T:
    """`value`, or a clear error when the stack was not started."""
    if value is None:
        raise RuntimeError(f"{what} is not running: call StudyStack.start() first")
    return value


def _cli(env: dict[str, str], module: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def _token(output: str, label: str) -> str:
    match = re.search(rf"^{label}:\s+(\S+)$", output, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no {label!r} in:\n{output}")
    return match.group(1)


@dataclass
class Service:
    """A service process: its command, environment and log."""

    name: str
    argv: list[str]
    env: dict[str, str]
    base_url: str
    log_path: Path
    ready_path: str = "/readyz"
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    def start(self) -> None:
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() reaches its children
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.process.returncode}; see {self.log_path}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}{self.ready_path}", timeout=2).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} was not ready in {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.1)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop the process group (SIGTERM, then SIGKILL after 15 s)."""
        process, self.process = self.process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL the process alone, as a crash would: its children are left to fend alone."""
        process, self.process = self.process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass
class StudyStack:
    """Understudy, the demo shop and Synthetic Users, under one data directory."""

    root: Path
    slow_step_s: float = 2.5
    max_browsers: int = 3
    extra_env: dict[str, str] = field(default_factory=dict)  # more Synthetic Users settings
    shop: DemoShop | None = None
    understudy: Service | None = None
    synthetic_users: Service | None = None
    api_key: str = ""
    smtp_port: int = 0  # the inbox's SMTP port (a free one, chosen at start)
    _started: list[object] = field(default_factory=list)

    @property
    def url(self) -> str:
        return started(self.synthetic_users, "Synthetic Users").base_url

    def start(self) -> StudyStack:
        self.root.mkdir(parents=True, exist_ok=True)
        # The shop mails order confirmations to the personas' inboxes (Synthetic Users' SMTP).
        self.smtp_port = free_port()
        self.shop = DemoShop(slow_step_s=self.slow_step_s, smtp_port=self.smtp_port).start()
        self._start_understudy()
        self._start_synthetic_users()
        return self

    def _start_understudy(self) -> None:
        port = free_port()
        env = {
            **os.environ,
            "UNDERSTUDY_DATA_DIR": str(self.root / "understudy"),
            "UNDERSTUDY_HOST": "127.0.0.1",
            "UNDERSTUDY_PORT": str(port),
        }
        _cli(env, "understudy.cli", "migrate")
        self._operator_token = _token(
            _cli(env, "understudy.cli", "operator-tokens", "create", "--name", "study"),
            "operator token",
        )
        self.understudy = Service(
            "understudy",
            [sys.executable, "-m", "understudy.cli", "serve"],
            env,
            f"http://127.0.0.1:{port}",
            self.root / "understudy.log",
        )
        self.understudy.start()

    def synthetic_users_env(self) -> dict[str, str]:
        understudy = started(self.understudy, "Understudy")
        return {
            **os.environ,
            "SYNTHETIC_USERS_DATA_DIR": str(self.root / "synthetic-users"),
            "SYNTHETIC_USERS_HOST": "127.0.0.1",
            "SYNTHETIC_USERS_PORT": str(self._su_port),
            "UNDERSTUDY_URL": understudy.base_url,
            "UNDERSTUDY_OPERATOR_TOKEN": self._operator_token,
            "SYNTHETIC_USERS_EXTENSION_DIR": str(DIST),
            "FLEET_MAX_BROWSERS": str(self.max_browsers),
            "SYNTHETIC_USERS_SMTP_PORT": str(self.smtp_port),
            # The demo shop is on 127.0.0.1: loopback targets are for local development only.
            "SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS": "1",
            **self.extra_env,
        }

    def _start_synthetic_users(self) -> None:
        self._su_port = free_port()
        env = self.synthetic_users_env()
        _cli(env, "synthetic_users.cli", "migrate")
        # `keys create` prints the key alone on stdout, for scripts.
        self.api_key = _cli(env, "synthetic_users.cli", "keys", "create", "--customer", CUSTOMER)
        self.api_key = self.api_key.strip()
        self.synthetic_users = Service(
            "synthetic-users",
            [sys.executable, "-m", "synthetic_users.cli", "serve"],
            env,
            f"http://127.0.0.1:{self._su_port}",
            self.root / "synthetic-users.log",
            ready_path="/healthz",
        )
        self.synthetic_users.start()

    def restart_synthetic_users(self) -> None:
        """Start the Synthetic Users service again on the same data (after `kill`)."""
        started(self.synthetic_users, "Synthetic Users").start()

    def browser_pids(self) -> dict[str, int]:
        """Device id -> pid of the Chromium the fleet runs for it (its process group leader)."""
        profiles = str(self.root / "synthetic-users" / "fleet" / "profiles")
        found: dict[str, int] = {}
        for argv, pid in _processes():
            for arg in argv:
                if arg.startswith(f"--user-data-dir={profiles}/") and _leader(pid):
                    found[arg.rsplit("/", 1)[-1]] = pid
        return found

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.api_key}"}, timeout=30
        )

    def stop(self) -> None:
        for service in (self.synthetic_users, self.understudy):
            if service is not None:
                service.stop()
        _kill_browsers(self.root)
        if self.shop is not None:
            self.shop.stop()


def _processes() -> list[tuple[list[str], int]]:
    """(argv, pid) of every process this user can see."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                found.append(([a.decode(errors="replace") for a in argv], int(proc.name)))
    return found


def _kill_browsers(root: Path) -> None:
    """Chromium processes whose profile lives under `root` (a killed service leaves them)."""
    marker = f"--user-data-dir={root}"
    for argv, pid in _processes():
        if any(a.startswith(marker) for a in argv):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _leader(pid: int) -> bool:
    """Whether `pid` leads its process group (the browser, not one of its helpers)."""
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False
