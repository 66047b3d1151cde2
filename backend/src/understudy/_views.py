"""Session rows as the API shows them: the live `Session` or the terminal `SessionTombstone`.

Never the profile-state key or its hash.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from understudy._clock import utc
from understudy._lifecycle import SessionState
from understudy.generated import models as m

if TYPE_CHECKING:
    from understudy._store.sessions import SessionRow


at = utc


def session_view(
    row: SessionRow,
    dialogs: list[dict[str, Any]] | None = None,
    blocked: list[dict[str, Any]] | None = None,
) -> m.Session:
    return m.Session(
        session_id=uuid.UUID(row.session_id),
        mode=row.mode,  # type: ignore[arg-type]
        status=row.status,  # type: ignore[arg-type]
        device_id=row.device_id,
        allowed_origins=row.allowed_origins,
        created_at=at(row.created_at),
        expires_at=at(row.expires_at),
        idle_expires_at=at(row.idle_expires_at),
        last_command_at=at(row.last_command_at) if row.last_command_at is not None else None,
        command_count=row.command_count,
        writes_blocked=row.writes_blocked_reason is not None,
        writes_blocked_reason=row.writes_blocked_reason,  # type: ignore[arg-type]
        writes_blocked_command_id=(
            uuid.UUID(row.writes_blocked_command) if row.writes_blocked_command else None
        ),
        dialogs=[m.DialogRecord.model_validate(d) for d in dialogs or []],
        blocked_navigations=[m.BlockedNavigation.model_validate(b) for b in blocked or []],
    )


def tombstone_view(row: SessionRow) -> m.SessionTombstone:
    return m.SessionTombstone(
        session_id=uuid.UUID(row.session_id),
        status=row.status,  # type: ignore[arg-type]
        ended_at=at(row.ended_at or row.created_at),
        reason=row.end_reason or "deleted",  # type: ignore[arg-type]
    )


def is_terminal(row: SessionRow) -> bool:
    return SessionState(row.status).terminal
