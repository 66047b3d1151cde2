"""Crash points for fault tests: `UNDERSTUDY_CRASH_AFTER=<step>` kills the process with SIGKILL
right after the named step's transaction commits, before anything is sent.

Steps: `preparing`, `granted`, `result` (the backend's persisted steps of the write sequence).
Unset in production; reading it costs one dict lookup per write step.
"""

from __future__ import annotations

import os
import signal

CRASH_STEPS = frozenset({"preparing", "granted", "result"})
_CRASH_AFTER = os.environ.get("UNDERSTUDY_CRASH_AFTER")


def after(step: str) -> None:
    """Die here if this process was started to crash after `step`."""
    if _CRASH_AFTER == step:
        os.kill(os.getpid(), signal.SIGKILL)
