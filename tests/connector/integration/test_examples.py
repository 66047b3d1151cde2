"""The guide's examples, run as an integrator runs them, configured by environment.

The secret is vaulted with the operator CLI (`understudy secrets put`, value on stdin), as the
quick start says. `scripted_login.py` runs as its own process; `mcp_agent.py` runs its `main()`
here and starts the real `understudy-mcp` process over stdio. Both talk HTTP to the running
backend and its simulated device.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from understudy.generated import models as wire

from .conftest import session_frames

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType

    import pytest

    from tests.support.simdevice import SimulatedDevice

    from .conftest import Live

EXAMPLES = Path(__file__).parents[3] / "docs" / "guide" / "examples"
BIN = Path(sys.executable).parent
PASSWORD = "correct horse battery staple"  # noqa: S105 - the test's own vaulted value
RUN_WITHIN = 60.0


async def run(
    argv: list[str], env: Mapping[str, str], stdin: str | None = None
) -> tuple[int, str, str]:
    """Run a process without blocking the loop that serves the backend."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        env={"PATH": os.environ.get("PATH", ""), **env},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(
        process.communicate(None if stdin is None else stdin.encode()), RUN_WITHIN
    )
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def grants(device: SimulatedDevice) -> list[wire.SessionServerWriteGrant]:
    return [f for f in session_frames(device) if isinstance(f, wire.SessionServerWriteGrant)]


async def test_scripted_login_fills_the_form_with_a_vaulted_secret(live: Live) -> None:
    device = await live.device()
    code, out, err = await run(
        [str(BIN / "understudy"), "secrets", "put", "--tenant", "acme", "--name", "login-pw"],
        {"UNDERSTUDY_DATA_DIR": str(live.backend.settings.data_dir)},
        stdin=PASSWORD,
    )
    assert code == 0, err
    environ = {
        "UNDERSTUDY_URL": live.url,
        "UNDERSTUDY_API_KEY": live.api_key,
        "LOGIN_URL": "https://example.com/login",
        "LOGIN_USERNAME": "jane@example.com",
        "LOGIN_SECRET_REF": "vault:login-pw",
        "LOGIN_SUCCESS_TEXT": "Example",
    }
    code, out, err = await run([sys.executable, str(EXAMPLES / "scripted_login.py")], environ)
    assert code == 0, err
    assert out.strip() == "logged in: Example (https://example.com/)"
    # The approval hook saw each write's dry-run preview, then the write ran once.
    for line in (
        "approve navigate on https://example.com/login: True",
        "approve fill on textbox 'Username': True",
        "approve fill_secret on textbox 'Password': True",
        "approve click on button 'Sign in': True",
    ):
        assert line in err
    real = [
        (g.command.name, g.command.to_wire().get("ref")) for g in grants(device) if not g.dry_run
    ]
    assert real == [
        ("navigate", None),
        ("fill", "g1e2"),
        ("fill_secret", "g1e3"),
        ("click", "g1e1"),
    ]
    assert sorted(device.executions.values()) == [1, 1, 1, 1]
    # The plaintext reached the tab, and nothing else: not the example's output, not its audit.
    assert device.secrets_seen == [PASSWORD]
    assert PASSWORD not in out + err
    assert "jane@example.com" not in err, "the audit sink is content-free"
    assert '"stage": "outcome"' in err
    assert '"http_status": 503' not in err, "a 201 means the tab is ready for the first command"
    assert not device.leases, "the session was deleted and its tab closed"


async def test_mcp_agent_drives_understudy_mcp_over_stdio(
    live: Live, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    device = await live.device()
    environ = {
        "UNDERSTUDY_URL": live.url,
        "UNDERSTUDY_API_KEY": live.api_key,
        "UNDERSTUDY_ALLOWED_ORIGINS": "https://example.com",
        "UNDERSTUDY_PROFILE_KEY": "example-agent",
        "START_URL": "https://example.com/",
    }
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    # The agent's side runs here (its own event loop, in a worker thread, so this loop keeps
    # serving the backend); the example itself starts `understudy-mcp` as a real subprocess.
    await asyncio.wait_for(asyncio.to_thread(load("mcp_agent").main), RUN_WITHIN)
    out, err = capfd.readouterr()
    assert 'button "Sign in" [g1e1]' in out
    assert "writes: browser_navigate, browser_go_back" in err
    (navigate,) = [g for g in grants(device) if not g.dry_run]
    assert navigate.command.to_wire() == {"name": "navigate", "url": "https://example.com/"}
    assert list(device.executions.values()) == [1]
    # understudy-mcp deletes its session when the agent disconnects: the tab closes.
    await device.wait_for(lambda: not device.leases, within=10)


def load(name: str) -> ModuleType:
    """An example as a module, without running its `__main__` block."""
    spec = importlib.util.spec_from_file_location(f"guide_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
