"""`understudy serve` under a CPU-time profiler that the benchmark switches on and off by signal.

``python -m bench._cprofile_serve`` starts the server like ``understudy serve``; SIGUSR1 starts
collecting into an empty profile, SIGUSR2 stops and writes the statistics of that window alone
to the path in ``BENCH_PROFILE_OUT``. The
profiler's clock is ``time.process_time``, so the figures are CPU seconds: on a shared machine a
wall-clock sampler mostly shows where the server was preempted (a loopback ``send`` wakes the
reader, which often takes the core), not where it spends its CPU. Deterministic profiling slows
every Python call, so quote figures from runs without ``--profile``; use this for shares.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

from understudy.cli import main

if TYPE_CHECKING:
    from types import FrameType

_profiler = cProfile.Profile(time.process_time)


def _start(signum: int, frame: FrameType | None) -> None:
    # A fresh profiler per window: enabling one again keeps adding to what it collected before,
    # so the earlier phases would be counted in this one's hops.
    global _profiler
    _profiler.disable()
    _profiler = cProfile.Profile(time.process_time)
    _profiler.enable()


def _stop(signum: int, frame: FrameType | None) -> None:
    _profiler.disable()
    out = os.environ["BENCH_PROFILE_OUT"]
    _profiler.dump_stats(out + ".tmp")
    os.replace(out + ".tmp", out)  # the benchmark waits for the complete file to appear


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    sys.exit(main(["serve"]))
