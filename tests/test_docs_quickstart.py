"""Sections 2 to 4 of docs/guide/quickstart.md, run as written.

Every shell line of those sections runs in a fresh directory with the virtualenv's `bin` first
on PATH, `understudy serve` in the background; each Python block runs in a subprocess, and a
block's column-0 `# ` comments are its expected output. What differs from a person following the
page, and only this: the service listens on a free port instead of 8787 (the page's URL is
rewritten to it, since other services may hold 8787 on a shared machine), and the device the
reader sets up by hand is, for sections 2 and 3, a simulated device enrolled with the credential
the page's command printed, and for sections 2 to 4 Debian's Chromium with the built extension,
enrolled through its options page's Save. There, `https://example.com` is a local HTTPS login
site (Chromium's host resolver maps the name to it and accepts its self-signed certificate), so
section 4's code runs unchanged against a real page.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from tests.backend.conftest import free_port
from tests.support.simdevice import SimulatedDevice

if TYPE_CHECKING:
    from collections.abc import Iterator

    from demo.chromium import Chromium

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guide" / "quickstart.md"
DOC_URL = "http://127.0.0.1:8787"
BASH = shutil.which("bash") or "/bin/bash"
LOGIN_PASSWORD = "correct horse battery staple"  # noqa: S105 - a test value
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


class Device(Protocol):
    """The reader's browser: enrolled once `understudy devices enroll` printed a credential."""

    async def enroll(self, url: str, credential: str) -> None: ...

    async def stop(self) -> None: ...


class SimulatedBrowser:
    def __init__(self) -> None:
        self.device: SimulatedDevice | None = None

    async def enroll(self, url: str, credential: str) -> None:
        self.device = SimulatedDevice(url, credential)
        await self.device.connect()

    async def stop(self) -> None:
        if self.device is not None:
            await self.device.stop()


async def run_the_guide(
    tmp_path: Path, last: int, device: Device, python_check: Any = None
) -> dict[str, str]:
    """Run sections 2..`last` as written; returns what the commands printed (key, credential)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = _env(tmp_path, port)
    env["LOGIN_PASSWORD"] = LOGIN_PASSWORD
    text = _sections(PAGE.read_text(), 2, last)
    server: subprocess.Popen[str] | None = None
    printed: dict[str, str] = {}
    enrolled = False
    ran_python = 0

    def shell(line: str) -> str:
        done = subprocess.run(
            [BASH, "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
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
                            await device.enroll(url, printed["credential"])
                            enrolled = True
                        if line == "understudy status":
                            assert re.search(r"acme\s+laptop-1\s+online\s+2/2 free", out), out
                        if line.startswith("understudy secrets list"):
                            assert out.splitlines() == ["vault:login-password"]
            elif language == "python":
                script = tmp_path / f"block{ran_python}.py"
                script.write_text(block.replace(DOC_URL, url))
                out = await asyncio.to_thread(shell, f"{sys.executable} {script}")
                expected = [c.removeprefix("# ") for c in block.splitlines() if c.startswith("# ")]
                if expected:
                    assert out.splitlines() == expected
                elif python_check is not None:
                    python_check(block, out)
                ran_python += 1
    finally:
        await device.stop()
        if server is not None:
            server.terminate()
            server.communicate(timeout=30)
    assert set(printed) == {"api key", "credential"}
    assert enrolled
    assert ran_python == last - 2  # one Python block in section 3, one in section 4
    return printed


async def test_the_quick_start_sections_2_and_3_run_as_written(tmp_path: Path) -> None:
    await run_the_guide(tmp_path, 3, SimulatedBrowser())


class RealBrowser:
    """Debian's Chromium with the built extension, enrolled as the options page's Save does.

    `https://example.com` resolves to a local HTTPS login site for this browser only.
    """

    def __init__(self, tmp_path: Path, site_port: int) -> None:
        self.tmp_path = tmp_path
        self.site_port = site_port
        self.browser: Chromium | None = None

    async def enroll(self, url: str, credential: str) -> None:
        from demo.build import DIST, build_extension
        from demo.chromium import launch
        from tests.e2e._tls import resolver_flags
        from tests.e2e.conftest import eventually, panel_request

        await asyncio.to_thread(build_extension)
        self.browser = await launch(
            self.tmp_path / "profile", DIST, extra=resolver_flags(self.site_port, "example.com")
        )
        form = {
            "serviceOrigin": url,
            "deviceId": "laptop-1",
            "credential": credential,
            "enabled": True,
            "policyMode": "any",
            "policyOrigins": [],
        }
        saved = await panel_request(self.browser, {"type": "save_enrollment", "form": form})
        assert saved["ok"], saved
        browser = self.browser

        async def online() -> bool:
            answer = await panel_request(browser, {"type": "get_status"})
            return bool(answer["ok"] and answer["status"]["connection"] == "online")

        # The reader looks at the options page's status before running `understudy status`.
        await eventually(online, 30, "the options page showing the device online")

    async def stop(self) -> None:
        if self.browser is not None:
            self.browser.kill()


@pytest.mark.browser
async def test_the_quick_start_sections_2_to_4_run_as_written_in_chromium(tmp_path: Path) -> None:
    from tests.e2e._skip import require_chromium
    from tests.e2e._tls import LoginSite, self_signed

    require_chromium()
    site = LoginSite(*self_signed(tmp_path, "example.com"), password=LOGIN_PASSWORD).start()
    audit_lines: list[str] = []

    def section_4_ran(block: str, out: str) -> None:
        assert 'session.wait_for(text="Welcome")' in block  # the block this checks
        audit_lines.extend(out.splitlines())

    try:
        await run_the_guide(tmp_path, 4, RealBrowser(tmp_path, site.port), section_4_ran)
    finally:
        site.stop()
    # The page's session signed in once, with the user it typed and the vaulted password.
    assert site.logins == [("jane@example.com", True)]
    # `audit=print` printed the session's events; the password is in none of them.
    assert audit_lines and all(LOGIN_PASSWORD not in line for line in audit_lines)
    assert any("fill_secret" in line for line in audit_lines)
