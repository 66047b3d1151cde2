"""`understudy copy-database`: move a stopped SQLite installation onto an empty PostgreSQL database.

The data directory's one-writer lock (`_lock.py`) is taken for the length of the copy, so the
command refuses while `understudy serve` runs there and no service can start on the source
halfway through; so is its copy lock, so no other CLI command writes to the source after the
snapshot (they are refused until the copy ends; the copy waits a few seconds for those under
way). The copy itself is `_store._copy.copy_sqlite_to_postgres`; this module maps its
refusals to exit codes and prints the per-table counts, as text or `--json`.

Exit codes (docs/operations.md, "Moving a SQLite installation to PostgreSQL"):

    0  copied, and every table's count on the target matches the source
    1  the copy failed and was rolled back (the target stays empty), or a count differs
    2  bad usage or configuration, no source database, or PostgreSQL cannot be reached
    3  a service holds the data directory (stop it first), or another CLI command kept its
       database open for longer than the copy waits
    4  the target holds data, or a node or another client is using it
    5  the source is not at this binary's schema version (or the target is at a newer one)
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from typing import TYPE_CHECKING, Final

from understudy._bootstrap import DB_FILE
from understudy._config import ConfigError, _database_url
from understudy._lock import (
    LOCK_FILE,
    DataDirInUseError,
    OperatorCommandsRunningError,
    lock_data_dir,
    lock_for_copy,
    unlock_data_dir,
)

if TYPE_CHECKING:
    from understudy._config import Settings
    from understudy._store._copy import CopyReport

EXIT_COPY_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_SOURCE_IN_USE: Final = 3
EXIT_TARGET_NOT_EMPTY: Final = 4
EXIT_SCHEMA_MISMATCH: Final = 5


def target_url(value: str) -> str:
    """`--to`: a PostgreSQL URL, checked as `UNDERSTUDY_DATABASE_URL` is (never echoed back)."""
    try:
        return _database_url(value, "--to")
    except ConfigError:
        raise argparse.ArgumentTypeError(
            "give a PostgreSQL URL with the database's name, like "
            "postgresql://understudy@db.example:5432/understudy (a database created empty)"
        ) from None


def run(settings: Settings, to: str | None, *, as_json: bool) -> int:
    """The command: copy, verify, report; the exit code (module docstring)."""
    # Here, not at the top: every other CLI command starts without loading the PostgreSQL driver.
    import psycopg

    from understudy._store._copy import (
        CopyFailedError,
        SchemaMismatchError,
        TargetNotEmptyError,
        copy_sqlite_to_postgres,
    )
    from understudy._store._errors import StorageUnavailableError

    url = to or settings.database_url
    if url is None:
        return _fail(
            "give the PostgreSQL database to copy into with --to postgresql://… (or set "
            "UNDERSTUDY_DATABASE_URL); create it empty first (createdb)",
            EXIT_USAGE,
        )
    source = settings.data_dir / DB_FILE
    if not source.is_file():
        return _fail(
            f"no database at {source}; point --data-dir (or UNDERSTUDY_DATA_DIR) at the SQLite "
            "service's data directory",
            EXIT_USAGE,
        )
    try:
        lock = lock_data_dir(settings.data_dir)
    except DataDirInUseError:
        return _fail(
            f"the SQLite database in {settings.data_dir} is in use by a running understudy "
            f"serve ({_holder(settings)}); stop the service first (SIGTERM), then copy: a copy "
            "of a running service would miss what it writes afterwards",
            EXIT_SOURCE_IN_USE,
        )
    except OSError as exc:
        return _fail(
            f"cannot take the lock of {settings.data_dir} ({exc.strerror or exc}); run the copy "
            "as the user the service runs as",
            EXIT_USAGE,
        )
    try:
        copy_lock = lock_for_copy(settings.data_dir)
    except OperatorCommandsRunningError as exc:
        unlock_data_dir(lock)
        return _fail(str(exc), EXIT_SOURCE_IN_USE)
    except OSError as exc:
        unlock_data_dir(lock)
        return _fail(
            f"cannot take the copy lock of {settings.data_dir} ({exc.strerror or exc}); run the "
            "copy as the user the service runs as",
            EXIT_USAGE,
        )
    try:
        report = copy_sqlite_to_postgres(source, url, now=time.time())
    except SchemaMismatchError as exc:
        return _fail(str(exc), EXIT_SCHEMA_MISMATCH)
    except TargetNotEmptyError as exc:
        return _fail(str(exc), EXIT_TARGET_NOT_EMPTY)
    except CopyFailedError as exc:
        return _fail(f"the copy failed: {exc}", EXIT_COPY_FAILED)
    except StorageUnavailableError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except sqlite3.Error as exc:
        return _fail(
            f"cannot read the SQLite database at {source} ({exc}); restore it from a backup",
            EXIT_USAGE,
        )
    except psycopg.Error as exc:  # the server went away between two steps, say
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return _fail(
            f"PostgreSQL failed during the copy ({reason}); nothing was kept", EXIT_COPY_FAILED
        )
    finally:
        unlock_data_dir(copy_lock)
        unlock_data_dir(lock)
    key = _master_key(settings)
    if as_json:
        print(json.dumps(_view(report, key), indent=2))
    else:
        print(_render(report, key))
    if not report.verified:
        wrong = ", ".join(c.table for c in report.tables if not c.ok)
        return _fail(
            f"verification failed: the row counts of {wrong} differ between the source and the "
            "target; do not start nodes on it; empty it (drop and create the database) and copy "
            "again",
            EXIT_COPY_FAILED,
        )
    return 0


def _fail(message: str, code: int) -> int:
    print(f"understudy: {message}", file=sys.stderr)
    return code


def _holder(settings: Settings) -> str:
    try:
        return (settings.data_dir / LOCK_FILE).read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def _master_key(settings: Settings) -> str:
    """Where the key that sealed the vault is: the nodes need the same one to open it."""
    if settings.master_key is not None:
        return "UNDERSTUDY_MASTER_KEY, as this command was given it"
    return str(settings.data_dir / "master.key")


def _view(report: CopyReport, key: str) -> dict[str, object]:
    from understudy._store._copy import NODE_TABLES

    return {
        "source": report.source,
        "target": report.target,
        "schemaVersion": report.schema_version,
        "seconds": round(report.seconds, 3),
        "verified": report.verified,
        "tables": [
            {"table": c.table, "source": c.source, "target": c.target, "ok": c.ok}
            for c in report.tables
        ],
        "leftForNodes": list(NODE_TABLES),
        "notCopied": [{"table": c.table, "source": c.source} for c in report.not_copied],
        "masterKey": key,
    }


def _render(report: CopyReport, key: str) -> str:
    from understudy._store._copy import NODE_TABLES

    width = max(len(c.table) for c in report.tables)
    lines = [
        f"copied {report.source} (schema version {report.schema_version}) to {report.target} "
        f"in {report.seconds:.2f} s",
        f"{'table':<{width}}  {'source':>8}  {'target':>8}",
        *(
            f"{c.table:<{width}}  {c.source:>8}  {c.target:>8}  {'ok' if c.ok else 'MISMATCH'}"
            for c in report.tables
        ),
        f"left for the nodes to fill: {', '.join(NODE_TABLES)} (per-node state on PostgreSQL)",
    ]
    lines += [
        f"not copied: {c.table} held {c.source} row(s) of per-node state" for c in report.not_copied
    ]
    lines += [
        f"vault secrets were copied sealed: start every node with the same master key ({key}; "
        "give each node UNDERSTUDY_MASTER_KEY, or that master.key in its data directory)",
        "next: set UNDERSTUDY_DATABASE_URL to the target and start the nodes (understudy serve)",
    ]
    return "\n".join(lines)
