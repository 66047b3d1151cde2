"""Compare the quick non-Chromium benchmarks of two revisions of the server in one run.

python -m bench.compare --base REV              base REV against this working tree
python -m bench.compare --base main --head HEAD two commits
python -m bench.compare --base REV --only overhead --rounds 2
make bench-compare BASE=REV [HEAD=REV] [ROUNDS=2]

Method. A revision other than the working tree is checked out into a temporary git worktree
(detached, removed afterwards). Both revisions run with this checkout's `.venv`: only the server
is swapped, by putting the revision's `backend/src` first on the `PYTHONPATH` of the `understudy`
processes a benchmark starts (`migrate`, `keys create`, `serve`). The load generator, the
simulated devices and the measurement are this checkout's, so both sides see the same workload;
a revision whose server cannot be imported with this venv is refused before anything runs.

Each benchmark runs once per round for each revision, interleaved (round 1 base then head, round
2 head then base, ...), so drift in the machine's load hits both sides alike. A figure is the
median of its rounds. Ratios are head / base. A figure regresses when head is worse than base by
more than the tolerance: `--tolerance` (default 25 %) for medians, throughput and CPU per
operation, `--tail-tolerance` (default 100 %) for tail percentiles, which swing widely on a
shared machine. A correctness check that fails on head (every write ran exactly once, every
reply a success) is a regression whatever the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from bench import connection_limits, overhead, scale
from bench._context import Context
from bench._report import REPO, Table, environment, fmt
from bench._server import Server

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator

RESULTS: Final = REPO / "bench" / "results"
DEFAULT_TOLERANCE: Final = 0.25
DEFAULT_TAIL_TOLERANCE: Final = 1.0
WORKING_TREE: Final = "working tree"

Better = Literal["lower", "higher"]


@dataclass(frozen=True)
class Metric:
    """One figure of one benchmark run.

    Attributes:
        key: What it measures, unique within the benchmark (``FULL 10x write p50 ms``).
        value: The figure.
        better: Which direction is an improvement.
        tail: A tail percentile (judged with the tail tolerance).
    """

    key: str
    value: float
    better: Better
    tail: bool = False


@dataclass(frozen=True)
class Check:
    """A correctness condition of one run (not a figure): it must hold on head."""

    key: str
    ok: bool


@dataclass(frozen=True)
class Revision:
    """One side of the comparison: the server code at ``src`` (a ``backend/src``)."""

    label: str  # "base" or "head"
    name: str  # what the user asked for (a rev, or the working tree)
    commit: str
    src: Path
    dirty: bool = False


@dataclass
class Row:
    """One figure of both sides, with its verdict."""

    key: str
    better: Better
    tail: bool
    base: float
    head: float

    @property
    def ratio(self) -> float:
        if self.base == 0 or math.isnan(self.base) or math.isnan(self.head):
            return math.nan
        return self.head / self.base

    def worse_by(self) -> float:
        """How much worse head is than base, as a fraction (negative: better); NaN if unknown."""
        ratio = self.ratio
        if math.isnan(ratio):
            return math.nan
        if self.better == "lower":
            return ratio - 1
        return (1 / ratio - 1) if ratio > 0 else math.inf

    def regressed(self, tolerance: float, tail_tolerance: float) -> bool:
        worse = self.worse_by()
        return not math.isnan(worse) and worse > (tail_tolerance if self.tail else tolerance)


@dataclass
class Comparison:
    """Every benchmark's figures for both revisions, and the verdict."""

    tolerance: float
    tail_tolerance: float
    rows: dict[str, list[Row]] = field(default_factory=dict)
    checks: dict[str, list[tuple[str, bool, bool]]] = field(default_factory=dict)

    def regressions(self) -> list[str]:
        found = [
            f"{name}: {row.key} ({_ratio(row.ratio)})"
            for name, rows in self.rows.items()
            for row in rows
            if row.regressed(self.tolerance, self.tail_tolerance)
        ]
        found += [
            f"{name}: {key} fails on head"
            for name, checks in self.checks.items()
            for key, _, head_ok in checks
            if not head_ok
        ]
        return found


# -- what each benchmark's figures are ----------------------------------------------------------


def overhead_metrics(result: dict[str, Any]) -> tuple[list[Metric], list[Check]]:
    metrics: list[Metric] = []
    checks: list[Check] = []
    for setting, data in result["settings"].items():
        for phase in data["phases"].values():
            name = f"{setting} {phase['sessions']}x {phase['command']}"
            latency, server = phase["latency_ms"], phase.get("server_side_ms", {})
            metrics += [
                Metric(f"{name} p50 ms", _num(latency.get("p50")), "lower"),
                Metric(f"{name} p99 ms", _num(latency.get("p99")), "lower", tail=True),
                Metric(f"{name} commands/s", _num(phase["commands_per_s"]), "higher"),
                Metric(f"{name} server p50 ms", _num(server.get("p50")), "lower"),
                Metric(
                    f"{name} server CPU ms/cmd", _num(phase["server_cpu_ms_per_command"]), "lower"
                ),
                Metric(
                    f"{name} SQL statements/cmd", _num(phase.get("statements_per_command")), "lower"
                ),
            ]
            statuses = phase.get("statuses", {})
            if statuses:
                others = {s: n for s, n in statuses.items() if str(s) != "200"}
                checks.append(Check(f"{name} every reply 200", not others))
        checks.append(Check(f"{setting} every write ran once", bool(data["every_write_ran_once"])))
    return metrics, checks


def connection_limits_metrics(result: dict[str, Any]) -> tuple[list[Metric], list[Check]]:
    metrics: list[Metric] = []
    for variant in result["variants"].values():
        for phase, figures in variant["healthz_ms"].items():
            name = f"{variant['limits']} {phase.replace('_', ' ')} healthz"
            metrics += [
                Metric(f"{name} p50 ms", _num(figures.get("p50")), "lower"),
                Metric(f"{name} p99 ms", _num(figures.get("p99")), "lower", tail=True),
            ]
    return metrics, []


def scale_metrics(result: dict[str, Any]) -> tuple[list[Metric], list[Check]]:
    metrics: list[Metric] = []
    checks: list[Check] = []
    for level in result["levels"]:
        if "skipped" in level:
            continue
        name = f"{level['devices']} devices"
        checks.append(Check(f"{name} all connected", level["connected"] == level["devices"]))
        metrics += [
            Metric(f"{name} connects/s", _num(level["connect_rate_per_s"]), "higher"),
            Metric(f"{name} CPU ms/connect", _num(level["server_cpu_ms_per_connect"]), "lower"),
            Metric(f"{name} RSS MiB", _num(level["rss_connected_mib"]), "lower"),
            Metric(f"{name} CPU s/1000 hb", _num(level["cpu_s_per_1000_heartbeats"]), "lower"),
            Metric(f"{name} ack p50 ms", _num(level["heartbeat_ack_ms"].get("p50")), "lower"),
            Metric(
                f"{name} ack p99 ms", _num(level["heartbeat_ack_ms"].get("p99")), "lower", tail=True
            ),
        ]
    for one in result["single_tenant"]:
        name = f"one tenant {one['devices']} devices"
        metrics += [
            Metric(f"{name} connects/s", _num(one["connect_rate_per_s"]), "higher"),
            Metric(f"{name} CPU ms/connect", _num(one["server_cpu_ms_per_connect"]), "lower"),
            Metric(f"{name} p50 ms", _num(one["connect_latency_ms"].get("p50")), "lower"),
        ]
    return metrics, checks


@dataclass(frozen=True)
class Benchmark:
    run: Callable[[Context], Coroutine[Any, Any, dict[str, Any]]]
    metrics: Callable[[dict[str, Any]], tuple[list[Metric], list[Check]]]


BENCHMARKS: Final[dict[str, Benchmark]] = {
    "overhead": Benchmark(overhead.suite, overhead_metrics),
    "connection_limits": Benchmark(connection_limits.suite, connection_limits_metrics),
    "scale": Benchmark(scale.suite, scale_metrics),
}
DEFAULT_BENCHMARKS: Final = ("overhead", "connection_limits")


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


# -- the two revisions ------------------------------------------------------------------------


def _git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(  # noqa: S603 - git with our own arguments
        ["git", *args],  # noqa: S607 - git from PATH
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench.compare: git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def resolve(rev: str) -> str:
    """The full commit id of ``rev`` (a branch, tag or commit)."""
    return _git("rev-parse", "--verify", f"{rev}^{{commit}}")


@contextlib.contextmanager
def checkout(label: str, rev: str | None, workdir: Path) -> Iterator[Revision]:
    """``rev`` in a temporary detached worktree under ``workdir``; None: this working tree."""
    if rev is None:
        dirty = bool(_git("status", "--porcelain", "--", "backend"))
        yield Revision(label, WORKING_TREE, resolve("HEAD"), REPO / "backend" / "src", dirty)
        return
    commit = resolve(rev)
    tree = workdir / label
    _git("worktree", "add", "--detach", "--quiet", str(tree), commit)
    try:
        yield Revision(label, rev, commit, tree / "backend" / "src")
    finally:
        _git("worktree", "remove", "--force", str(tree))


def server_imports(src: Path) -> str | None:
    """None when this venv runs the server at ``src``; else why not (the import's error)."""
    probe = (
        "import understudy, understudy.cli, understudy.app; "
        "print(understudy.__file__)"  # the package must come from src, not the editable install
    )
    env = {**os.environ, "PYTHONPATH": _pythonpath(src)}
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed probe
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return lines[-1] if lines else f"exit status {done.returncode}"
    if not Path(done.stdout.strip()).resolve().is_relative_to(src.resolve()):
        return f"understudy was imported from {done.stdout.strip()}, not from {src}"
    return None


def _pythonpath(src: Path) -> str:
    rest = os.environ.get("PYTHONPATH")
    return f"{src}{os.pathsep}{rest}" if rest else str(src)


@contextlib.contextmanager
def serving(src: Path) -> Iterator[None]:
    """Every `understudy` process a benchmark starts meanwhile runs the server code at ``src``."""
    original = Server._env

    def env(self: Server) -> dict[str, str]:
        values = original(self)
        values["PYTHONPATH"] = _pythonpath(src)
        return values

    Server._env = env  # type: ignore[method-assign]
    try:
        yield
    finally:
        Server._env = original  # type: ignore[method-assign]


# -- running and judging --------------------------------------------------------------------


def order(round_index: int, revisions: tuple[Revision, Revision]) -> list[Revision]:
    """Base first in odd rounds (1, 3, ...), head first in even ones."""
    base, head = revisions
    return [base, head] if round_index % 2 == 0 else [head, base]


def compare(
    runs: dict[str, dict[str, list[tuple[list[Metric], list[Check]]]]],
    tolerance: float = DEFAULT_TOLERANCE,
    tail_tolerance: float = DEFAULT_TAIL_TOLERANCE,
) -> Comparison:
    """Judge the runs: ``runs[benchmark][label]`` is one (metrics, checks) per round."""
    result = Comparison(tolerance, tail_tolerance)
    for name, sides in runs.items():
        base, head = _medians(sides["base"]), _medians(sides["head"])
        result.rows[name] = [
            Row(key, better, tail, value, head[key][2])
            for key, (better, tail, value) in base.items()
            if key in head
        ]
        base_checks, head_checks = _checks(sides["base"]), _checks(sides["head"])
        result.checks[name] = [
            (key, base_checks.get(key, False), ok) for key, ok in head_checks.items()
        ]
    return result


def _medians(
    rounds: list[tuple[list[Metric], list[Check]]],
) -> dict[str, tuple[Better, bool, float]]:
    values: dict[str, list[float]] = {}
    kinds: dict[str, tuple[Better, bool]] = {}
    for metrics, _ in rounds:
        for metric in metrics:
            values.setdefault(metric.key, []).append(metric.value)
            kinds[metric.key] = (metric.better, metric.tail)
    return {
        key: (*kinds[key], statistics.median(found) if found else math.nan)
        for key, found in values.items()
    }


def _checks(rounds: list[tuple[list[Metric], list[Check]]]) -> dict[str, bool]:
    held: dict[str, bool] = {}
    for _, checks in rounds:
        for check in checks:
            held[check.key] = held.get(check.key, True) and check.ok
    return held


def tables(comparison: Comparison, base: Revision, head: Revision) -> list[Table]:
    found: list[Table] = []
    for name, rows in comparison.rows.items():
        table = Table(
            f"{name}: head ({_describe(head)}) vs base ({_describe(base)})",
            ["figure", "base", "head", "head/base", "verdict"],
        )
        for row in rows:
            table.rows.append(
                [
                    row.key,
                    fmt(row.base),
                    fmt(row.head),
                    _ratio(row.ratio),
                    _verdict(row, comparison),
                ]
            )
        for key, base_ok, head_ok in comparison.checks.get(name, []):
            table.notes.append(f"check {key}: base {_held(base_ok)}, head {_held(head_ok)}")
        found.append(table)
    return found


def _describe(revision: Revision) -> str:
    short = revision.commit[:7]
    if revision.name == WORKING_TREE:
        return f"working tree at {short}" + (
            ", uncommitted backend changes" if revision.dirty else ""
        )
    return short if revision.name.startswith(short) else f"{revision.name} = {short}"


def _ratio(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def _held(ok: bool) -> str:
    return "holds" if ok else "FAILS"


def _verdict(row: Row, comparison: Comparison) -> str:
    worse = row.worse_by()
    if math.isnan(worse):
        return "n/a"
    if row.regressed(comparison.tolerance, comparison.tail_tolerance):
        return "REGRESSION"
    limit = comparison.tail_tolerance if row.tail else comparison.tolerance
    if worse < -limit:
        return "better"
    return "same (tail)" if row.tail else "same"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--head", help="the revision compared (default: this working tree)")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(BENCHMARKS),
        help="run only this benchmark (repeat for several; default: "
        f"{', '.join(DEFAULT_BENCHMARKS)})",
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs per revision (default 1)")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE)
    parser.add_argument("--tail-tolerance", type=float, default=DEFAULT_TAIL_TOLERANCE)
    parser.add_argument("--name", default="compare", help="results file name without .json")
    parser.add_argument(
        "--out", type=Path, help="the results file (default: bench/results/NAME.json)"
    )
    parser.add_argument(
        "--data-dir", type=Path, help="where the servers' data go (default: bench/results)"
    )
    parser.add_argument("--keep-data", action="store_true", help="keep the data directories")
    return parser


def main(
    argv: list[str] | None = None,
    benchmarks: dict[str, Benchmark] | None = None,
) -> int:
    """Run the comparison; 0 when head shows no regression, 1 when it does, 2 when it cannot run.

    ``benchmarks`` replaces the suite (a test passes a tiny slice).
    """
    args = _parser().parse_args(argv)
    suite = benchmarks if benchmarks is not None else BENCHMARKS
    selected = args.only or [name for name in DEFAULT_BENCHMARKS if name in suite] or list(suite)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    data_root = (args.data_dir or RESULTS) / f"data-compare-{stamp}"

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    with (
        tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        base = stack.enter_context(checkout("base", args.base, Path(tmp)))
        head = stack.enter_context(checkout("head", args.head, Path(tmp)))
        for revision in (base, head):
            problem = server_imports(revision.src)
            if problem is not None:
                print(
                    f"bench.compare: the {revision.label} server ({_describe(revision)}) does not "
                    f"run with {sys.executable}: {problem}",
                    file=sys.stderr,
                )
                return 2
        log(f"base: {_describe(base)}; head: {_describe(head)}; {', '.join(selected)}")
        before = environment()
        started = time.monotonic()
        runs: dict[str, dict[str, list[tuple[list[Metric], list[Check]]]]] = {}
        raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
        try:
            for name in selected:
                runs[name] = {"base": [], "head": []}
                raw[name] = {"base": [], "head": []}
                for round_index in range(max(1, args.rounds)):
                    for revision in order(round_index, (base, head)):
                        log(f"{name}, round {round_index + 1}: {revision.label}")
                        ctx = Context(
                            True, data_root / f"{name}-{revision.label}-{round_index}", None, log
                        )
                        with serving(revision.src):
                            result = asyncio.run(suite[name].run(ctx))
                        runs[name][revision.label].append(suite[name].metrics(result))
                        raw[name][revision.label].append(result)
        finally:
            if not args.keep_data:
                shutil.rmtree(data_root, ignore_errors=True)
        after = environment()
    comparison = compare(runs, args.tolerance, args.tail_tolerance)
    for table in tables(comparison, base, head):
        print("\n" + table.render())
    regressions = comparison.regressions()
    seconds = time.monotonic() - started
    print(
        f"\n{seconds:.0f} s on {before['cpus']} CPUs, load average {before['loadavg'][0]:.1f} -> "
        f"{after['loadavg'][0]:.1f}; tolerance {args.tolerance:.0%} "
        f"(tail percentiles {args.tail_tolerance:.0%}), {max(1, args.rounds)} round(s) each"
    )
    if regressions:
        print(f"verdict: REGRESSION in {len(regressions)} figure(s):")
        for line in regressions:
            print(f"  {line}")
    else:
        print("verdict: no regression beyond the tolerance")
    out: Path = args.out or RESULTS / f"{args.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "base": {**vars(base), "src": str(base.src)},
                "head": {**vars(head), "src": str(head.src)},
                "tolerance": args.tolerance,
                "tail_tolerance": args.tail_tolerance,
                "rounds": max(1, args.rounds),
                "environment_before": before,
                "environment_after": after,
                "rows": {
                    name: [{**vars(row), "ratio": row.ratio} for row in rows]
                    for name, rows in comparison.rows.items()
                },
                "checks": comparison.checks,
                "regressions": regressions,
                "results": raw,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
