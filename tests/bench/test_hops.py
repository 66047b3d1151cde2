"""The per-hop split of a governed write, from a hand-made trace of the three processes."""

from __future__ import annotations

from typing import Any

from bench import _hops

ID = "00000000-0000-4000-8000-000000000001"


def _navigate_trace() -> list[list[Any]]:
    """One navigate: stamps in ms on the worker's clock (offset 0)."""
    return [
        ["recv", "write_prepare", ID, 5.0, 5.0],
        ["storage", "session.set journal", None, 5.0, 6.0],
        ["send", "write_ready", ID, 6.0, 6.0],
        ["recv", "write_grant", ID, 8.0, 8.0],
        ["storage", "session.set journal", None, 8.0, 9.0],
        ["cdp", "Page.navigate", None, 10.0, 30.0],
        ["cdp", "Fetch.continueRequest", None, 15.0, 17.0],
        # The settle round trip: sent at commit, answered after load and two page tasks.
        ["cdp", "Runtime.evaluate", None, 30.0, 80.0],
        ["event", "load", None, 75.0, 75.0],
        ["tabs", "tabs.get", None, 80.0, 82.0],
        ["storage", "session.set journal", None, 82.0, 84.0],
        ["send", "result", ID, 84.0, 84.0],
    ]


def test_a_navigate_is_split_into_hops_with_the_settle_after_its_load_on_its_own_rows() -> None:
    report = _hops.breakdown({ID: (0.0, 90.0)}, {ID: (1.0, 86.0)}, _navigate_trace(), 0.0)

    hops = {key: cell["p50"] for key, cell in report["hops_ms"].items() if cell["n"]}
    assert report["commands"] == 1
    assert hops["total"] == 90.0
    assert hops["extension_prepare"] == 1.0
    assert hops["extension_execute"] == 76.0
    # Under sendCommand: 10-80 (Page.navigate, then the evaluation), the definition.
    assert hops["overhead_strict"] == 20.0
    assert hops["browser"] == 70.0
    assert hops["after_load"] == 9.0
    assert hops["after_load_browser"] == 5.0
    # The extension's own: preparing (1) and executing outside browser time (8-10, 80-84).
    assert hops["overhead_extension"] == 7.0
    assert hops["overhead_elsewhere"] == 13.0


def test_a_write_without_a_load_has_no_after_load_rows() -> None:
    trace: list[list[Any]] = [
        ["recv", "write_prepare", ID, 5.0, 5.0],
        ["send", "write_ready", ID, 6.0, 6.0],
        ["recv", "write_grant", ID, 8.0, 8.0],
        ["cdp", "Input.dispatchMouseEvent", None, 9.0, 12.0],
        ["send", "result", ID, 13.0, 13.0],
    ]

    report = _hops.breakdown({ID: (0.0, 20.0)}, {ID: (1.0, 15.0)}, trace, 0.0)

    assert report["hops_ms"]["after_load"] == {"n": 0}
    assert report["hops_ms"]["overhead_strict"]["p50"] == 17.0
