"""Navigations and popups the extension stopped on a session: deduplicated by id; payloads kept
for the newest 50, compact seen-id rows for the rest of the session's life (as for dialogs).

A record holds an origin and a cause, never a full URL; it is shown only to the tenant's consumer
in the session status and never reaches logs or telemetry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from understudy._store._seen import SeenRecords

if TYPE_CHECKING:
    from understudy._store._sql import Executor

KEEP_PAYLOADS = 50


def repository(sql: Executor) -> SeenRecords:
    """The blocked-navigations table as a `understudy._store._ports.SeenRecordRepository`."""
    return SeenRecords(sql, table="blocked_navigations", key="blocked_id", keep=KEEP_PAYLOADS)
