"""Local Chromium: Debian Chromium as a plain process with the unpacked Understudy extension.

```python
from understudy_connector import local_chromium

browser = await local_chromium.launch(profile_dir, extension_dir)
try:
    await local_chromium.enroll(
        browser,
        local_chromium.extension_origin(extension_dir),
        {"serviceOrigin": url, "deviceId": "laptop-1", "credential": credential,
         "enabled": True, "localOriginPolicy": {"mode": "any"}},
    )
finally:
    browser.kill()
```

This is how a machine that runs its own browsers (the demo, the end-to-end tests, the benchmarks,
the Synthetic Users fleet) turns a profile directory into an enrolled Understudy device, without a
person at the options page. It needs `websockets` (a dependency of the connector) and a Chromium
binary (`CHROMIUM`, Debian's `/usr/lib/chromium/chromium`); it never downloads one.

No DevTools client is attached at launch; `--remote-debugging-port=0` only opens the endpoint,
whose port Chromium writes to `DevToolsActivePort` in the profile directory. Each browser runs in
a process group of its own, so `Chromium.kill()` reaches every helper process too.

Errors: `CdpError` (a DevTools call failed) and `RuntimeError` (Chromium did not start, or its
extension's service worker never ran), both with the log file to read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from understudy_connector._cdp import CdpError, DevTools, Target, call, evaluate

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CHROMIUM",
    "LAUNCH_TIMEOUT_S",
    "CdpError",
    "Chromium",
    "DevTools",
    "Target",
    "call",
    "continue_where_left_off",
    "devtools_port",
    "enroll",
    "evaluate",
    "extension_eval",
    "extension_id",
    "extension_origin",
    "flags",
    "launch",
    "restore_after_crash",
]

CHROMIUM = Path("/usr/lib/chromium/chromium")
LAUNCH_TIMEOUT_S = 20


def extension_id(extension: Path) -> str:
    """The id Chromium gives the unpacked extension: derived from the `key` of its manifest.

    The first 32 hex digits of SHA-256 over the DER public key, each digit 0-f spelled a-p.

    Raises:
        ValueError: the manifest has no `key`, so the id would depend on the directory path.
    """
    manifest = json.loads((extension / "manifest.json").read_text())
    key = manifest.get("key")
    if not isinstance(key, str):
        raise ValueError(f"{extension}/manifest.json has no `key`; build the extension first")
    digest = hashlib.sha256(base64.b64decode(key)).hexdigest()[:32]
    return "".join(chr(ord("a") + int(digit, 16)) for digit in digest)


def extension_origin(extension: Path) -> str:
    """`chrome-extension://<id>` of the unpacked extension (see `extension_id`)."""
    return f"chrome-extension://{extension_id(extension)}"


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
    """One running browser process on `profile`.

    Attributes:
        profile: Its user-data-dir.
        process: The browser process (the leader of its own process group).
        devtools: Its DevTools HTTP endpoint.
        log: The file its stdout and stderr go to.
        killed: Whether `kill()` ran.
    """

    profile: Path
    process: subprocess.Popen[bytes]
    devtools: DevTools
    log: Path
    killed: bool = field(default=False)

    @property
    def alive(self) -> bool:
        """Whether the browser process is still running (False once it died or was killed)."""
        return self.process.poll() is None

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
        process = subprocess.Popen(  # noqa: S603 - a fixed binary, our own flags and URLs
            [str(CHROMIUM), *flags(profile, extension, headless=headless), *extra, *urls],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so kill() reaches every helper
        )
    return process, log


def devtools_port(profile: Path) -> int | None:
    """The DevTools port a browser on `profile` wrote, or None while it has not yet."""
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
    try:
        while (port := devtools_port(profile)) is None:
            if process.poll() is not None:
                raise RuntimeError(f"Chromium exited with {process.returncode}; see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"Chromium did not open DevTools in {LAUNCH_TIMEOUT_S} s; see {log}"
                )
            await asyncio.sleep(0.05)
    except BaseException:
        # Timed out, or cancelled (a signal while starting): the caller never gets a handle to
        # kill, so the browser must not outlive this call.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
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
