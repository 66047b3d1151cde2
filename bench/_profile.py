"""CPU profiles of the server (``--profile``): switch the profiler on and off around a phase,
then summarise where the CPU went, as shares of the phase's profiled CPU time."""

from __future__ import annotations

import pstats
import shutil
import signal
from typing import TYPE_CHECKING, Any, Final

from bench._server import appeared

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
        await appeared(self.server.profile_path, _WAIT_FOR_FILE_S)
        _move(self.server.profile_path, self.out)

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


# Where the server's CPU goes on the way of a command, by the code that spends it (own time,
# so nothing is counted twice). First match wins; the rest is "other".
HOPS: Final = (
    (
        "HTTP parsing (uvicorn, httptools)",
        ("httptools/", "h11/", "uvicorn/protocols/http", "understudy/_server.py"),
    ),
    (
        "socket frames (websockets, permessage-deflate)",
        ("websockets/", "uvicorn/protocols/websockets", "zlib.", "understudy/http/_sockets.py"),
    ),
    (
        "HTTP framework (Litestar routing, guards, DI, responses)",
        ("litestar/", "anyio/", "msgspec"),
    ),
    (
        "validation and serialisation (pydantic, generated models)",
        ("pydantic", "understudy/generated/", "understudy/http/_parsing.py"),
    ),
    ("telemetry and metrics", ("understudy/_telemetry.py", "understudy/_metrics.py", "prometheus")),
    ("transactions (SQLite, repositories)", ("sqlite3", "understudy/_store/")),
    ("JSON (rows, telemetry lines, checks)", ("json/", "_json.")),
    ("actors and turns (session agent, write protocol)", ("understudy/",)),
    ("event loop, tasks, sockets (asyncio)", ("asyncio/", "selectors", "_socket.", "contextvars")),
)


# Code every hop calls (builtins, the standard library's generic modules): its own time goes to
# its callers' hops, in proportion to what each caller spent in it.
_SHARED = (
    "~",
    "<frozen",
    "/copy.py",
    "/enum.py",
    "/uuid.py",
    "/contextlib.py",
    "/abc.py",
    "/_weakrefset.py",
    "/functools.py",
    "/dataclasses.py",
    "/typing.py",
    "/re/",
    "/datetime.py",
)
_Func = tuple[str, int, str]


def hops(path: Path) -> dict[str, Any]:
    """The profiled CPU of a pstats file split by `HOPS`: seconds and shares per hop."""
    if not path.exists():
        return {"file": str(path), "error": "no profile was written"}
    stats = pstats.Stats(str(path))
    table: dict[_Func, Any] = stats.stats  # type: ignore[attr-defined]  # not in the stubs
    total = stats.total_tt  # type: ignore[attr-defined]
    spent = dict.fromkeys([name for name, _ in HOPS] + ["other"], 0.0)
    memo: dict[_Func, dict[str, float]] = {}

    def split(func: _Func, depth: int = 0) -> dict[str, float]:
        """Fractions of `func`'s own time per hop."""
        found = memo.get(func)
        if found is not None:
            return found
        filename, _, name = func
        if depth < 6 and any(marker in filename for marker in _SHARED):
            callers = table[func][4]
            weight = sum(entry[2] for entry in callers.values())
            fractions: dict[str, float] = {}
            for caller, entry in callers.items():
                if caller not in table or not weight:
                    continue
                for hop, part in split(caller, depth + 1).items():
                    fractions[hop] = fractions.get(hop, 0.0) + part * entry[2] / weight
            found = fractions or {"other": 1.0}
        else:
            where = f"{filename} {name}"
            hop = next((hop for hop, keys in HOPS if any(key in where for key in keys)), "other")
            found = {hop: 1.0}
        memo[func] = found
        return found

    for func, entry in table.items():
        for hop, part in split(func).items():
            spent[hop] += entry[2] * part
    return {
        "file": str(path),
        "cpu_s": round(total, 3),
        "hops": {
            hop: {"cpu_s": round(cpu, 4), "share": cpu / total if total else 0.0}
            for hop, cpu in spent.items()
        },
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
