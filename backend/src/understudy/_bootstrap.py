"""Build the services of one process from `Settings`: data directory, SQLite, keys, telemetry."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from understudy._clock import SystemClock
from understudy._config import ensure_master_key
from understudy._security import Keys
from understudy._services import Services
from understudy._store import Database, check_supported
from understudy._telemetry import Telemetry, install_server_log_filter

if TYPE_CHECKING:
    from understudy._clock import Clock
    from understudy._config import Settings

DB_FILE = "understudy.db"


def open_database(settings: Settings) -> Database:
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = settings.data_dir / DB_FILE
    db = Database(
        path,
        synchronous=settings.sqlite_synchronous,
        group_commit=settings.sqlite_group_commit,
    )
    os.chmod(path, 0o600)
    return db


def build_services(settings: Settings, clock: Clock | None = None) -> Services:
    clock = clock or SystemClock()
    db = open_database(settings)
    try:
        # Refuse a newer database before serving anything (start-up would only fail later).
        check_supported(db)
    except BaseException:
        db.close()
        raise
    keys = Keys.from_master(ensure_master_key(settings))
    telemetry = Telemetry(settings.telemetry_path, keys, clock=clock.now)
    install_server_log_filter()
    return Services(settings=settings, db=db, clock=clock, keys=keys, telemetry=telemetry)
