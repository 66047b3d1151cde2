"""The browser fleet: isolated Chromium profiles, each an enrolled Understudy device."""
