"""A chosen set of end-to-end API tests, run again on PostgreSQL every time.

The tests are the SQLite suite's own, imported here; the `backend` fixture below points them at
a backend whose data lives in a fresh PostgreSQL database (`pg_backend`). They cover a governed
write's durable sequence and its restart replay, idempotent and concurrent creates, the exact
quotas, single-use tickets and revocation by another process (through the storage's change
marker). Any other API module runs on PostgreSQL with `UNDERSTUDY_TEST_ENGINE=postgresql`; the
few that read the SQLite file itself (WAL checkpoints, file bytes) only make sense on SQLite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.backend.api.test_commands import (
    test_a_write_runs_the_durable_sequence_once,
    test_restart_replays_completed_results_and_marks_started_writes_unknown,
    test_same_command_id_with_another_fingerprint_conflicts,
)
from tests.backend.api.test_quotas import test_session_creation_is_10_per_minute_per_actor_then_429
from tests.backend.api.test_revocation import (
    test_revoking_a_device_closes_its_device_and_session_sockets,
)
from tests.backend.api.test_sessions import (
    test_delete_persists_closing_then_the_fenced_ack_makes_it_terminal,
    test_two_concurrent_creates_with_one_key_make_one_session,
    test_unattended_create_provisions_a_tab_and_returns_201,
)
from tests.backend.api.test_tickets import (
    test_replayed_device_ticket_is_refused_and_the_first_socket_keeps_working,
)
from understudy._store._postgres import PostgresDatabase

if TYPE_CHECKING:
    from tests.backend.conftest import Backend

__all__ = [
    "test_a_write_runs_the_durable_sequence_once",
    "test_delete_persists_closing_then_the_fenced_ack_makes_it_terminal",
    "test_replayed_device_ticket_is_refused_and_the_first_socket_keeps_working",
    "test_restart_replays_completed_results_and_marks_started_writes_unknown",
    "test_revoking_a_device_closes_its_device_and_session_sockets",
    "test_same_command_id_with_another_fingerprint_conflicts",
    "test_session_creation_is_10_per_minute_per_actor_then_429",
    "test_two_concurrent_creates_with_one_key_make_one_session",
    "test_unattended_create_provisions_a_tab_and_returns_201",
]


@pytest.fixture
def backend(pg_backend: Backend) -> Backend:
    """Every imported test's backend, on PostgreSQL."""
    assert isinstance(pg_backend.services.db, PostgresDatabase)
    return pg_backend
