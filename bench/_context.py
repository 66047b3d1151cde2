"""What every benchmark module receives, and what it must provide to join the suite."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from bench._report import Table, Target


@dataclass(frozen=True)
class Context:
    """How this run was asked to go.

    Attributes:
        quick: Run the small slice (``--quick``).
        data_root: Directory for the run's data directories (the disk being measured).
        profile_dir: Where py-spy profiles go (``--profile``), or None.
        log: Progress lines.
    """

    quick: bool
    data_root: Path
    profile_dir: Path | None
    log: Callable[[str], None]


class BenchmarkModule(Protocol):
    """A module of ``bench/`` that the runner can call (see ``bench/__main__.py``)."""

    async def suite(self, ctx: Context) -> dict[str, Any]: ...

    def tables(self, result: dict[str, Any]) -> list[Table]: ...

    def targets(self, result: dict[str, Any]) -> list[Target]: ...
