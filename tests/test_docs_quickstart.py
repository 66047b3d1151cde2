"""Sections 2 and 3 of docs/guide/quickstart.md, run as written.

Every shell line of those sections runs in a fresh directory with the virtualenv's `bin` first
on PATH, `understudy serve` in the background; the Python block runs in a subprocess. Two things
differ from a person following the page, and only these: the service listens on a free port
instead of 8787 (the page's URL is rewritten to it, since other services may hold 8787 on a
shared machine), and a simulated device, enrolled with the credential the page's command
printed, stands in for the browser the reader sets up by hand.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.backend.conftest import free_port
from tests.support.simdevice import SimulatedDevice

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guide" / "quickstart.md"
DOC_URL = "http://127.0.0.1:8787"
BASH = shutil.which("bash") or "/bin/bash"
pytestmark = pytest.mark.slow


def _sections(text: str, first: int, last: int) -> str:
    start = text.index(f"## {first}.")
    return text[start : text.index(f"## {last + 1}.", start)]


def _blocks(text: str) -> Iterator[tuple[str, str]]:
    for match in re.finditer(r"```(\w+)\n(.*?)```", text, re.DOTALL):
        yield match[1], match[2]


def _env(tmp_path: Path, port: int) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("UNDERSTUDY_") and k not in ("UNATTENDED_ENABLED_TENANTS",)
    }
    bin_dir = str(Path(sys.executable).parent)
    return env | {"PATH": f"{bin_dir}:{env.get('PATH', '')}", "UNDERSTUDY_PORT": str(port)}


async def test_the_quick_start_sections_2_and_3_run_as_written(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = _env(tmp_path, port)
    env["LOGIN_PASSWORD"] = "correct horse battery staple"  # noqa: S105 - a test value
    text = _sections(PAGE.read_text(), 2, 3)
    server: subprocess.Popen[str] | None = None
    device: SimulatedDevice | None = None
    printed: dict[str, str] = {}
    ran_python = 0

    def shell(line: str) -> str:
        done = subprocess.run(
            [BASH, "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{line}\n{done.stderr}"
        return done.stdout

    try:
        for language, block in _blocks(text):
            if language == "bash":
                for raw in block.splitlines():
                    line = raw.split("  #")[0].strip()
                    if not line or line.startswith("#"):
                        continue
                    if line.startswith("export "):
                        name, _, value = line.removeprefix("export ").partition("=")
                        if value.startswith("usk_"):  # "the api key just printed"
                            value = printed["api key"]
                        env[name] = value.strip("'")
                    elif line == "understudy serve":
                        server = subprocess.Popen(  # noqa: ASYNC220 - returns at once
                            [str(Path(sys.executable).parent / "understudy"), "serve"],
                            cwd=tmp_path,
                            env=env,
                            text=True,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                        )
                        assert server.stdout is not None
                        started = await asyncio.to_thread(server.stdout.readline)
                        assert started.startswith(f"understudy: serving on {url}"), started
                    else:
                        out = await asyncio.to_thread(shell, line)
                        for label, value in re.findall(
                            r"^(api key|credential):\s+(\S+)$", out, re.M
                        ):
                            printed[label] = value
                        if line.startswith("understudy devices enroll"):
                            # The reader's browser, enrolled with what the page printed.
                            device = SimulatedDevice(url, printed["credential"])
                            await device.connect()
                        if line == "understudy status":
                            assert re.search(r"acme\s+laptop-1\s+online\s+2/2 free", out), out
                        if line.startswith("understudy secrets list"):
                            assert out.splitlines() == ["vault:login-password"]
            elif language == "python":
                script = tmp_path / "block.py"
                script.write_text(block.replace(DOC_URL, url))
                out = await asyncio.to_thread(shell, f"{sys.executable} {script}")
                expected = [c.removeprefix("# ") for c in block.splitlines() if c.startswith("# ")]
                assert out.splitlines() == expected
                ran_python += 1
    finally:
        if device is not None:
            await device.stop()
        if server is not None:
            server.terminate()
            server.communicate(timeout=30)
    assert set(printed) == {"api key", "credential"}
    assert ran_python == 1
    assert device is not None
