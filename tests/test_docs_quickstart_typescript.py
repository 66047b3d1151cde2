"""docs/guide/quickstart-typescript.md, run as written.

Section 1's build runs from the clone's root; section 2's shell lines run in a fresh directory
with the virtualenv's `bin` first on PATH (`understudy serve` in the background), and a simulated
device, enrolled with the credential the page printed, stands in for the reader's browser.
Section 3's TypeScript is compiled with the workspace's `tsc` (strict) against the built
`@understudy/connector` and run with `node`: its output must be the `// ` lines that end the
block. Every other TypeScript block on the page (section 4, which needs a model) is type-checked.
The service listens on a free port instead of 8787 (the page's URL is rewritten to it).
"""

from __future__ import annotations

import asyncio
import json
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
PAGE = ROOT / "docs" / "guide" / "quickstart-typescript.md"
CONNECTOR = ROOT / "packages" / "connector"
TSC = CONNECTOR / "node_modules" / ".bin" / "tsc"
DOC_URL = "http://127.0.0.1:8787"
BASH = shutil.which("bash") or "/bin/bash"
NODE = shutil.which("node")
PNPM = shutil.which("pnpm")
BUILD = "pnpm --filter @understudy/protocol --filter @understudy/connector build"
TSCONFIG = {
    "compilerOptions": {
        "target": "ES2022",
        "module": "NodeNext",
        "moduleResolution": "NodeNext",
        "lib": ["ES2022", "ESNext.Disposable", "DOM"],
        "types": ["node"],
        "strict": True,
        "skipLibCheck": True,
        "outDir": "out",
    }
}
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        NODE is None or PNPM is None or not TSC.exists(), reason="run scripts/bootstrap first"
    ),
]


def _section(text: str, number: int) -> str:
    start = text.index(f"## {number}.")
    end = text.find(f"## {number + 1}.", start)
    return text[start : end if end != -1 else len(text)]


def _blocks(text: str) -> Iterator[tuple[str, str]]:
    for match in re.finditer(r"```(\w+)\n(.*?)```", text, re.DOTALL):
        yield match[1], match[2]


def _expected(block: str) -> list[str]:
    """The `// ` lines that end a block: what running it prints."""
    lines = block.rstrip("\n").splitlines()
    tail: list[str] = []
    while lines and lines[-1].startswith("// "):
        tail.insert(0, lines.pop().removeprefix("// "))
    return tail


def _project(where: Path) -> None:
    """A consumer project that depends on the built packages by path, as section 1 says."""
    modules = where / "node_modules"
    (modules / "@understudy").mkdir(parents=True)
    (modules / "@types").mkdir()
    (modules / "@understudy" / "connector").symlink_to(CONNECTOR)
    (modules / "ai").symlink_to((CONNECTOR / "node_modules" / "ai").resolve())
    (modules / "@types" / "node").symlink_to(
        (CONNECTOR / "node_modules" / "@types" / "node").resolve()
    )
    (where / "package.json").write_text('{"type": "module", "private": true}\n')
    (where / "tsconfig.json").write_text(json.dumps(TSCONFIG))


def _env(port: int) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("UNDERSTUDY_") and k not in ("UNATTENDED_ENABLED_TENANTS",)
    }
    bin_dir = str(Path(sys.executable).parent)
    return env | {"PATH": f"{bin_dir}:{env.get('PATH', '')}", "UNDERSTUDY_PORT": str(port)}


async def test_the_typescript_quick_start_runs_as_written(tmp_path: Path) -> None:
    text = PAGE.read_text()
    assert BUILD in _section(text, 1)
    built = await asyncio.to_thread(
        subprocess.run, BUILD.split(), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stdout + built.stderr

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = _env(port)
    work = tmp_path / "work"
    work.mkdir()
    project = tmp_path / "project"
    _project(project)
    server: subprocess.Popen[str] | None = None
    device: SimulatedDevice | None = None
    printed: dict[str, str] = {}
    ran = checked = 0

    def run(command: list[str] | str, cwd: Path) -> str:
        done = subprocess.run(
            command if isinstance(command, list) else [BASH, "-c", command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    try:
        for language, block in _blocks(_section(text, 2)):
            assert language == "bash"
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
                        cwd=work,
                        env=env,
                        text=True,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                    )
                    assert server.stdout is not None
                    started = await asyncio.to_thread(server.stdout.readline)
                    assert started.startswith(f"understudy: serving on {url}"), started
                else:
                    out = await asyncio.to_thread(run, line, work)
                    for label, value in re.findall(r"^(api key|credential):\s+(\S+)$", out, re.M):
                        printed[label] = value
                    if line.startswith("understudy devices enroll"):
                        device = SimulatedDevice(url, printed["credential"])
                        await device.connect()
                    if line == "understudy status":
                        assert re.search(r"acme\s+laptop-1\s+online\s+2/2 free", out), out
        for number in (3, 4):
            for language, block in _blocks(_section(text, number)):
                if language != "typescript":
                    continue
                source = project / f"block{number}.ts"
                source.write_text(block.replace(DOC_URL, url))
                config = json.loads((project / "tsconfig.json").read_text())
                config["files"] = [source.name]
                (project / "tsconfig.json").write_text(json.dumps(config))
                await asyncio.to_thread(run, [str(TSC), "-p", "."], project)
                checked += 1
                if number == 3:
                    node = NODE or "node"
                    out = await asyncio.to_thread(run, [node, f"out/{source.stem}.js"], project)
                    assert out.splitlines() == _expected(block)
                    ran += 1
    finally:
        if device is not None:
            await device.stop()
        if server is not None:
            server.terminate()
            server.communicate(timeout=30)
    assert set(printed) == {"api key", "credential"}
    assert (ran, checked) == (1, 2)
