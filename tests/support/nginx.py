"""nginx as a test's load balancer: Debian's binary, a prefix directory of its own, a free port.

    block = runbook_nginx_block("three-nodes")           # a fenced block of docs/operations.md
    with Nginx.start(pointed_at(block, ["127.0.0.1:8001", ...], port), prefix) as nginx:
        ...                                              # http://127.0.0.1:{nginx.port}

The runbook's blocks are used as written, with only their `server` lines (one per node) and their
`listen` line replaced, so a documented configuration cannot drift from one that works. Without
the binary the tests that need it are skipped, except in CI (`CI=true`), where they fail:
`scripts/bootstrap` installs `nginx-light`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
START_TIMEOUT_S = 10.0


def runbook_nginx_block(label: str = "") -> str:
    """The runbook's fenced block opened with ```` ```nginx {label} ```` (```` ```nginx ````
    alone when `label` is empty)."""
    fence = re.escape(f"```nginx {label}".rstrip())
    blocks: list[str] = re.findall(rf"{fence}\n(.*?)```", RUNBOOK.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1, f"the runbook has exactly one `nginx {label}` block"
    return blocks[0]


def pointed_at(block: str, upstreams: Sequence[str], port: int) -> str:
    """`block` with its `server` lines replaced by `upstreams`, in order (their parameters
    kept), and its `listen 80;` by a 127.0.0.1 port."""
    servers = re.findall(r"(?m)^(\s*)server \S+((?: [^;\s]+)*);.*$", block)
    assert len(servers) == len(upstreams), (
        f"the block has {len(servers)} server lines, the test {len(upstreams)} nodes"
    )
    targets = iter(upstreams)
    block = re.sub(
        r"(?m)^(\s*)server \S+((?: [^;\s]+)*);.*$",
        lambda line: f"{line.group(1)}server {next(targets)}{line.group(2)};",
        block,
    )
    block, listens = re.subn(r"(?m)^(\s*)listen 80;$", rf"\1listen 127.0.0.1:{port};", block)
    assert listens == 1, "the block lost its listen line"
    return block


def binary() -> str:
    """The nginx binary; skips the test without it (fails it under `CI=true`)."""
    if not Path(NGINX).is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("nginx is not installed; CI=true, so this test must run")
        pytest.skip("nginx is not installed (`apt-get install nginx-light`)")
    return NGINX


@dataclass
class Nginx:
    """A running nginx in its own prefix directory; a context manager that stops it."""

    port: int
    prefix: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, http_block: str, prefix: Path, port: int) -> Nginx:
        """Run nginx in the foreground with `http_block` inside its `http { }` context, and
        return once it accepts connections on `port`."""
        prefix.mkdir(parents=True, exist_ok=True)
        prefix.chmod(0o777)  # the workers (nobody/www-data under root) write temp files here
        conf = prefix / "nginx.conf"
        conf.write_text(
            f"daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
            f"error_log {prefix}/error.log warn;\nevents {{ worker_connections 512; }}\n"
            "http {\n"
            f"  access_log {prefix}/access.log;\n"
            f"  client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n"
            + http_block
            + "}\n"
        )
        process = subprocess.Popen(
            [binary(), "-p", str(prefix), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        running = cls(port, prefix, process)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return running
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    running.stop()
                    raise AssertionError(f"nginx did not start: {running.errors()}") from None
                time.sleep(0.05)

    def errors(self) -> str:
        log = self.prefix / "error.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Nginx:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
