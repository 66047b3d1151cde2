"""The main job: the whole system on the embedded default, driven through the connector.

`python -m demo` (or `make run`) builds the extension, starts the backend on SQLite, enrolls a
local device, launches Chromium with the extension and runs a governed workflow against the
bundled demo site. `demo.chromium` and `demo.cdp` launch and inspect that browser; the end-to-end
tests use them too.
"""
