"""The locks of a SQLite data directory.

- `serve.lock`, the one-writer lock: one serving process per SQLite database (`lock_data_dir`).
  `understudy copy-database` takes it too, so no service starts on a database being copied.
- `copy.lock`, between the copy and the other CLI commands: each command holds it shared for as
  long as it has the database open (`operator_access`), the copy holds it exclusively for its
  whole length (`lock_for_copy`). A command that would write after the copy's snapshot, and so
  be left behind in SQLite, is refused instead; a copy waits briefly for running commands.

`flock` locks are released by the kernel when their holder exits, even on `kill -9`, so a crash
never leaves the directory locked. The pid and host written into a lock file only name the
holder in a refusal.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

LOCK_FILE = "serve.lock"
COPY_LOCK_FILE = "copy.lock"
COPY_WAIT_S = 5.0  # how long a copy waits for CLI commands under way to finish
_POLL_S = 0.05


class DataDirInUseError(RuntimeError):
    """Another serving process holds the data directory (its lock file names it)."""


class DataDirCopyingError(RuntimeError):
    """`understudy copy-database` is copying the data directory's database (it names its pid)."""


class OperatorCommandsRunningError(RuntimeError):
    """CLI commands kept the data directory's database open for longer than a copy waits."""


def _take(descriptor: int, operation: int) -> str | None:
    """Take the flock `operation` without waiting: None once held; when another holds it, the
    name its file gives (and `descriptor` is closed)."""
    try:
        fcntl.flock(descriptor, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(descriptor, 256, 0).decode(errors="replace").strip() or "unknown"
        os.close(descriptor)
        return holder
    return None


def _name_holder(descriptor: int, what: str) -> None:
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{what}pid {os.getpid()} on host {socket.gethostname()}\n".encode(), 0)


def lock_data_dir(data_dir: Path) -> int:
    """Take the data directory's one-writer lock; returns the descriptor that holds it.

    Two services on one database would each think they own every device socket and timer:
    capacity is stranded and tabs are left behind. A raw descriptor (not a file object) so a
    test that never stops its services leaks no ResourceWarning.

    Raises:
        DataDirInUseError: another process (or another service in this one) holds it.
    """
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data_dir / LOCK_FILE
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    holder = _take(descriptor, fcntl.LOCK_EX)
    if holder is not None:
        raise DataDirInUseError(
            f"{data_dir} is in use by another understudy serve ({holder}); stop it, or give "
            "this one its own UNDERSTUDY_DATA_DIR"
        )
    _name_holder(descriptor, "")
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


@contextmanager
def operator_access(data_dir: Path) -> Iterator[None]:
    """Hold `copy.lock` shared while a CLI command has the directory's database open.

    Any number of commands hold it at once, beside a running service (which never takes it).
    A user who may not create the file may not write the database either, and a directory that
    does not exist holds nothing to copy: the command then goes ahead without it.

    Raises:
        DataDirCopyingError: `understudy copy-database` holds it.
    """
    path = data_dir / COPY_LOCK_FILE
    descriptor: int | None
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except PermissionError:
        descriptor = _open_existing(path)
    except FileNotFoundError:
        descriptor = None
    if descriptor is None:
        yield
        return
    holder = _take(descriptor, fcntl.LOCK_SH)
    if holder is not None:
        raise DataDirCopyingError(
            f"the SQLite database in {data_dir} is being copied to PostgreSQL ({holder}); what "
            "this command wrote now would be left behind. Once the copy is done, run it against "
            "PostgreSQL (UNDERSTUDY_DATABASE_URL), or here again if the copy failed"
        )
    try:
        yield
    finally:
        os.close(descriptor)


def _open_existing(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


def lock_for_copy(data_dir: Path, wait_s: float | None = None) -> int:
    """Hold `copy.lock` exclusively for a copy; returns the descriptor (`unlock_data_dir`).

    Waits up to `wait_s` (`COPY_WAIT_S`) for CLI commands under way, which keep the database
    open for milliseconds, then gives up.

    Raises:
        OperatorCommandsRunningError: commands still held it after `wait_s`.
    """
    wait_s = COPY_WAIT_S if wait_s is None else wait_s
    descriptor = os.open(data_dir / COPY_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(descriptor)
                raise OperatorCommandsRunningError(
                    f"another understudy command has the database in {data_dir} open (for "
                    f"over {wait_s:g} s); let it finish, then copy"
                ) from None
            time.sleep(_POLL_S)
    _name_holder(descriptor, "copy-database, ")
    return descriptor
