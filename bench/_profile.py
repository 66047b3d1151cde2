"""CPU profiles of the server (``--profile``): switch the profiler on and off around a phase,
then summarise where the CPU went, as shares of the phase's profiled CPU time."""

from __future__ import annotations

import asyncio
import pstats
import shutil
import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from bench._server import Server

_WAIT_FOR_FILE_S = 30.0
# Frames that say where the time went; the event loop, uvicorn and the ASGI stack enclose
# everything and say nothing.
_INTERESTING = ("understudy/", "sqlite3", "json/__init__", "hmac", "permessage_deflate", "h11")


class Profile:
    """A profiled stretch of a server started with ``profile=True``."""

    def __init__(self, server: Server, out: Path) -> None:
        self.server = server
        self.out = out

    async def __aenter__(self) -> Profile:
        _remove(self.server.profile_path)
        self.server.signal(signal.SIGUSR1)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.signal(signal.SIGUSR2)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _WAIT_FOR_FILE_S
        written = self.server.profile_path
        while not written.exists() and loop.time() < deadline:  # noqa: ASYNC110 - another process
            await asyncio.sleep(0.05)
        _move(written, self.out)

    def summary(self, top: int = 25) -> dict[str, Any]:
        return summarise(self.out, top)


def summarise(path: Path, top: int = 25) -> dict[str, Any]:
    """Cumulative and own CPU share of the heaviest interesting functions in a pstats file."""
    if not path.exists():
        return {"file": str(path), "error": "no profile was written"}
    stats = pstats.Stats(str(path))
    total = stats.total_tt  # type: ignore[attr-defined]  # set by pstats, not in its stubs
    rows = []
    for (filename, line, name), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = _short(filename)
        if any(key in where or key in name for key in _INTERESTING):
            rows.append((cumulative, own, calls, f"{name} ({where}:{line})"))
    rows.sort(reverse=True)
    return {
        "file": str(path),
        "cpu_s": round(total, 3),
        "functions": [
            {
                "function": label,
                "cumulative_pct": round(cumulative / total * 100, 1),
                "own_pct": round(own / total * 100, 1),
                "calls": calls,
            }
            for cumulative, own, calls, label in rows[:top]
        ]
        if total
        else [],
    }


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)


def _move(source: Path, target: Path) -> None:
    if source.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in filename:
            return filename[filename.index(marker) + len(marker) :]
    return filename
