"""Skip a browser module, saying why, when Debian's Chromium is not installed."""

from __future__ import annotations

import pytest

from demo.chromium import CHROMIUM


def require_chromium() -> None:
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is absent: install Debian's 'chromium' package (apt-get install "
            "chromium) to run the end-to-end suite",
            allow_module_level=True,
        )
