"""The figures the fault suite reports: runs, crash points, executions counted, outcomes.

Each test records what it observed (never what it expected); `conftest.py` prints the totals at
the end of the pytest run, for the issue note.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from _pytest.terminal import TerminalReporter

    from tests.backend.faults._caller import Answer


@dataclass
class Figures:
    runs: Counter[str] = field(default_factory=Counter)  # fault runs by family
    crash_points: set[str] = field(default_factory=set)
    commands: int = 0
    executions: int = 0  # real side effects the simulated devices counted
    outcomes: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)  # other counts worth reporting
    durations: dict[str, list[float]] = field(default_factory=dict)  # seconds, by what

    def run(
        self,
        family: str,
        point: str,
        finals: Iterable[Answer],
        executions: Mapping[str, int],
    ) -> None:
        """Record one fault run: its family, the point it faulted at, and what the caller got."""
        self.runs[family] += 1
        self.crash_points.add(f"{family}:{point}")
        for final in finals:
            self.commands += 1
            self.outcomes[final.label] += 1
        self.executions += sum(executions.values())

    def note(self, what: str, count: int) -> None:
        self.notes[what] += count

    def took(self, what: str, seconds: float) -> None:
        """Record how long something took (a recovery after a node was lost)."""
        self.durations.setdefault(what, []).append(seconds)

    def report(self, terminalreporter: TerminalReporter, title: str) -> None:
        """Print the totals at the end of the pytest run (nothing when no fault ran)."""
        if not self.runs:
            return
        terminalreporter.write_sep("-", title)
        for line in self.lines():
            terminalreporter.write_line(line)

    def lines(self) -> list[str]:
        outcomes = ", ".join(f"{label}: {n}" for label, n in sorted(self.outcomes.items()))
        points: dict[str, list[str]] = {}
        for family_point in sorted(self.crash_points):
            family, point = family_point.split(":", 1)
            points.setdefault(family, []).append(point)
        return [
            f"runs: {sum(self.runs.values())}; fault points covered: {len(self.crash_points)}",
            *(
                f"  {family} ({self.runs[family]} runs): {', '.join(named)}"
                for family, named in points.items()
            ),
            f"commands settled: {self.commands}; executions counted: {self.executions}",
            f"outcomes by status: {outcomes}",
            *(f"{what}: {n}" for what, n in sorted(self.notes.items())),
            *(
                f"{what}: {len(times)} times, max {max(times):.2f} s, "
                f"median {sorted(times)[len(times) // 2]:.2f} s"
                for what, times in sorted(self.durations.items())
            ),
        ]


FIGURES = Figures()  # one node: every fault test
THREE_NODE_FIGURES = Figures()  # the same tests, run again on three nodes on one PostgreSQL
