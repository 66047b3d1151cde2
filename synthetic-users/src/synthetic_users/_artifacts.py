"""Where reports, transcripts and screenshots are kept, behind one small interface.

Keys follow the seed's layout: `customers/<customer>/runs/<run>/sessions/<session>/<name>` for a
persona session's files and `customers/<customer>/runs/<run>/<name>` for the aggregate. The
embedded default is a directory; another store (an object store) implements the same protocol.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Protocol

_KEY = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]*/)*[A-Za-z0-9][A-Za-z0-9._-]*$")


class ArtifactNotFound(KeyError):
    """No artifact under that key."""


class ArtifactStore(Protocol):
    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, replacing what was there, atomically."""
        ...

    def get(self, key: str) -> bytes:
        """The bytes under `key`; raises `ArtifactNotFound`."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Every key under `prefix` (a folder-like key ending without a slash), sorted."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key under `prefix`; returns how many were deleted."""
        ...


def session_prefix(customer: str, run: str, session: str) -> str:
    return f"customers/{customer}/runs/{run}/sessions/{session}"


def run_prefix(customer: str, run: str) -> str:
    return f"customers/{customer}/runs/{run}"


def check_key(key: str) -> str:
    """`key` if it is a relative path of safe segments (no `..`, no absolute path)."""
    if not _KEY.fullmatch(key) or any(part in {".", ".."} for part in key.split("/")):
        raise ValueError(f"not an artifact key: {key!r}")
    return key


class DirectoryStore:
    """Artifacts as files under `root`; writes go through a temporary file and a rename."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            raise ArtifactNotFound(key) from None

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        return sorted(
            p.relative_to(self.root).as_posix()
            for p in base.rglob("*")
            if p.is_file() and not p.name.startswith(".tmp-")
        )

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list(prefix)
        for key in keys:
            self._path(key).unlink(missing_ok=True)
        return len(keys)
