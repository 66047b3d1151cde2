"""Run the benchmarks, print their tables and target verdicts, write bench/results/<name>.json.

python -m bench                   the full suite (about 35 minutes on a busy 2-core machine)
python -m bench --quick           a small slice (1 and 10 sessions, 1k devices, real Chromium
                                  with smaller samples; about 3 minutes)
python -m bench --only overhead   one benchmark (repeatable)
python -m bench --profile         also CPU-profile the server in the top-level phases (slower;
                                  quote figures from runs without it)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from bench import (
    connection_limits,
    engines,
    overhead,
    roundtrip,
    scale,
    session_create,
    snapshot,
    synthetic_runs,
)
from bench._context import Context
from bench._report import Target, environment

if TYPE_CHECKING:
    from bench._context import BenchmarkModule

RESULTS: Final = Path(__file__).resolve().parent / "results"


# Order matters only for the printout.
BENCHMARKS: Final[dict[str, BenchmarkModule]] = {
    "overhead": overhead,
    "engines": engines,
    "scale": scale,
    "roundtrip": roundtrip,
    "session_create": session_create,
    "connection_limits": connection_limits,
    "snapshot": snapshot,
    "synthetic_runs": synthetic_runs,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    parser.add_argument("--quick", action="store_true", help="run the small slice (~3 min)")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(BENCHMARKS),
        help="run only this benchmark (repeat for several)",
    )
    parser.add_argument("--name", help="results file name without .json (default: quick or full)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="where the servers' data directories go: the disk measured (default: bench/results)",
    )
    parser.add_argument("--keep-data", action="store_true", help="keep the data directories")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="CPU-profile the server (cProfile) in the top-level and single-tenant phases",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    name = args.name or ("quick" if args.quick else "full")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    data_root = (args.data_dir or RESULTS) / f"data-{stamp}"
    profile_dir = RESULTS / f"profile-{stamp}" if args.profile else None

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    ctx = Context(args.quick, data_root, profile_dir, log)
    selected = args.only or list(BENCHMARKS)
    report: dict[str, Any] = {
        "name": name,
        "quick": args.quick,
        "environment_before": environment(),
        "benchmarks": {},
    }
    started = time.monotonic()
    failed: dict[str, str] = {}
    try:
        for key in selected:
            try:
                report["benchmarks"][key] = asyncio.run(BENCHMARKS[key].suite(ctx))
            except Exception as exc:  # the others still run; the exit code says it failed
                log(f"{key}: FAILED: {type(exc).__name__}: {exc}")
                failed[key] = f"{type(exc).__name__}: {exc}"
    finally:
        if not args.keep_data:
            shutil.rmtree(data_root, ignore_errors=True)
    report["failed"] = failed
    report["environment_after"] = environment()
    report["seconds"] = round(time.monotonic() - started, 1)
    verdicts = _print(report)
    report["targets"] = [vars(target) for target in verdicts]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")
    for key, error in failed.items():
        print(f"bench: {key} failed: {error}", file=sys.stderr)
    return 1 if failed else 0


def _print(report: dict[str, Any]) -> list[Target]:
    verdicts: list[Target] = []
    for key, result in report["benchmarks"].items():
        for table in BENCHMARKS[key].tables(result):
            print("\n" + table.render())
        verdicts += BENCHMARKS[key].targets(result)
    before, after = report["environment_before"], report["environment_after"]
    print(
        f"\nTargets; {report['seconds']:.0f} s on {before['cpus']} CPUs, load average "
        f"{before['loadavg'][0]:.1f} -> {after['loadavg'][0]:.1f} (other processes share them)"
    )
    for target in verdicts:
        print(target.render())
    return verdicts


if __name__ == "__main__":
    sys.exit(main())
