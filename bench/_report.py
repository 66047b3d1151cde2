"""Plain-text tables, target verdicts, and the run's environment for the JSON results."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        widths = [len(h) for h in self.headers]
        for row in self.rows:
            widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

        def line(cells: list[str]) -> str:
            return "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()

        out = [self.title, line(self.headers), line(["-" * w for w in widths])]
        out += [line(row) for row in self.rows]
        out += [f"  {note}" for note in self.notes]
        return "\n".join(out)


@dataclass(frozen=True)
class Target:
    name: str
    wanted: str
    measured: str
    met: bool | None  # None: not measured in this run

    def render(self) -> str:
        verdict = {True: "met", False: "MISSED", None: "not measured"}[self.met]
        return f"  [{verdict:^12}] {self.name}: {self.wanted}; measured {self.measured}"


def fmt(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


def _pressure(kind: str) -> str | None:
    path = Path(f"/proc/pressure/{kind}")
    if not path.exists():
        return None
    first = path.read_text().splitlines()[0]  # "some avg10=… avg60=… avg300=… total=…"
    return first


def environment() -> dict[str, Any]:
    """What the figures depend on: machine, load from other processes, versions, commit."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 - git from PATH, fixed argv
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--", "backend"],  # noqa: S607
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", False
    return {
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "loadavg": list(os.getloadavg()),
        "cpu_pressure": _pressure("cpu"),
        "io_pressure": _pressure("io"),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "commit": commit,
        "backend_has_uncommitted_changes": dirty,
    }
