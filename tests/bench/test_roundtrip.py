"""The real-Chromium round trip's verdicts for issue 19, target 1, from hand-made figures."""

from __future__ import annotations

from typing import Any

from bench import roundtrip


def _result(strict: dict[str, float], ratios: dict[str, float]) -> dict[str, Any]:
    hops: dict[str, Any] = {"commands_per_op": 10, "clock_offset_ms": [0.0, 0.0]}
    hops["clock_offset_error_ms"] = 0.1
    for op in roundtrip.OPS:
        cells = {
            key: {"n": 10, "p50": strict[op], "mean": strict[op], "p99": strict[op] * 2}
            for key in ("overhead_strict", "overhead", "overhead_extension")
        }
        hops[op] = {"commands": 10, "hops_ms": cells, "calls_ms": {}}
    latency = {"n": 10, "p50": 10.0, "p95": 12.0}
    return {
        "ratio_p50": ratios,
        "ratio_p50_quarters": {op: [ratios[op] - 0.1, ratios[op] + 0.1] for op in roundtrip.OPS},
        "understudy": {op: {"latency_ms": latency} for op in roundtrip.OPS},
        "playwright": {op: {"latency_ms": latency} for op in roundtrip.OPS},
        "hops": hops,
    }


def test_each_command_gets_its_own_verdict_for_the_overhead_and_for_the_ratio() -> None:
    result = _result(
        strict={"click": 3.0, "type": 6.0, "navigate": 4.0},
        ratios={"click": 0.69, "type": 1.2, "navigate": 0.9},
    )

    verdicts = {
        target.name.split(":")[0] + (" ratio" if "ratio" in target.name else ""): target.met
        for target in roundtrip.targets(result)
    }

    assert verdicts == {
        "click": True,
        "type": False,
        "navigate": True,
        "click ratio": True,
        "type ratio": False,
        "navigate ratio": True,
    }


def test_the_ratio_verdict_shows_how_far_it_moved_within_the_run() -> None:
    result = _result(
        strict=dict.fromkeys(roundtrip.OPS, 1.0),
        ratios={"click": 0.7, "type": 1.0, "navigate": 1.0},
    )

    [click] = [t for t in roundtrip.targets(result) if t.name.startswith("click: governed vs")]

    assert click.met
    assert "per quarter of the run 0.60-0.80" in click.measured


def test_quarter_ratios_compare_the_same_quarter_of_both_sides() -> None:
    ours = [1.0] * 4 + [2.0] * 4 + [3.0] * 4 + [4.0] * 4
    theirs = [2.0] * 16

    assert roundtrip._quarter_ratios(ours, theirs) == [0.5, 1.0, 1.5, 2.0]
    assert roundtrip._quarter_ratios([1.0], [1.0]) == []
