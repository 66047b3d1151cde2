"""Re-exports `understudy_connector.local_chromium`, which launches and enrolls local Chromium.

The demo, the end-to-end tests and the benchmarks import it from here; the one implementation
lives in the connector, where the Synthetic Users fleet uses it too.
"""

from __future__ import annotations

from understudy_connector.local_chromium import (
    CHROMIUM,
    LAUNCH_TIMEOUT_S,
    Chromium,
    continue_where_left_off,
    devtools_port,
    enroll,
    extension_eval,
    flags,
    launch,
    restore_after_crash,
)

_devtools_port = devtools_port  # the name bench/_chromium.py has used

__all__ = [
    "CHROMIUM",
    "LAUNCH_TIMEOUT_S",
    "Chromium",
    "_devtools_port",
    "continue_where_left_off",
    "devtools_port",
    "enroll",
    "extension_eval",
    "flags",
    "launch",
    "restore_after_crash",
]
