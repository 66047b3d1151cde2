"""`bench.compare`: figures side by side, ratios and the verdict, on fixed figures and on a tiny
real run of one revision against itself (no timing is asserted anywhere)."""

from __future__ import annotations

import json
import math
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from bench import compare, overhead
from bench._report import REPO
from bench.compare import Benchmark, Check, Metric, Revision, Row

if TYPE_CHECKING:
    from pathlib import Path

    from bench._context import Context


def _runs(base: list[float], head: list[float], **kind: Any) -> dict[str, Any]:
    """One benchmark with one figure, one value per round on each side."""
    return {
        "b": {
            "base": [([Metric("fig", v, **kind)], [Check("ok", True)]) for v in base],
            "head": [([Metric("fig", v, **kind)], [Check("ok", True)]) for v in head],
        }
    }


def test_a_slower_head_beyond_the_tolerance_is_a_regression() -> None:
    judged = compare.compare(_runs([10.0], [13.0], better="lower"), tolerance=0.25)
    assert judged.rows["b"][0].ratio == pytest.approx(1.3)
    assert judged.regressions() == ["b: fig (1.30)"]


def test_a_difference_within_the_tolerance_is_not_a_regression() -> None:
    judged = compare.compare(_runs([10.0], [12.0], better="lower"), tolerance=0.25)
    assert judged.regressions() == []


def test_throughput_regresses_when_it_falls_not_when_it_rises() -> None:
    assert compare.compare(_runs([100.0], [70.0], better="higher")).regressions()
    assert not compare.compare(_runs([100.0], [300.0], better="higher")).regressions()


def test_a_tail_percentile_is_judged_with_the_tail_tolerance() -> None:
    runs = _runs([10.0], [18.0], better="lower", tail=True)
    assert compare.compare(runs, tolerance=0.25, tail_tolerance=1.0).regressions() == []
    assert compare.compare(runs, tolerance=0.25, tail_tolerance=0.5).regressions()


def test_a_figure_is_the_median_of_its_rounds() -> None:
    judged = compare.compare(_runs([10.0, 11.0, 90.0], [10.5, 11.0, 12.0], better="lower"))
    row = judged.rows["b"][0]
    assert (row.base, row.head) == (11.0, 11.0)
    assert judged.regressions() == []


def test_a_check_that_fails_on_head_is_a_regression_whatever_the_figures() -> None:
    runs = _runs([10.0], [10.0], better="lower")
    runs["b"]["head"][0][1][0] = Check("ok", False)
    assert compare.compare(runs).regressions() == ["b: ok fails on head"]


def test_a_figure_missing_a_value_has_no_verdict() -> None:
    row = Row("fig", "lower", False, math.nan, 3.0)
    assert math.isnan(row.ratio)
    assert not row.regressed(0.25, 1.0)


def test_rounds_alternate_which_revision_runs_first() -> None:
    base = Revision("base", "r1", "a" * 40, REPO)
    head = Revision("head", "r2", "b" * 40, REPO)
    assert [[r.label for r in compare.order(i, (base, head))] for i in range(3)] == [
        ["base", "head"],
        ["head", "base"],
        ["base", "head"],
    ]


def test_the_table_shows_both_sides_the_ratio_and_the_verdict() -> None:
    judged = compare.compare(_runs([10.0], [20.0], better="lower"))
    base = Revision("base", "main", "a" * 40, REPO)
    head = Revision("head", compare.WORKING_TREE, "b" * 40, REPO, dirty=True)
    (table,) = compare.tables(judged, base, head)
    text = table.render()
    assert "main = aaaaaaa" in text and "uncommitted backend changes" in text
    assert table.rows == [["fig", "10.00", "20.00", "2.00", "REGRESSION"]]
    assert "check ok: base holds, head holds" in text


def _overhead_result(p50: float, ran_once: bool) -> dict[str, Any]:
    """The shape `bench.overhead.run` returns, reduced to what the comparison reads."""
    phase = {
        "sessions": 1,
        "command": "click",
        "latency_ms": {"p50": p50, "p99": p50 * 3},
        "server_side_ms": {"p50": p50 / 2},
        "commands_per_s": 1000 / p50,
        "server_cpu_ms_per_command": 1.5,
        "statements_per_command": 15.0,
        "statuses": {"200": 10},
    }
    return {"settings": {"FULL": {"phases": {"1:write": phase}, "every_write_ran_once": ran_once}}}


def test_overhead_figures_and_checks_come_from_its_phases() -> None:
    metrics, checks = compare.overhead_metrics(_overhead_result(4.0, ran_once=False))
    figures = {m.key: (m.value, m.better, m.tail) for m in metrics}
    assert figures["FULL 1x click p50 ms"] == (4.0, "lower", False)
    assert figures["FULL 1x click p99 ms"] == (12.0, "lower", True)
    assert figures["FULL 1x click commands/s"] == (250.0, "higher", False)
    assert figures["FULL 1x click SQL statements/cmd"] == (15.0, "lower", False)
    assert {c.key: c.ok for c in checks} == {
        "FULL 1x click every reply 200": True,
        "FULL every write ran once": False,
    }


def _worktrees() -> set[str]:
    """The checkouts' paths (not their heads: other checkouts of the repository may commit)."""
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],  # noqa: S607 - git from PATH
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line for line in listed.splitlines() if line.startswith("worktree ")}


async def _tiny_overhead(ctx: Context) -> dict[str, Any]:
    # One session, a handful of commands: enough to exercise every step, too few to mean much.
    return await overhead.run(ctx.data_root, [1], 4, 2, 0.05, None, ctx.log)


@pytest.mark.slow
def test_a_tiny_run_of_a_commit_against_itself_compares_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _worktrees()
    out = tmp_path / "compare.json"
    code = compare.main(
        ["--base", "HEAD", "--head", "HEAD", "--data-dir", str(tmp_path), "--out", str(out)],
        benchmarks={"overhead": Benchmark(_tiny_overhead, compare.overhead_metrics)},
    )
    printed = capsys.readouterr().out
    assert code in (0, 1), printed  # the verdict on four commands is noise either way
    report = json.loads(out.read_text())
    assert report["base"]["commit"] == report["head"]["commit"]
    assert report["base"]["src"] != report["head"]["src"], "each side runs its own checkout"
    rows = report["rows"]["overhead"]
    assert {row["key"] for row in rows} >= {"FULL 1x click p50 ms", "NORMAL 1x snapshot commands/s"}
    assert all(row["base"] > 0 and row["head"] > 0 for row in rows if "p50 ms" in row["key"])
    assert all(base and head for _, base, head in report["checks"]["overhead"])
    assert "head/base" in printed and "verdict:" in printed
    assert _worktrees() == before, "the temporary worktrees are removed"
