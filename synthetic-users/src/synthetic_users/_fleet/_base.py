"""The browser fleet: the isolated Chromium profiles persona sessions drive.

Each profile is one Understudy device of the synthetic-users tenant (personas never share a
profile: two leases on one device share cookies). A persona session `acquire`s a profile, creates
an Understudy unattended session pinned to `Profile.device_id`, and `release`s it when done; the
fleet wipes a released profile before anyone else gets it.

Exceptions (all `FleetError`):

    FleetError
    ├── FleetExhausted    every profile is busy and the fleet is at its size bound
    └── BrowserLaunchFailed   Chromium did not start or its extension never came online
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True)
class Profile:
    """A leased browser profile."""

    device_id: str  # the Understudy device this profile is enrolled as
    generation: int  # bumps each time the profile's browser is (re)launched


class Fleet(Protocol):
    async def start(self) -> None:
        """Get ready (enroll nothing yet; profiles are launched on demand)."""
        ...

    async def acquire(
        self,
        holder: str,
        *,
        timeout_s: float = 60.0,
        allowed_origins: Sequence[str] | None = None,
    ) -> Profile:
        """A wiped, online profile for `holder` (a persona session id); launches one if needed.

        `allowed_origins` are the origins the run targets (the session's `allowedOrigins`): a
        fleet may admit only these in the browser's own policy. None keeps the fleet's default.

        Raises:
            FleetExhausted: nothing became free within `timeout_s`.
            BrowserLaunchFailed: a new browser did not come online.
        """
        ...

    async def release(self, profile: Profile, *, broken: bool = False) -> None:
        """Give the profile back; it is wiped before reuse (and relaunched when `broken`)."""
        ...

    def alive(self, profile: Profile) -> bool:
        """False once the profile's browser process has died."""
        ...

    async def close(self) -> None:
        """Stop every browser the fleet started."""
        ...


class FleetError(Exception):
    """The fleet could not provide a browser."""


class FleetExhausted(FleetError):
    pass


class BrowserLaunchFailed(FleetError):
    pass
