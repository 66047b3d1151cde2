"""`LocalChromiumFleet`: local Debian Chromium processes, each an enrolled Understudy device.

The embedded default of the fleet (see `_base` for the contract). Every profile is one device of
the synthetic-users tenant, enrolled through Understudy's operator API (never its database), with
a user-data-dir of its own under `root/profiles/<device_id>/`.

Lifecycle of one profile slot (a device the fleet holds the credential of)::

    IDLE --acquire--> LAUNCHING --online--> LEASED --release--> IDLE
                          |                                      ^
                          `--launch failed (BrowserLaunchFailed)-'

Wiping is by construction: a browser lives exactly as long as one lease. `release` kills the
browser (its whole process group) and deletes its user-data-dir; the next `acquire` of that
device launches a fresh Chromium on an empty directory, so nothing (cookies, storage, history,
service workers) crosses from one persona session to the next. `broken=True` therefore needs no
separate path: every acquire relaunches. No browser is kept warm: a launch takes one to two
seconds against minutes of persona session, and a warm browser could not know the origins of the
run it will serve (its enrollment's local origin policy is written at launch).

The fleet grows on demand up to `max_browsers` browsers running at once. Devices are reused
before new ones are enrolled, and survive restarts: `root/fleet.json` (mode 0600) keeps each
device's id and credential, plus the process group of every browser it started, so a service that
crashed and restarts kills the browsers it left behind before reusing their devices. Device ids
are `<device_prefix><n>`; an id Understudy knows but the state file lost is taken back by
rotating its credential, and a revoked id is skipped. One fleet owns a tenant's ids under its
prefix: two fleets on one tenant need distinct `device_prefix`es (and roots).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from synthetic_users._fleet._base import BrowserLaunchFailed, FleetError, FleetExhausted, Profile
from understudy_connector import DeviceExists, UnderstudyError, local_chromium

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from understudy_connector import AsyncOperatorClient
    from understudy_connector.generated.models import OperatorDevice

log = logging.getLogger(__name__)

STATE_FILE: Final = "fleet.json"
STATE_VERSION: Final = 1
DEFAULT_TENANT: Final = "synthetic-users"
DEFAULT_DEVICE_PREFIX: Final = "su-browser-"
ONLINE_TIMEOUT_S: Final = 30.0
"""How long a launched browser's extension may take to connect to Understudy."""
OFFLINE_TIMEOUT_S: Final = 10.0
"""How long a killed browser's device may still read as online (its socket closing)."""
POLL_S: Final = 0.1
_MAX_ENROLL_ATTEMPTS: Final = 1000  # revoked ids skipped before giving up


class SlotState(Enum):
    """Where one device of the fleet is in its lifecycle (see the module docstring)."""

    IDLE = "idle"
    LAUNCHING = "launching"
    LEASED = "leased"


_MOVES: Final = {
    SlotState.IDLE: {SlotState.LAUNCHING},
    SlotState.LAUNCHING: {SlotState.LEASED, SlotState.IDLE},
    SlotState.LEASED: {SlotState.IDLE},
}


@dataclass
class _Slot:
    device_id: str
    credential: str
    state: SlotState = SlotState.IDLE
    holder: str | None = None
    generation: int = 0
    browser: local_chromium.Chromium | None = field(default=None, repr=False)

    def move(self, to: SlotState) -> None:
        if to not in _MOVES[self.state]:
            raise FleetError(
                f"profile {self.device_id}: cannot go from {self.state.value} to {to.value}"
            )
        self.state = to


class LocalChromiumFleet:
    """Local Chromium profiles enrolled as Understudy devices; implements the `Fleet` protocol.

    Args:
        understudy_url: The Understudy service origin the extension connects to.
        operator: An operator-API client of that service (enrolls devices, sets the tenant
            unattended); the caller owns it and closes it after `close()`.
        tenant: The Understudy tenant the devices belong to.
        root: The fleet's directory: `fleet.json` and `profiles/<device_id>/`.
        extension_dir: The built, unpacked extension (`extension/dist`).
        max_browsers: How many browsers may run at once; `acquire` waits beyond it.
        headless: Run Chromium in new headless mode (False needs a display).
        local_origin_policy: The extension's local origin policy when `acquire` names no
            origins (`{"mode": "any"}`: each session's `allowedOrigins` still bounds it).
        device_prefix: Device ids are this plus a number.
        online_timeout_s: How long a new browser may take to come online.
    """

    def __init__(
        self,
        understudy_url: str,
        operator: AsyncOperatorClient,
        *,
        root: Path,
        extension_dir: Path,
        max_browsers: int,
        tenant: str = DEFAULT_TENANT,
        headless: bool = True,
        local_origin_policy: Mapping[str, Any] | None = None,
        device_prefix: str = DEFAULT_DEVICE_PREFIX,
        online_timeout_s: float = ONLINE_TIMEOUT_S,
    ) -> None:
        if max_browsers < 1:
            raise ValueError(f"max_browsers must be at least 1, got {max_browsers}")
        self._url = understudy_url.rstrip("/")
        self._operator = operator
        self._tenant = tenant
        self._root = root
        self._extension = extension_dir
        self._max = max_browsers
        self._headless = headless
        self._policy = dict(local_origin_policy or {"mode": "any"})
        self._prefix = device_prefix
        self._online_timeout = online_timeout_s
        self._slots: dict[str, _Slot] = {}
        self._generations = itertools.count(1)
        self._changed = asyncio.Condition()
        self._started = False
        self._closed = False

    @property
    def tenant(self) -> str:
        """The Understudy tenant of the fleet's devices."""
        return self._tenant

    @property
    def device_ids(self) -> list[str]:
        """Every device the fleet holds a credential for, busy or not."""
        return sorted(self._slots)

    @property
    def _profiles(self) -> Path:
        return self._root / "profiles"

    # -- Fleet -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the enrolled devices, kill browsers a previous run left, enable unattended.

        Raises:
            FleetError: the extension is not built, or Understudy refused the operator calls.
        """
        if self._started:
            return
        try:
            self._origin = local_chromium.extension_origin(self._extension)
        except (OSError, ValueError) as exc:
            raise FleetError(f"the extension at {self._extension} is not usable: {exc}") from exc
        self._root.mkdir(parents=True, exist_ok=True)
        state = self._load()
        _kill_leftovers(state.get("browsers", {}), self._profiles)
        shutil.rmtree(self._profiles, ignore_errors=True)
        self._profiles.mkdir(parents=True)
        try:
            await self._operator.set_unattended(self._tenant, True)
            known = {
                d.device_id: d for d in (await self._operator.list_devices(self._tenant)).devices
            }
        except UnderstudyError as exc:
            raise FleetError(f"Understudy refused the fleet's operator calls: {exc}") from exc
        for device_id, credential in state.get("devices", {}).items():
            device = known.get(device_id)
            if device is not None and device.state != "revoked":
                self._slots[device_id] = _Slot(device_id, credential)
        self._save()
        self._started = True

    async def acquire(
        self,
        holder: str,
        *,
        timeout_s: float = 60.0,
        allowed_origins: Sequence[str] | None = None,
    ) -> Profile:
        """A fresh, online profile for `holder`; see `Fleet.acquire`.

        Args:
            holder: The persona session the profile is for.
            timeout_s: How long to wait for a free browser when `max_browsers` run already.
            allowed_origins: The origins the run targets; the extension's local origin policy
                becomes an allowlist of exactly these (else the fleet's default policy).

        Raises:
            FleetExhausted: no browser became free within `timeout_s`.
            BrowserLaunchFailed: Chromium did not start or did not come online.
        """
        self._check_running()
        deadline = time.monotonic() + timeout_s
        async with self._changed:
            while (slot := await self._claim(holder)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise FleetExhausted(
                        f"all {self._max} browsers of the fleet are busy and none was released "
                        f"within {timeout_s:g} s; raise the fleet's size bound or run fewer "
                        "personas at once"
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), left)
        try:
            await self._launch(slot, allowed_origins)
            if self._closed:  # close() ran during the launch: this browser must not outlive it
                raise FleetError("the fleet was closed while this profile launched")
        except BaseException:
            await self._wipe(slot)
            async with self._changed:
                slot.holder = None
                slot.move(SlotState.IDLE)
                self._changed.notify_all()
            raise
        slot.move(SlotState.LEASED)
        return Profile(device_id=slot.device_id, generation=slot.generation)

    async def release(self, profile: Profile, *, broken: bool = False) -> None:
        """Kill the profile's browser and delete its user-data-dir; the device becomes free.

        `broken` changes nothing here: every acquire launches a fresh browser anyway.
        """
        slot = self._slots.get(profile.device_id)
        if (
            slot is None
            or slot.state is not SlotState.LEASED
            or slot.generation != profile.generation
        ):
            return  # released already (or a stale profile): releasing twice is harmless
        if broken:
            log.info("profile %s released as broken", profile.device_id)
        await self._wipe(slot)
        async with self._changed:
            slot.holder = None
            slot.move(SlotState.IDLE)
            self._changed.notify_all()

    def alive(self, profile: Profile) -> bool:
        """Whether the profile's browser (this generation of it) is still running."""
        slot = self._slots.get(profile.device_id)
        if slot is None or slot.generation != profile.generation or slot.browser is None:
            return False
        return slot.browser.alive

    async def close(self) -> None:
        """Kill every browser the fleet started and delete their profiles."""
        self._closed = True
        for slot in self._slots.values():
            _kill(slot)
        shutil.rmtree(self._profiles, ignore_errors=True)
        if self._started:
            self._save()
        async with self._changed:
            self._changed.notify_all()

    # -- slots -------------------------------------------------------------------------------------

    def _check_running(self) -> None:
        if not self._started:
            raise FleetError("start() the fleet before acquiring profiles")
        if self._closed:
            raise FleetError("the fleet is closed")

    async def _claim(self, holder: str) -> _Slot | None:
        """An idle slot (a new device when below the bound and none is idle), now LAUNCHING."""
        self._check_running()
        busy = sum(1 for s in self._slots.values() if s.state is not SlotState.IDLE)
        if busy >= self._max:
            return None
        slot = next(
            (s for s in sorted(self._slots.values(), key=_order) if s.state is SlotState.IDLE), None
        )
        if slot is None:
            slot = await self._enroll()
        slot.move(SlotState.LAUNCHING)
        slot.holder = holder
        slot.generation = next(self._generations)
        return slot

    async def _enroll(self) -> _Slot:
        """Enroll the next free device id (rotating one Understudy knows and we lost)."""
        number = 1
        for _ in range(_MAX_ENROLL_ATTEMPTS):
            while f"{self._prefix}{number}" in self._slots:
                number += 1
            device_id = f"{self._prefix}{number}"
            try:
                enrolled = await self._operator.enroll_device(self._tenant, device_id, rotate=True)
            except DeviceExists:  # revoked: an id is never reused
                number += 1
                continue
            except UnderstudyError as exc:
                raise BrowserLaunchFailed(f"could not enroll device {device_id}: {exc}") from exc
            slot = self._slots[device_id] = _Slot(device_id, enrolled.credential)
            self._save()
            return slot
        raise BrowserLaunchFailed(f"no free device id under {self._prefix!r}")

    async def _launch(self, slot: _Slot, allowed_origins: Sequence[str] | None) -> None:
        profile_dir = self._profiles / slot.device_id
        shutil.rmtree(profile_dir, ignore_errors=True)
        # A browser killed a moment ago may still read as online: wait for its socket to close,
        # so "online" below means this browser.
        await self._wait_state(slot.device_id, online=False, timeout_s=OFFLINE_TIMEOUT_S)
        try:
            slot.browser = await local_chromium.launch(
                profile_dir, self._extension, headless=self._headless
            )
        except RuntimeError as exc:
            raise BrowserLaunchFailed(
                f"Chromium for {slot.device_id} did not start: {exc}"
            ) from exc
        self._save()
        policy = (
            {"mode": "allowlist", "origins": list(allowed_origins)}
            if allowed_origins
            else self._policy
        )
        record = {
            "serviceOrigin": self._url,
            "deviceId": slot.device_id,
            "credential": slot.credential,
            "enabled": True,
            "localOriginPolicy": policy,
        }
        try:
            await local_chromium.enroll(slot.browser, self._origin, record)
        except (RuntimeError, OSError) as exc:
            raise BrowserLaunchFailed(
                f"the extension of {slot.device_id} did not take its enrollment: {exc}; "
                f"see {slot.browser.log}"
            ) from exc
        if not await self._wait_state(slot.device_id, online=True, timeout_s=self._online_timeout):
            raise BrowserLaunchFailed(
                f"{slot.device_id} did not come online within {self._online_timeout:g} s; see "
                f"{slot.browser.log}"
            )

    async def _wait_state(self, device_id: str, *, online: bool, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            device = await self._device(device_id)
            if device is not None and device.online == online:
                return True
            if device is None and not online:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(POLL_S)

    async def _device(self, device_id: str) -> OperatorDevice | None:
        try:
            listing = await self._operator.list_devices(self._tenant)
        except UnderstudyError as exc:
            raise BrowserLaunchFailed(f"could not read the fleet's devices: {exc}") from exc
        return next((d for d in listing.devices if d.device_id == device_id), None)

    async def _wipe(self, slot: _Slot) -> None:
        _kill(slot)
        await asyncio.to_thread(shutil.rmtree, self._profiles / slot.device_id, ignore_errors=True)
        self._save()

    # -- state file --------------------------------------------------------------------------------

    def _load(self) -> dict[str, Any]:
        path = self._root / STATE_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise FleetError(f"{path} is unreadable ({exc}); move it away to start afresh") from exc
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise FleetError(f"{path} is not a fleet state file of version {STATE_VERSION}")
        if data.get("tenant") != self._tenant:
            raise FleetError(
                f"{path} belongs to tenant {data.get('tenant')!r}, not {self._tenant!r}"
            )
        return data

    def _save(self) -> None:
        """Write the state file atomically, readable by this user only (it holds credentials)."""
        data = {
            "version": STATE_VERSION,
            "tenant": self._tenant,
            "devices": {
                s.device_id: s.credential for s in sorted(self._slots.values(), key=_order)
            },
            "browsers": {
                s.device_id: s.browser.process.pid
                for s in self._slots.values()
                if s.browser is not None and not s.browser.killed
            },
        }
        path = self._root / STATE_FILE
        temporary = path.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2)
        os.chmod(temporary, 0o600)  # O_CREAT's mode is ignored for a file that existed
        os.replace(temporary, path)


def _order(slot: _Slot) -> tuple[int, str]:
    digits = slot.device_id.rsplit("-", 1)[-1]
    return (int(digits) if digits.isdigit() else 0, slot.device_id)


def _kill(slot: _Slot) -> None:
    if slot.browser is not None:
        slot.browser.kill()
        slot.browser = None


def _kill_leftovers(browsers: Mapping[str, object], profiles: Path) -> None:
    """Kill the process groups of browsers a previous run of the fleet started and left running.

    Only a process whose command line names our profile directory is killed: after a reboot the
    pid may belong to anything.
    """
    for device_id, pid in browsers.items():
        if not isinstance(pid, int):
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if f"--user-data-dir={profiles / device_id}".encode() not in cmdline:
            continue
        log.warning("killing browser %s (pid %d) left by a previous run", device_id, pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        _wait_gone(pid)


LEFTOVER_EXIT_S = 10.0  # how long a killed leftover browser may take to exit (loaded machine)


def _wait_gone(pid: int) -> None:
    """Until `pid` has exited (or is a zombie): a relaunch on its profile needs it gone.

    SIGKILL is delivered asynchronously; measured under load, the process was still there right
    after `killpg` returned.
    """
    deadline = time.monotonic() + LEFTOVER_EXIT_S
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return  # gone
        if state in ("Z", "X"):
            return  # exited; only its parent's wait is left
        time.sleep(0.01)
    log.warning("browser pid %d was still running %g s after SIGKILL", pid, LEFTOVER_EXIT_S)
