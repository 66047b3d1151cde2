"""Build the services of one process from `Settings`: data directory, database, keys, telemetry.

The database is the SQLite file `understudy.db` in the data directory, or the PostgreSQL
database named by `UNDERSTUDY_DATABASE_URL` when it is set; this is the one place that chooses.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from understudy._clock import SystemClock
from understudy._config import ensure_master_key
from understudy._lock import lock_data_dir, unlock_data_dir
from understudy._security import Keys
from understudy._services import Services
from understudy._store import Database, check_supported
from understudy._telemetry import Telemetry, install_server_log_filter

if TYPE_CHECKING:
    from pathlib import Path

    from understudy._clock import Clock
    from understudy._config import Settings

DB_FILE = "understudy.db"


def open_database(settings: Settings) -> Database:
    """The configured database, opened (not migrated).

    Raises:
        StorageUnavailableError: PostgreSQL cannot be reached.
        OSError, sqlite3.Error: the SQLite file cannot be created or opened.
    """
    if settings.database_url is not None:
        from understudy._store._postgres import PostgresDatabase

        return PostgresDatabase(settings.database_url, node_id=settings.node_id)
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = settings.data_dir / DB_FILE
    db = Database(
        path,
        synchronous=settings.sqlite_synchronous,
        group_commit=settings.sqlite_group_commit,
    )
    os.chmod(path, 0o600)
    return db


def missing_database(settings: Settings) -> Path | None:
    """The SQLite file a management command needs when it does not exist yet, else None.

    A PostgreSQL database is created by its operator, so it is never "missing" here.
    """
    if settings.database_url is not None:
        return None
    path = settings.data_dir / DB_FILE
    return None if path.is_file() else path


def build_services(settings: Settings, clock: Clock | None = None) -> Services:
    """The services of one serving process; they hold the data directory's lock until stopped.

    Raises:
        DataDirInUseError: another service holds the data directory.
        StorageUnavailableError: PostgreSQL cannot be reached.
        SchemaTooNewError: the database was migrated by a newer binary.
        ConfigError: the master key file is unusable.
    """
    clock = clock or SystemClock()
    lock = lock_data_dir(settings.data_dir)
    try:
        db = open_database(settings)
        try:
            # Refuse a newer database before serving anything (start-up would only fail later).
            check_supported(db)
            db.storage.claim_service()
            keys = Keys.from_master(ensure_master_key(settings))
        except BaseException:
            db.close()
            raise
    except BaseException:
        unlock_data_dir(lock)
        raise
    telemetry = Telemetry(settings.telemetry_path, keys, clock=clock.now)
    install_server_log_filter()
    return Services(
        settings=settings, db=db, clock=clock, keys=keys, telemetry=telemetry, data_dir_lock=lock
    )
