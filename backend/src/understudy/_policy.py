"""The backend's timing and capacity policy, in one place.

Every deadline an actor persists or sleeps to is computed from these. Values marked *shared* are
protocol constants the extension relies on too (its copies must agree); they belong in the spec
and are generated for both sides, so when that lands they are imported from there, not repeated.
The others are the backend's own and may change without the extension noticing.
"""

from __future__ import annotations

from typing import Final

# -- session lifecycle (the coordinator) -----------------------------------------------------------
HARD_TTL_S: Final = 24 * 3600  # a session ends 24 h after creation, active or not
IDLE_TTL_S: Final = 2 * 3600  # ... or 2 h after its last admitted command
PROVISION_DEADLINE_S: Final = 30  # the device must open the tab within this
GRACE_S: Final = 90  # a lost device's sessions recover this long; a fenced close waits as long
OFFLINE_AFTER_S: Final = 75  # no heartbeat for this long: the device is offline
CREATE_WAIT_S: Final = 5  # POST /v1/sessions waits this long for the tab before answering 201
# shared: two tabs per enrolled profile (the extension refuses a third provision too).
DEVICE_CAPACITY: Final = 2

# -- the device socket -------------------------------------------------------------------------
# shared: the heartbeat interval told in `welcome`; Chrome stops an idle service worker after
# about 30 s, and an application frame every 22 s keeps it alive.
HEARTBEAT_INTERVAL_MS: Final = 22_000

# -- commands (the session agent) --------------------------------------------------------------
# shared: the extension learns each deadline from the frame (`readyBy`, `deadlineAt`), but its
# own bounds assume these values.
READ_DEADLINE_S: Final = 20.0  # a read must answer within this
READY_DEADLINE_S: Final = 5.0  # a prepared write must be ready within this
GRANT_DEADLINE_S: Final = 25.0  # a write's whole run, from admission to its result
SYNC_WAIT_S: Final = 20.0  # POST /commands waits this long for the outcome before answering 202
