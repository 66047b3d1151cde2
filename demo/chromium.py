"""Debian Chromium as a plain process with the unpacked extension loaded.

No DevTools client is attached at launch; `--remote-debugging-port=0` only opens the endpoint,
whose port Chromium writes to `DevToolsActivePort` in the profile directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demo.cdp import CdpError, DevTools, evaluate

if TYPE_CHECKING:
    from collections.abc import Sequence

CHROMIUM = Path("/usr/lib/chromium/chromium")
LAUNCH_TIMEOUT_S = 20


def flags(profile: Path, extension: Path, *, headless: bool = True) -> list[str]:
    """A plain Chromium with only our unpacked extension, and nothing that phones home."""
    return [
        *(["--headless=new"] if headless else []),
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--load-extension={extension}",
        f"--disable-extensions-except={extension}",
        "--remote-debugging-port=0",
    ]


def continue_where_left_off(profile: Path) -> None:
    """Set the person's start-up choice "Continue where you left off" in a new profile.

    Chrome then restores the previous run's tabs, after a crash too. (`--restore-last-session`
    does not restore anything in new headless mode; this preference does.)
    """
    default = profile / "Default"
    default.mkdir(parents=True, exist_ok=True)
    (default / "Preferences").write_text(json.dumps({"session": {"restore_on_startup": 1}}))


def restore_after_crash(profile: Path) -> None:
    """Do what a person's click on "Restore" in Chrome's crash bubble does, before a relaunch.

    After a crash Chrome does not restore the previous tabs on its own, even with "Continue
    where you left off"; it offers them in a bubble that headless mode cannot show (measured on
    Chromium 156). Marking the last exit clean lets the relaunch restore the tabs, which is the
    state the extension must cope with. The browser was still killed: everything in memory and
    chrome.storage.session is gone, so the relaunch is a new browser epoch.
    """
    preferences = profile / "Default" / "Preferences"
    if not preferences.exists():
        return  # killed before Chrome first wrote its preferences: it restores by itself
    data = json.loads(preferences.read_text())
    if data.get("profile", {}).get("exit_type") == "Crashed":
        data["profile"]["exit_type"] = "Normal"
        preferences.write_text(json.dumps(data))


@dataclass
class Chromium:
    """One running browser process on `profile`."""

    profile: Path
    process: subprocess.Popen[bytes]
    devtools: DevTools
    log: Path
    killed: bool = field(default=False)

    def kill(self) -> None:
        """SIGKILL the browser and its helpers (one process group, started by us): a crash."""
        if self.killed:
            return
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def _spawn(
    profile: Path, extension: Path, urls: Sequence[str], extra: Sequence[str], headless: bool
) -> tuple[subprocess.Popen[bytes], Path]:
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "DevToolsActivePort").unlink(missing_ok=True)  # a killed browser leaves one
    log = profile.parent / f"{profile.name}-chromium-{time.monotonic_ns()}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(CHROMIUM), *flags(profile, extension, headless=headless), *extra, *urls],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so kill() reaches every helper
        )
    return process, log


def _devtools_port(profile: Path) -> int | None:
    port_file = profile / "DevToolsActivePort"
    text = port_file.read_text() if port_file.exists() else ""
    return int(text.splitlines()[0]) if text.strip() else None


async def launch(
    profile: Path,
    extension: Path,
    urls: Sequence[str] = (),
    extra: Sequence[str] = (),
    *,
    headless: bool = True,
) -> Chromium:
    """Start Chromium and wait until its DevTools endpoint answers.

    Args:
        profile: The user-data-dir; reuse it to restart the same profile.
        extension: The unpacked extension (extension/dist).
        urls: Tabs to open at start-up.
        extra: More command-line flags.
        headless: New headless mode (the default); False needs a display.
    """
    process, log = _spawn(profile, extension, urls, extra, headless)
    deadline = time.monotonic() + LAUNCH_TIMEOUT_S
    while (port := _devtools_port(profile)) is None:
        if process.poll() is not None:
            raise RuntimeError(f"Chromium exited with {process.returncode}; see {log}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise RuntimeError(f"Chromium did not open DevTools in {LAUNCH_TIMEOUT_S} s; see {log}")
        await asyncio.sleep(0.05)
    return Chromium(profile, process, DevTools(port), log)


async def extension_eval(
    browser: Chromium, extension_origin: str, expression: str, timeout_s: float = 15
) -> Any:
    """Evaluate in the extension's service worker (connecting, calling, disconnecting).

    Right after start-up Chromium may list the worker before its `chrome` global exists
    ("chrome is not defined"), so the first evaluations are retried.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        workers = [
            t
            for t in await browser.devtools.targets()
            if t.type == "service_worker" and t.url.startswith(extension_origin)
        ]
        try:
            if workers:
                return await evaluate(workers[0].ws_url, expression)
        except (CdpError, OSError) as exc:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the service worker did not evaluate: {exc}") from exc
        if time.monotonic() > deadline:
            raise RuntimeError(f"the extension's service worker is not running after {timeout_s} s")
        await asyncio.sleep(0.2)


async def enroll(
    browser: Chromium, extension_origin: str, record: dict[str, Any], timeout_s: float = 15
) -> None:
    """Store the enrollment the way the options page does (chrome.storage.local, one record)."""
    await extension_eval(
        browser,
        extension_origin,
        f"chrome.storage.local.set({{enrollment: {json.dumps(record)}}}).then(() => true)",
        timeout_s,
    )
