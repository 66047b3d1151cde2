"""Keeping this process's claim on its database while it runs.

At start-up the storage claims the database (`Storage.claim_service`); `ClaimWatch` calls
`keep_claim` once a second. On SQLite that is the data directory's lock, which lasts as long as
the process. On PostgreSQL every process is one node of several: the claim is the node's row in
`nodes` and `keep_claim` is its heartbeat (the others take the sockets of a node whose heartbeat
is old, `_node.py`). An engine may still raise `StorageInUseError` from `keep_claim` when another
process took the database meanwhile; this one then stops serving (`on_lost`) and the CLI exits
with code 1.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from understudy._periodic import Periodic
from understudy._store._errors import StorageInUseError

if TYPE_CHECKING:
    from collections.abc import Callable

    from understudy._store._storage import SqlStorage

CHECK_INTERVAL_S: Final = 1.0
log = logging.getLogger(__name__)


class ClaimWatch:
    """Checks the storage's service claim once a second (see the module docstring)."""

    def __init__(self, storage: SqlStorage, on_lost: Callable[[str], None]) -> None:
        self._storage = storage
        self._on_lost = on_lost
        self._loop = Periodic(
            self._check, every_s=CHECK_INTERVAL_S, log=log, failed="the service claim check failed"
        )
        self.lost: str | None = None  # why the claim went to another service, once it did

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _check(self) -> bool:
        try:
            # In a thread: reaching an unreachable server must not hold the event loop.
            await asyncio.to_thread(self._storage.keep_claim)
        except StorageInUseError as exc:
            self.lost = str(exc)
            log.critical("the database's service claim was lost: %s; stopping", exc)
            self._on_lost(self.lost)
            return False
        return True
