"""CPU time and resident memory of a process, read from /proc (Linux only)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcSample:
    """One reading of a process's counters."""

    cpu_s: float  # utime + stime
    user_s: float
    system_s: float
    rss_bytes: int  # VmRSS
    hwm_bytes: int  # VmHWM, the peak resident set so far
    threads: int
    open_fds: int


class Sampled(Protocol):
    """Something whose CPU and memory can be read: one server, or several nodes summed."""

    def sample(self) -> ProcSample: ...


def sample(pid: int) -> ProcSample:
    """Read the CPU seconds (user + system), resident set and open descriptors of ``pid``."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    status: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        status[key] = value.strip()
    return ProcSample(
        cpu_s=(utime + stime) / _TICKS_PER_S,
        user_s=utime / _TICKS_PER_S,
        system_s=stime / _TICKS_PER_S,
        rss_bytes=_kib(status.get("VmRSS", "0 kB")),
        hwm_bytes=_kib(status.get("VmHWM", "0 kB")),
        threads=int(status.get("Threads", "0")),
        open_fds=len(os.listdir(f"/proc/{pid}/fd")),
    )


def open_file_limit(pid: int) -> int | None:
    """The soft RLIMIT_NOFILE of ``pid`` (from /proc/<pid>/limits); None if unlimited."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft = line.split()[3]
            return None if soft == "unlimited" else int(soft)
    return None


def _kib(value: str) -> int:
    return int(value.split()[0]) * 1024


def filesystem_of(path: Path) -> dict[str, str]:
    """The mount (device, mount point, type) that holds ``path``, from /proc/self/mounts.

    The fsync rate means nothing on a tmpfs, so the report names the filesystem it was measured on.
    """
    target = str(path.resolve())
    best = {"device": "?", "mount_point": "/", "type": "?"}
    best_len = -1
    for line in Path("/proc/self/mounts").read_text().splitlines():
        device, mount_point, fs_type, *_ = line.split()
        mount_point = mount_point.replace("\\040", " ")
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) > best_len:
            best = {"device": device, "mount_point": mount_point, "type": fs_type}
            best_len = len(mount_point)
    return best
