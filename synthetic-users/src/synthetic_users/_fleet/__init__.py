"""The browser fleet: isolated Chromium profiles, each an enrolled Understudy device."""

from synthetic_users._fleet._base import (
    BrowserLaunchFailed,
    Fleet,
    FleetError,
    FleetExhausted,
    Profile,
)
from synthetic_users._fleet._local import LocalChromiumFleet

__all__ = [
    "BrowserLaunchFailed",
    "Fleet",
    "FleetError",
    "FleetExhausted",
    "LocalChromiumFleet",
    "Profile",
]
