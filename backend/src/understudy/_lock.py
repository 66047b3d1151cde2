"""The one-writer lock of a data directory: one serving process per SQLite database."""

from __future__ import annotations

import fcntl
import os
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

LOCK_FILE = "serve.lock"


class DataDirInUseError(RuntimeError):
    """Another serving process holds the data directory (its lock file names it)."""


def lock_data_dir(data_dir: Path) -> int:
    """Take the data directory's one-writer lock; returns the descriptor that holds it.

    Two services on one database would each think they own every device socket and timer:
    capacity is stranded and tabs are left behind. `flock` is released by the kernel when the
    holder exits, even on `kill -9`, so a crash never leaves the directory locked; the pid and
    host written into the file only name the holder in the refusal. A raw descriptor (not a
    file object) so a test that never stops its services leaks no ResourceWarning.

    Raises:
        DataDirInUseError: another process (or another service in this one) holds it.
    """
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data_dir / LOCK_FILE
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(descriptor, 256, 0).decode(errors="replace").strip() or "unknown"
        os.close(descriptor)
        raise DataDirInUseError(
            f"{data_dir} is in use by another understudy serve ({holder}); stop it, or give "
            "this one its own UNDERSTUDY_DATA_DIR"
        ) from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"pid {os.getpid()} on host {socket.gethostname()}\n".encode(), 0)
    return descriptor


def unlock_data_dir(descriptor: int) -> None:
    os.close(descriptor)  # closing the last descriptor releases the flock


def data_dir_in_use(data_dir: Path) -> bool:
    """Whether a serving process holds the data directory's lock right now (a snapshot).

    For the CLI, which never takes the lock for long: it only asks, and releases at once.
    """
    path = data_dir / LOCK_FILE
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False
