"""The profiled server's windows: each SIGUSR1..SIGUSR2 stretch is profiled on its own."""

from __future__ import annotations

import pstats
from typing import TYPE_CHECKING

from bench import _cprofile_serve

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _first_phase_work() -> int:
    return sum(range(10))


def _second_phase_work() -> int:
    return sum(range(20))


def _calls(path: Path) -> dict[str, int]:
    table = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]  # not in the stubs
    return {name: entry[1] for (_, _, name), entry in table.items()}


def test_a_second_window_holds_only_its_own_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "phase.pstats"
    monkeypatch.setenv("BENCH_PROFILE_OUT", str(out))

    _cprofile_serve._start(0, None)
    for _ in range(3):
        _first_phase_work()
    _cprofile_serve._stop(0, None)
    first = _calls(out)

    _cprofile_serve._start(0, None)
    _second_phase_work()
    _cprofile_serve._stop(0, None)
    second = _calls(out)

    assert first["_first_phase_work"] == 3
    assert "_second_phase_work" not in first
    assert second["_second_phase_work"] == 1
    assert "_first_phase_work" not in second
