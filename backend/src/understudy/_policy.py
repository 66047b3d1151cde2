"""The backend's timing and capacity policy, in one place.

Every deadline an actor persists or sleeps to is computed from these. Values marked *shared* are
protocol constants the extension relies on too: they live in `spec/frames/protocol-constants.json`
and come from the generated `understudy.generated.protocol`, never repeated here. The others are
the backend's own and may change without the extension noticing.
"""

from __future__ import annotations

from typing import Final

from understudy.generated import protocol

# -- session lifecycle (the coordinator) -----------------------------------------------------------
HARD_TTL_S: Final = 24 * 3600  # a session ends 24 h after creation, active or not
IDLE_TTL_S: Final = 2 * 3600  # ... or 2 h after its last admitted command
PROVISION_DEADLINE_S: Final = 30  # the device must open the tab within this
# shared: a lost device's sessions recover this long; a fenced close waits as long.
GRACE_S: Final = protocol.RECOVERY_GRACE_S
# shared: no heartbeat for this long and the device is offline.
OFFLINE_AFTER_S: Final = protocol.DEVICE_OFFLINE_AFTER_S
CREATE_WAIT_S: Final = 5  # POST /v1/sessions waits this long for the tab before answering 201
# shared: two tabs per enrolled profile (the extension refuses a third provision too).
DEVICE_CAPACITY: Final = protocol.DEVICE_TAB_CAPACITY

# -- the device socket -------------------------------------------------------------------------
# shared: the heartbeat interval told in `welcome`; Chrome stops an idle service worker after
# about 30 s, and an application frame every 22 s keeps it alive.
HEARTBEAT_INTERVAL_MS: Final = protocol.HEARTBEAT_INTERVAL_MS

# -- commands (the session agent) --------------------------------------------------------------
# shared: the extension learns each deadline from the frame (`readyBy`, `deadlineAt`), but its
# own bounds assume these values.
READ_DEADLINE_S: Final = protocol.READ_DEADLINE_S  # a read must answer within this
READY_DEADLINE_S: Final = protocol.READY_DEADLINE_S  # a prepared write must be ready within this
GRANT_DEADLINE_S: Final = protocol.GRANT_DEADLINE_S  # a write's run, from admission to result
SYNC_WAIT_S: Final = 20.0  # POST /commands waits this long for the outcome before answering 202
