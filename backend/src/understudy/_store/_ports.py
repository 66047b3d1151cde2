"""The storage seam: one repository protocol per aggregate, and the `Storage` that hands them out.

Every change is a method that names what it changes (no column dictionaries), so an engine can
implement each one as one statement and the contract suite (`tests/backend/storage/`) can pin
its behaviour. The SQLite engine (`_storage.SqliteStorage`) implements them with portable SQL
(`_sql.py`); a second engine brings its own `Executor` and `Dialect` for the same repositories,
or its own classes, and must pass the same suite.

Rules every implementation keeps:

- Methods are synchronous and run inside the caller's `transaction()`; a transaction never spans
  an `await` (actor rule 3). Nothing a turn decided may leave the process before `durable()`.
- A taken unique key raises `ConflictError`; the transaction it happened in is then rolled back
  by letting the error leave the `transaction()` block.
- A change to a row that does not exist is not an error: it returns None (or False).
- Status values are the enums' string values; the caller validated the transition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from understudy._store._errors import ConflictError, StorageError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from understudy._store._sql import Dialect
    from understudy._store.close_requests import CloseRequest
    from understudy._store.cluster import SqlActors, SqlNodes, SqlOutbox
    from understudy._store.commands import (
        CommandOutcome,
        CommandRow,
        GrantCondition,
        NewCommand,
    )
    from understudy._store.credentials import ApiKey, Device
    from understudy._store.operators import OperatorToken
    from understudy._store.sessions import NewSession, SessionRow

__all__ = [
    "ApiKeyRepository",
    "CloseRequestRepository",
    "CommandRepository",
    "ConflictError",
    "DeviceRepository",
    "OperatorRepository",
    "QuotaRepository",
    "Repositories",
    "SeenRecordRepository",
    "SessionRepository",
    "Storage",
    "StorageError",
    "TicketRepository",
    "VaultRepository",
]


class ApiKeyRepository(Protocol):
    """Tenants and their consumer API keys (digests only)."""

    def add(self, *, digest: str, key_id: str, tenant: str, actor: str, now: float) -> None:
        """Store a key. Raises `ConflictError` when its digest or id exists already."""
        ...

    def by_digest(self, digest: str) -> ApiKey | None: ...

    def revoke(self, key_id: str, now: float) -> bool:
        """Revoke an active key; False when there is none by that id (or it is revoked)."""
        ...

    def all(self) -> list[ApiKey]:
        """Every key, revoked ones too, by tenant, actor, creation."""
        ...

    def tenants(self) -> list[str]:
        """Every tenant that has a key or a device, sorted."""
        ...


class DeviceRepository(Protocol):
    """Enrolled devices, their credential digests and connection state."""

    def add(self, *, tenant: str, device_id: str, digest: str, now: float) -> None:
        """Enroll a device. Raises `ConflictError` on a taken id or credential digest."""
        ...

    def ensure(self, *, tenant: str, device_id: str, digest: str, now: float) -> None:
        """Enroll or re-key a device from configuration (idempotent)."""
        ...

    def rotate_credential(self, tenant: str, device_id: str, digest: str) -> bool:
        """A new credential digest for an unrevoked device; False when there is none."""
        ...

    def get(self, tenant: str, device_id: str) -> Device | None: ...

    def by_digest(self, digest: str) -> Device | None: ...

    def of_tenant(self, tenant: str, *, include_revoked: bool = False) -> list[Device]:
        """The tenant's devices by id: unrevoked ones, or every one ever enrolled."""
        ...

    def all(self) -> list[Device]: ...

    def online_capacity(self) -> tuple[int, int]:
        """(online unrevoked devices, tabs that sessions hold on them)."""
        ...

    def revoke(self, tenant: str, device_id: str, now: float) -> bool:
        """Revoke an unrevoked device (it goes offline too); False when there is none."""
        ...

    def connected(
        self,
        tenant: str,
        device_id: str,
        *,
        now: float,
        browser_epoch: str,
        protocol_versions: list[int],
        capabilities: list[str],
        local_policy: dict[str, Any],
    ) -> int | None:
        """Record a hello; the new connection epoch (one more than before), None if unknown."""
        ...

    def seen(self, tenant: str, device_id: str, now: float) -> None:
        """A heartbeat: online, last seen at `now`."""
        ...

    def offline(self, tenant: str, device_id: str) -> None: ...

    def assigned(self, tenant: str, device_id: str, now: float) -> None:
        """A session was placed on the device at `now`."""
        ...


class SessionRepository(Protocol):
    """Sessions, their leases and tombstones. Changes return the row after them (or None)."""

    def insert(self, new: NewSession) -> None:
        """Create a session. Raises `ConflictError` on a taken id or (tenant, idempotency key)."""
        ...

    def get(self, session_id: str) -> SessionRow | None: ...

    def require(self, session_id: str) -> SessionRow:
        """The row of a session known to exist. Raises `LookupError` when it is missing."""
        ...

    def by_idempotency_key(self, tenant: str, key: str) -> SessionRow | None: ...

    def by_lease(self, lease_id: str) -> SessionRow | None: ...

    def holding_capacity(self, tenant: str, device_id: str) -> list[SessionRow]:
        """Sessions that hold one of the device's tabs, oldest first."""
        ...

    def unsettled(self, tenant: str) -> list[SessionRow]:
        """Non-terminal sessions, and terminal ones still holding capacity."""
        ...

    def next_deadline(self, tenant: str, *, offline_after_s: float) -> float | None:
        """The tenant's earliest deadline (expiry, provisioning, grace, heartbeat overdue)."""
        ...

    def listing(self, *, tenant: str | None = None, ended: bool = False) -> list[SessionRow]:
        """Unfinished sessions (with `ended`, all), of one tenant or all, oldest first."""
        ...

    def counts_by_status(self) -> dict[str, int]:
        """Sessions per non-terminal status."""
        ...

    def tenants_with_unsettled(self) -> list[str]: ...

    def record_command(
        self, session_id: str, *, now: float, idle_ttl_s: float
    ) -> SessionRow | None:
        """Count an admitted command; idle expiry becomes min(hard expiry, now + idle TTL)."""
        ...

    def mark_connected(self, session_id: str, *, status: str) -> SessionRow | None:
        """The tab is held again: set `status`, clear the grace deadline."""
        ...

    def provisioned(
        self, session_id: str, *, status: str, tab_id: int | None, browser_epoch: str
    ) -> SessionRow | None:
        """The tab opened: record it; clear provisioning and grace deadlines."""
        ...

    def attached(
        self,
        session_id: str,
        *,
        status: str,
        device_id: str,
        lease_id: str,
        lease_epoch: int,
        tab_id: int,
        browser_epoch: str,
    ) -> SessionRow | None:
        """A person attached a tab: record the lease; the session holds capacity."""
        ...

    def rebind_epoch(
        self,
        session_id: str,
        *,
        lease_epoch: int,
        browser_epoch: str,
        writes_blocked_reason: str,
        grace_deadline: float,
        status: str | None = None,
    ) -> SessionRow | None:
        """The browser restarted: new lease epoch, writes blocked, grace deadline (and status)."""
        ...

    def start_grace(
        self, session_id: str, *, grace_deadline: float, status: str | None = None
    ) -> SessionRow | None:
        """Set the grace deadline (and the status, when given)."""
        ...

    def release_capacity(self, session_id: str) -> SessionRow | None: ...

    def block_writes(self, session_id: str, *, reason: str, command_id: str) -> SessionRow | None:
        """Writes are refused from now on, for `reason`, caused by `command_id`."""
        ...

    def begin_close(
        self,
        session_id: str,
        *,
        status: str,
        end_intent: str,
        end_reason: str,
        grace_deadline: float,
    ) -> SessionRow | None:
        """Closing starts; the provisioning deadline is cleared."""
        ...

    def finish(self, session_id: str, *, status: str, ended_at: float) -> SessionRow | None:
        """The close is settled: terminal status, capacity released, grace deadline cleared."""
        ...

    def expire(
        self, session_id: str, *, status: str, ended_at: float, reason: str
    ) -> SessionRow | None: ...

    def lose(
        self,
        session_id: str,
        *,
        status: str,
        ended_at: float,
        reason: str,
        keep_capacity_until: float | None,
    ) -> SessionRow | None:
        """Lost. Capacity released, or (with `keep_capacity_until`) kept until that deadline."""
        ...


class CommandRepository(Protocol):
    """The command journal: one row per (session, command id). Changes return the row after."""

    def insert(self, new: NewCommand) -> CommandRow:
        """Journal a command and return its row. Raises `ConflictError` when (session, command
        id) exists."""
        ...

    def get(self, session_id: str, command_id: str) -> CommandRow | None: ...

    def admission(
        self, session_id: str, command_id: str
    ) -> tuple[CommandRow | None, list[CommandRow]]:
        """In one statement: the earlier admission of `command_id` (or None), and the session's
        other unsettled commands, oldest admission first."""
        ...

    def next_due(self, session_id: str) -> float | None:
        """When the session's earliest open command is due: its admission if it is of an older
        lease epoch than the session's, its ready deadline while preparing, else its deadline
        (None: no open command)."""
        ...

    def open_commands(self, session_id: str) -> list[CommandRow]:
        """The session's unsettled commands, oldest admission first."""
        ...

    def sessions_with_open_commands(self) -> list[str]: ...

    def readmit(
        self,
        session_id: str,
        command_id: str,
        *,
        state: str,
        attempt: int,
        lease_epoch: int,
        browser_epoch: str | None,
        request: dict[str, Any] | None,
        admitted_at: float,
        ready_deadline: float | None,
        deadline: float,
    ) -> CommandRow | None:
        """A retry of a command that never ran; clears its error and completion."""
        ...

    def grant(
        self,
        session_id: str,
        command_id: str,
        *,
        state: str,
        when: GrantCondition | None = None,
    ) -> CommandRow | None:
        """Granted: set `state`, clear the ready deadline; with `when`, only a row in its state
        and lease epoch, of a session of that lease epoch, and not of its excluded name (None
        otherwise)."""
        ...

    def settle(
        self,
        session_id: str,
        command_id: str,
        *,
        state: str,
        completed_at: float,
        outcome: CommandOutcome | None = None,
        from_state: str | None = None,
    ) -> CommandRow | None:
        """Terminal `state`; with an `outcome`, its columns are stored and the request dropped.
        With `from_state`, only a row in that state changes (None otherwise)."""
        ...


class TicketRepository(Protocol):
    def consume(self, jti: str, expires_at: float, now: float) -> bool:
        """True the first time `jti` is seen, False on every replay (atomic across writers)."""
        ...


class QuotaRepository(Protocol):
    def take(self, scope: str, subject: str, limit: int, now: float) -> float | None:
        """Count one use in the current one-minute window; None when within `limit`, else the
        seconds until the window resets (a refused use is not counted). Exact under concurrent
        writers: the decision and the count are one statement."""
        ...

    def take_all(self, uses: list[tuple[str, str, int]], now: float) -> list[float | None]:
        """`take` for several (scope, subject, limit), each scope once, in one statement; the
        uses that fit are counted even when another is refused (roll the transaction back to
        uncount them)."""
        ...

    def used(self, scope: str, subject: str, now: float) -> int:
        """Uses counted in the window holding `now`."""
        ...


class VaultRepository(Protocol):
    """Wrapped tenant data keys and sealed secrets: bytes only, never plaintext."""

    def wrapped_key(self, tenant: str) -> bytes | None: ...

    def wrapped_keys(self) -> list[tuple[str, bytes]]: ...

    def add_wrapped_key(self, tenant: str, wrapped: bytes, now: float) -> None:
        """The tenant's first key. Raises `ConflictError` when it has one."""
        ...

    def replace_wrapped_key(
        self, tenant: str, wrapped: bytes, *, created_at: float | None = None
    ) -> bool:
        """A new wrapping (creation time kept) or a fresh key (`created_at`); False if none."""
        ...

    def put_secret(self, tenant: str, name: str, sealed: bytes, now: float) -> None:
        """Store or replace a sealed secret."""
        ...

    def sealed(self, tenant: str, name: str) -> bytes | None: ...

    def sealed_all(self, tenant: str) -> list[tuple[str, bytes]]: ...

    def exists(self, tenant: str, name: str) -> bool: ...

    def names(self, tenant: str) -> list[str]: ...

    def delete(self, tenant: str, name: str) -> bool: ...


class OperatorRepository(Protocol):
    """Operator tokens (digests only) and per-tenant settings."""

    def add_token(self, *, digest: str, token_id: str, name: str, now: float) -> None:
        """Store a token. Raises `ConflictError` when its digest or id exists already."""
        ...

    def token_by_digest(self, digest: str) -> OperatorToken | None: ...

    def any_active(self) -> bool: ...

    def revoke_token(self, token_id: str, now: float) -> bool: ...

    def tokens(self) -> list[OperatorToken]: ...

    def unattended_flag(self, tenant: str) -> bool: ...

    def set_unattended_flag(self, tenant: str, enabled: bool, now: float) -> None: ...


class CloseRequestRepository(Protocol):
    """Close requests the operator CLI leaves for the running service."""

    def request(self, session_id: str, now: float) -> None:
        """Ask for a close; asking again re-opens an applied request."""
        ...

    def pending(self) -> list[str]: ...

    def get(self, session_id: str) -> CloseRequest | None: ...

    def done(self, session_id: str, outcome: str, now: float) -> bool: ...


class SeenRecordRepository(Protocol):
    """Records seen on a session (dialogs, blocked navigations), deduplicated by id."""

    def record(self, session_id: str, record_id: str, payload: dict[str, Any], now: float) -> bool:
        """Store a record; False when its id was seen before (its payload is not replaced)."""
        ...

    def newest(self, session_id: str) -> list[dict[str, Any]]:
        """Payloads of the newest records (a fixed number), newest first; ties in insertion
        order."""
        ...

    def seen_count(self, session_id: str) -> int: ...


class Repositories(Protocol):
    """Every repository, bound to one transaction (or, from `Storage.read`, to plain reads)."""

    @property
    def api_keys(self) -> ApiKeyRepository: ...
    @property
    def devices(self) -> DeviceRepository: ...
    @property
    def sessions(self) -> SessionRepository: ...
    @property
    def commands(self) -> CommandRepository: ...
    @property
    def tickets(self) -> TicketRepository: ...
    @property
    def quotas(self) -> QuotaRepository: ...
    @property
    def vault(self) -> VaultRepository: ...
    @property
    def operators(self) -> OperatorRepository: ...
    @property
    def close_requests(self) -> CloseRequestRepository: ...
    @property
    def dialogs(self) -> SeenRecordRepository: ...
    @property
    def blocked(self) -> SeenRecordRepository: ...
    # The rows of several nodes (`cluster.py`): one portable implementation serves every engine.
    @property
    def actors(self) -> SqlActors: ...
    @property
    def outbox(self) -> SqlOutbox: ...
    @property
    def nodes(self) -> SqlNodes: ...


class Storage(Protocol):
    """An engine: transactions that yield repositories, durability, the schema."""

    @property
    def dialect(self) -> Dialect: ...

    def transaction(self) -> AbstractContextManager[Repositories]:
        """One atomic unit; nested uses join the outer one. Durable after `durable()` returns."""
        ...

    def read(self) -> AbstractContextManager[Repositories]:
        """Repositories for reads outside a turn (they see committed data)."""
        ...

    async def durable(self) -> None:
        """Return once every transaction taken so far is committed."""
        ...

    def migrate(self, now: float) -> list[int]:
        """Apply pending migrations; the versions applied."""
        ...

    def schema_version(self) -> int: ...

    def close(self) -> None: ...
