"""Allocation: which enrolled device a new unattended session goes to.

The least-loaded compatible online device whose local origin policy admits the session's
origins, with no live session on it sharing an origin or the profile-state key; ties go to the
device assigned longest ago. Every refusal says what the caller can do about it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from understudy._policy import DEVICE_CAPACITY
from understudy._problems import ProblemError

if TYPE_CHECKING:
    from collections.abc import Callable

    from understudy._store.credentials import Device
    from understudy._store.sessions import SessionRow

UNATTENDED_CAPABILITIES: Final = frozenset({"safe_write_v2", "unattended_v1"})


def allocate(
    devices: list[Device],
    leases_of: Callable[[str], list[SessionRow]],
    *,
    device_id: str | None,
    origins: list[str],
    profile_hash: str,
    refused: Callable[[str], None],
) -> Device:
    """The device a new unattended session goes to, or the refusal a caller can act on.

    Args:
        devices: the tenant's enrolled devices.
        leases_of: the sessions holding capacity on a device.
        device_id: the device the caller asked for, if any.
        origins: the session's allowed origins.
        profile_hash: the session's profile-state hash.
        refused: reports the reason of a refusal (`allocation.refused`).

    Raises:
        ProblemError: 404 device_not_found, 409 origin_conflict / profile_conflict, 503
            no_device_available, 429 capacity_exhausted.
    """
    if device_id is not None:
        devices = [d for d in devices if d.device_id == device_id]
        if not devices:
            raise ProblemError(
                404, "device_not_found", f"device {device_id!r} is not enrolled in your tenant"
            )
    online = [
        d
        for d in devices
        if d.online and 2 in d.protocol_versions and UNATTENDED_CAPABILITIES <= set(d.capabilities)
    ]
    fitting = [d for d in online if _policy_admits(d.local_policy, origins)]
    if device_id is not None and online and not fitting:
        raise ProblemError(
            409,
            "origin_conflict",
            f"the device's local origin policy does not admit these origins: "
            f"{_policy_refusal(online[0], origins)}; ask its operator to admit them, or "
            "request origins it admits",
        )
    if not fitting and online:
        # Devices are up, so "none online" would send the caller to wait for nothing: until an
        # operator changes a policy, a retry with these origins gets the same answer.
        refused("local_policy")
        many = len(online) > 1
        count = (
            f"{len(online)} compatible devices are online, but the local origin policy of each"
            if many
            else "1 compatible device is online, but its local origin policy"
        )
        listed = "; ".join(_policy_refusal(d, origins) for d in online[:_REFUSALS_LISTED])
        more = len(online) - _REFUSALS_LISTED
        raise ProblemError(
            503,
            "no_device_available",
            f"{count} refuses the requested origins ({listed}"
            f"{f'; and {more} more' if more > 0 else ''}); ask the "
            f"{'operator of a device' if many else 'device operator'} to admit these "
            "origins, or request origins a device admits",
            retry_after=5,
        )
    if not fitting:
        refused("no_device")
        raise ProblemError(
            503,
            "no_device_available",
            "no compatible device is online; retry later with the same Idempotency-Key",
            retry_after=5,
        )
    candidates: list[tuple[int, float, str, Device]] = []
    conflict: str | None = None
    full = 0
    for device in fitting:
        leases = leases_of(device.device_id)
        if len(leases) >= DEVICE_CAPACITY:
            full += 1
            continue
        clash = _conflict(leases, origins, profile_hash)
        if clash is not None:
            conflict = conflict or clash
            continue
        candidates.append((len(leases), device.last_assigned_at, device.device_id, device))
    if candidates:
        return min(candidates, key=lambda c: c[:3])[3]
    if conflict is not None and (device_id is not None or full < len(fitting)):
        refused(conflict)
        raise ProblemError(409, conflict, _CONFLICT_DETAIL[conflict])
    refused("capacity_exhausted")
    raise ProblemError(
        429,
        "capacity_exhausted",
        "every compatible device already controls two tabs; retry later with "
        "the same Idempotency-Key",
        retry_after=30,
    )


_CONFLICT_DETAIL = {
    "origin_conflict": "these origins overlap a live session on the device; sessions sharing a "
    "device need disjoint origin sets",
    "profile_conflict": "a live session on the device already uses this profile-state key",
}


_REFUSALS_LISTED = 5  # devices named in a no_device_available detail; the rest are counted


def _policy_refusal(device: Device, origins: list[str]) -> str:
    """Which device's policy refused which of the requested origins, for a problem detail."""
    policy = device.local_policy
    if policy is None:
        return f"device {device.device_id} has reported no local origin policy"
    admitted = set(policy.get("origins", []))
    refused = [o for o in origins if o not in admitted]
    return f"device {device.device_id} has an allowlist policy refusing {', '.join(refused)}"


def _policy_admits(policy: dict[str, Any] | None, origins: list[str]) -> bool:
    if policy is None:
        return False
    if policy.get("mode") == "any":
        return True
    return set(origins) <= set(policy.get("origins", []))


def _conflict(leases: list[SessionRow], origins: list[str], profile_hash: str) -> str | None:
    for lease in leases:
        if lease.profile_hash is not None and lease.profile_hash == profile_hash:
            return "profile_conflict"
        if set(lease.allowed_origins) & set(origins):
            return "origin_conflict"
    return None
