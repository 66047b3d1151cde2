"""The storage contract: every engine behind `understudy._store._ports.Storage` passes these.

The `engine` fixture is parametrized over the implementations, SQLite (a file in the test's
temporary directory) and PostgreSQL (a fresh database on the session's throwaway cluster, see
`tests/support/pgcluster.py`); an engine is one entry in `ENGINES` that opens connections to a
fresh, empty database, and runs the same tests. `storage` is a migrated connection;
`engine.open()` gives another connection to the same data, for the tests where two writers race.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from understudy._store import Database
from understudy._store._postgres import PostgresStorage
from understudy._store.commands import NewCommand
from understudy._store.sessions import NewSession

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.support.pgcluster import PgCluster
    from understudy._store._ports import Storage


@dataclass
class Engine:
    """Connections to one fresh database of one implementation."""

    name: str
    connect: Callable[[], Storage]
    remove: Callable[[], None] = lambda: None
    opened: list[Storage] = field(default_factory=list)

    def open(self) -> Storage:
        storage = self.connect()
        self.opened.append(storage)
        return storage

    def close(self) -> None:
        try:
            for storage in self.opened:
                storage.close()
        finally:
            self.remove()


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    path = tmp_path / "contract.db"
    return Engine("sqlite", lambda: Database(path).storage)


def _postgresql(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    name = f"contract_{uuid.uuid4().hex[:12]}"
    url = cluster.create_schema(name)  # as empty as a new database, a hundred times cheaper
    return Engine(
        "postgresql",
        lambda: PostgresStorage(url, max_size=2),
        remove=lambda: cluster.drop_schema(name),
    )


ENGINES: dict[str, Callable[[pytest.FixtureRequest, Path], Engine]] = {
    "sqlite": _sqlite,
    "postgresql": _postgresql,
}


@pytest.fixture(params=sorted(ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    made = ENGINES[request.param](request, tmp_path)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def storage(engine: Engine) -> Storage:
    opened = engine.open()
    opened.migrate(1.0)
    return opened


def new_session(session_id: str = "s1", **overrides: Any) -> NewSession:
    values: dict[str, Any] = {
        "session_id": session_id,
        "tenant": "acme",
        "actor": "bot",
        "mode": "unattended",
        "status": "provisioning",
        "allowed_origins": ["https://example.com"],
        "created_at": 100.0,
        "expires_at": 1000.0,
        "idle_expires_at": 400.0,
        "device_id": "d1",
        "lease_id": f"lease-{session_id}",
        "lease_epoch": 1,
        "provision_deadline": 130.0,
        "capacity_held": True,
    }
    values.update(overrides)
    return NewSession(**values)


def new_command(command_id: str = "c1", session_id: str = "s1", **overrides: Any) -> NewCommand:
    values: dict[str, Any] = {
        "session_id": session_id,
        "command_id": command_id,
        "tenant": "acme",
        "actor": "bot",
        "name": "click",
        "kind": "write",
        "dry_run": False,
        "fingerprint": "fp",
        "request": {"selector": "#go"},
        "state": "preparing",
        "lease_epoch": 1,
        "browser_epoch": "be1",
        "admitted_at": 200.0,
        "ready_deadline": 210.0,
        "deadline": 230.0,
    }
    values.update(overrides)
    return NewCommand(**values)
