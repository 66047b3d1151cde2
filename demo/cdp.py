"""Re-exports the DevTools client of `understudy_connector.local_chromium` (one implementation)."""

from __future__ import annotations

from understudy_connector.local_chromium import CdpError, DevTools, Target, call, evaluate

__all__ = ["CdpError", "DevTools", "Target", "call", "evaluate"]
