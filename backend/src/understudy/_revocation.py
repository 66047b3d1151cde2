"""Revocations made by another process take effect in the running service within seconds.

`understudy keys revoke` and `understudy devices revoke` write the same database from another
process. Each new request re-reads its credential, but an open socket or a request already
waiting would otherwise carry on with the authority it had: writes ran on a revoked device's
socket for a minute. `RevocationWatch` asks the storage once a second whether another process may
have committed one (`change_marker()`: SQLite's `PRAGMA data_version`, which reads only the WAL
index; on PostgreSQL a count over the revocation columns); only then does it look up the
credentials the process is holding open: the device and session sockets, and the keys of
requests still waiting. A revoked device's sockets close with 4410; a revoked
key's waits end with 401.

The same check applies the operator's close requests (`understudy sessions close`, rows in
`close_requests`): each goes through the tenant coordinator's normal close, exactly as a
`DELETE /v1/sessions/{id}` would, and its outcome is recorded for the waiting CLI.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Final

from understudy._connection import CLOSE_REVOKED
from understudy._periodic import Periodic
from understudy._problems import ProblemError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from understudy._services import Services

log = logging.getLogger(__name__)
CHECK_INTERVAL_S: Final = 1.0  # wall-clock; a revocation takes effect within about this


class RevocationWatch:
    def __init__(self, services: Services) -> None:
        self.s = services
        # key digest -> what ends each of its waits
        self._waits: dict[str, set[Callable[[], None]]] = {}
        self._version: object = None
        self._loop = Periodic(
            self.check, every_s=CHECK_INTERVAL_S, log=log, failed="revocation check failed"
        )

    @contextlib.contextmanager
    def key_waits(self, digest: str, revoked: Callable[[], None]) -> Iterator[None]:
        """Call `revoked` if the API key with this digest is revoked while the block runs.

        A callback, not an event: waiting on an event would take a task of its own per request.
        """
        self._waits.setdefault(digest, set()).add(revoked)
        try:
            yield
        finally:
            waits = self._waits.get(digest)
            if waits is not None:
                waits.discard(revoked)
                if not waits:
                    del self._waits[digest]

    def start(self) -> None:
        self._version = self.s.db.storage.change_marker()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def check(self) -> None:
        """Apply revocations committed by other connections since the last check."""
        version = self.s.db.storage.change_marker()
        if version == self._version:
            return
        self._version = version
        await self.sweep()
        await self.apply_close_requests()

    async def apply_close_requests(self) -> None:
        """Close every session an operator asked to close, through the coordinator's close."""
        storage = self.s.db.storage
        with storage.read() as repos:
            pending = repos.close_requests.pending()
        for session_id in pending:
            with storage.read() as repos:
                row = repos.sessions.get(session_id)
            outcome = "not_found"
            if row is not None:
                try:
                    outcome = (await self.s.coordinator(row.tenant).delete(session_id)).status
                except ProblemError as exc:  # e.g. gone between the lookup and the turn
                    outcome = exc.code
            with storage.transaction() as tx:
                tx.close_requests.done(session_id, outcome, self.s.clock.now())
        await storage.durable()

    async def sweep(self) -> None:
        """Close the sockets of revoked devices and end the waits of revoked keys now.

        The operator API calls it right after revoking in this process (the change marker
        may not move for this process's own commits).
        """
        repos = self.s.db.storage.repos
        revoked: dict[tuple[str, str], bool] = {}  # (tenant, device) -> revoked, looked up once

        def is_revoked(tenant: str, device_id: str) -> bool:
            if (tenant, device_id) not in revoked:
                device = repos.devices.get(tenant, device_id)
                revoked[(tenant, device_id)] = device is None or device.revoked_at is not None
            return revoked[(tenant, device_id)]

        for (tenant, device_id), agent in list(self.s.device_agents.items()):
            if agent.connected and is_revoked(tenant, device_id):
                self.s.telemetry.emit(
                    "connection.closed",
                    kind="device",
                    reason="revoked",
                    tenant=tenant,
                    device=device_id,
                )
                await agent.close_current(CLOSE_REVOKED, "device revoked")
        for session_id, session_agent in list(self.s.session_agents.items()):
            if not session_agent.connected:
                continue
            row = repos.sessions.get(session_id)
            if row is None or row.device_id is None or not is_revoked(row.tenant, row.device_id):
                continue
            self.s.telemetry.emit(
                "connection.closed", kind="session", reason="revoked", tenant=row.tenant
            )
            await session_agent.close_current(CLOSE_REVOKED, "device revoked")
        for digest, waits in list(self._waits.items()):
            key_row = repos.api_keys.by_digest(digest)
            if key_row is None or key_row.revoked_at is not None:
                for end_wait in list(waits):
                    end_wait()
