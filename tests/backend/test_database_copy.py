"""`understudy copy-database`: a stopped SQLite installation moved onto an empty PostgreSQL one.

A real installation is made through the service and the CLI (keys, operator tokens, devices with
their local origin policy, a vaulted secret, the durable unattended flag, sessions with commands,
dialogs, blocked navigations, a close request, quota counters, consumed tickets), stopped and
copied; then a PostgreSQL node serves it: the key, the device credential and the secret work, and
the history reads the same. Each refusal leaves both databases as they were; a failure halfway
leaves the target empty; a write whose outcome was pending answers on the PostgreSQL node exactly
as after a restart of the SQLite service.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import psycopg
import pytest

from tests.backend.conftest import (
    Backend,
    post_create,
    start_backend,
    stop_backend,
    unattended,
)
from tests.backend.test_cli import SETTINGS_VARIABLES, make_newer
from tests.support.simdevice import Behaviour, SimulatedDevice
from understudy import _lock
from understudy._bootstrap import DB_FILE
from understudy._clock import ManualClock
from understudy._store import LATEST, _copy
from understudy._store._copy import COPIED_TABLES, NODE_TABLES, VERSIONS_TABLE
from understudy._store._postgres import PostgresStorage
from understudy.cli import main
from understudy.generated import models as m

if TYPE_CHECKING:
    from pathlib import Path

PLAINTEXT = "copy-suite plaintext 9Rk2 staple"
POLICY = {"mode": "allowlist", "origins": ["https://example.com", "https://shop.example"]}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in list(os.environ):
        if variable.startswith("UNDERSTUDY_") or variable in SETTINGS_VARIABLES:
            monkeypatch.delenv(variable)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def run_async(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The CLI in a thread, beside a service on this event loop (another process's worth)."""
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def copy(
    capsys: pytest.CaptureFixture[str], data_dir: Path, url: str, *extra: str
) -> tuple[int, str, str]:
    return run(capsys, "copy-database", "--data-dir", str(data_dir), "--to", url, *extra)


def pg_counts(url: str) -> dict[str, int]:
    """Rows per table of the target (tables that exist)."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        ]
        counts = {}
        for table in tables:
            found = conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()  # noqa: S608
            assert found is not None
            counts[table] = int(found[0])
    return counts


def data_counts(url: str) -> dict[str, int]:
    counts = pg_counts(url)
    return {t: counts[t] for t in (*COPIED_TABLES, *NODE_TABLES) if t in counts}


def sqlite_rows(path: Path, table: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
        columns = [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]
        names = ", ".join(f'"{c}"' for c in sorted(columns))
        rows = db.execute(f'SELECT {names} FROM "{table}"').fetchall()  # noqa: S608
    return sorted(rows, key=repr)


def pg_rows(url: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        columns = [
            row[0]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = %s",
                (table,),
            )
        ]
        names = ", ".join(f'"{c}"' for c in sorted(columns))
        rows = conn.execute(f'SELECT {names} FROM "{table}"')  # noqa: S608
        return sorted((tuple(row) for row in rows), key=repr)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def content(path: Path) -> list[str]:
    """Every schema object and row of a SQLite database, as SQL text (while a service runs)."""
    with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
        return list(db.iterdump())


def sqlite_write(path: Path, statement: str, params: tuple[Any, ...] = ()) -> None:
    """One committed change to a stopped installation's file; the connection closed after it."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute(statement, params)


def printed(out: str, label: str) -> str:
    match = re.search(rf"^{label}:\s+(\S+)$", out, re.MULTILINE)
    assert match is not None, out
    return match[1]


def without_age(listing: str) -> list[dict[str, Any]]:
    """A `--json` session listing without the age, which moves with the wall clock."""
    return [{k: v for k, v in s.items() if k != "age"} for s in json.loads(listing)]


@pytest.fixture
def installation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A stopped installation made with the CLI alone: a key, a device and a secret."""
    data_dir = tmp_path / "data"
    cli = ("--data-dir", str(data_dir))
    assert run(capsys, "migrate", *cli)[0] == 0
    assert run(capsys, "keys", "create", "--tenant", "acme", "--actor", "bot", *cli)[0] == 0
    assert run(capsys, "devices", "enroll", "--tenant", "acme", "--device", "d1", *cli)[0] == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(PLAINTEXT))
    assert run(capsys, "secrets", "put", "--tenant", "acme", "--name", "pw", *cli)[0] == 0
    return data_dir


def empty(url: str) -> bool:
    """Every table of the data (and the per-node ones) on the target holds no row."""
    counts = data_counts(url)
    return set(counts) == {*COPIED_TABLES, *NODE_TABLES} and not any(counts.values())


# -- a populated installation ----------------------------------------------------------------------


async def populate(
    backend: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Every kind of row a running installation has, made through the CLI and the service."""
    cli = ("--data-dir", str(backend.settings.data_dir))
    _, out, _ = await run_async(
        capsys, "keys", "create", "--tenant", "acme", "--actor", "bot", *cli
    )
    key = printed(out, "api key")
    _, out, _ = await run_async(capsys, "operator-tokens", "create", "--name", "ops", *cli)
    operator = printed(out, "operator token")
    _, out, _ = await run_async(
        capsys, "devices", "enroll", "--tenant", "acme", "--device", "laptop-2", *cli
    )
    spare_credential = printed(out, "credential")
    monkeypatch.setattr("sys.stdin", io.StringIO(PLAINTEXT))
    code, _, err = await run_async(
        capsys, "secrets", "put", "--tenant", "acme", "--name", "login-password", *cli
    )
    assert code == 0, err

    device = await backend.device(
        behaviour=Behaviour(
            local_origin_policy=POLICY,
            page_blocks={"kind": "popup", "origin": "https://elsewhere.example", "cause": "popup"},
        )
    )
    async with httpx.AsyncClient(
        base_url=backend.url, headers={"Authorization": f"Bearer {operator}"}, timeout=10
    ) as ops:
        flag = await ops.put("/v1/operator/tenants/acme/settings", json={"unattendedEnabled": True})
        assert flag.status_code == 200, flag.text
    async with backend.client(key) as http:
        sessions = []
        # Two at once on one device: disjoint origins, distinct profiles.
        for origin, profile in (("https://example.com", "a"), ("https://shop.example", "b")):
            body = unattended([origin], profile, deviceId="laptop-1")
            created = await post_create(backend, http, body)
            assert created.status_code == 201, created.text
            sessions.append(created.json()["sessionId"])
        first, live = sessions
        commands = []
        for sid in sessions:
            for command in (
                {"name": "snapshot"},
                {"name": "click", "ref": "g1e1"},
                {"name": "fill_secret", "ref": "g1e3", "secretRef": "vault:login-password"},
            ):
                body = {"commandId": str(uuid.uuid4()), "command": command}
                done = await http.post(f"/v1/sessions/{sid}/commands", json=body)
                assert done.status_code == 200, done.text
                commands.append((sid, body["commandId"]))
        lease = next(lease for lease in device.leases.values() if lease.session_id == live)
        await device.send_dialog(
            live,
            {
                "dialogId": str(uuid.uuid4()),
                "dialogType": "alert",
                "message": "hello",
                "accepted": True,
                "openedAt": "2026-11-30T09:00:00Z",
                "delivery": "delivered",
            },
        )
        await device.wait_for(
            lambda: any(isinstance(f, m.SessionServerDialogAck) for f in lease.session_frames)
        )
        code, _, err = await run_async(capsys, "sessions", "close", first, "--wait", "10", *cli)
        assert code == 0, err
        await backend.until(lambda: backend.session_status(first) == "closed", "first closed")
        answers = {sid: (await http.get(f"/v1/sessions/{sid}")).json() for sid in sessions}
        polled = {
            (sid, cid): (await http.get(f"/v1/sessions/{sid}/commands/{cid}")).json()
            for sid, cid in commands
        }
    assert device.secrets_seen == [PLAINTEXT, PLAINTEXT]
    assert answers[live]["dialogs"] and answers[live]["blockedNavigations"]
    return {
        "key": key,
        "spare_credential": spare_credential,
        "first": first,
        "live": live,
        "sessions": answers,
        "commands": polled,
    }


async def test_a_populated_installation_copies_whole_and_serves_on_postgresql(
    tmp_path: Path,
    postgresql_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = ManualClock()
    sqlite = await start_backend(tmp_path, clock)
    try:
        made = await populate(sqlite, capsys, monkeypatch)
    finally:
        await stop_backend(sqlite)
    data_dir = sqlite.settings.data_dir
    source = data_dir / DB_FILE
    cli = ("--data-dir", str(data_dir))
    _, listed_on_sqlite, _ = run(capsys, "sessions", "list", "--all", "--json", *cli)
    _, keys_on_sqlite, _ = run(capsys, "keys", "list", "--json", *cli)
    before = file_digest(source)
    expected = {t: len(sqlite_rows(source, t)) for t in COPIED_TABLES}
    # Every table of the data has rows: the copy of each is checked, not just its absence.
    assert all(expected.values()), expected

    code, out, err = copy(capsys, data_dir, postgresql_url, "--json")

    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["verified"] is True
    assert report["schemaVersion"] == LATEST
    assert {t["table"]: (t["source"], t["target"], t["ok"]) for t in report["tables"]} == {
        t: (n, n, True) for t, n in expected.items()
    }
    assert report["leftForNodes"] == ["actors", "outbox", "nodes"]
    assert report["masterKey"] == str(data_dir / "master.key")
    for table in COPIED_TABLES:  # every value, with its type: REAL, INTEGER, BLOB, TEXT/JSON
        assert pg_rows(postgresql_url, table) == sqlite_rows(source, table), table
    assert {t: n for t, n in data_counts(postgresql_url).items() if t in NODE_TABLES} == {
        "actors": 0,
        "outbox": 0,
        "nodes": 0,
    }
    assert file_digest(source) == before  # read, never written

    # The history lists the same from the new database, before any node runs on it.
    monkeypatch.setenv("UNDERSTUDY_DATABASE_URL", postgresql_url)
    assert without_age(run(capsys, "sessions", "list", "--all", "--json", *cli)[1]) == (
        without_age(listed_on_sqlite)
    )
    assert run(capsys, "keys", "list", "--json", *cli)[1] == keys_on_sqlite
    monkeypatch.delenv("UNDERSTUDY_DATABASE_URL")

    # A node on the copy, with the data directory's master key: the key, the device credential
    # and the sealed secret all work, and the durable outcomes read the same.
    node = await start_backend(tmp_path, clock, database_url=postgresql_url)
    try:
        async with node.client(made["key"]) as http:
            first = await http.get(f"/v1/sessions/{made['first']}")
            assert (first.status_code, first.json()) == (410, made["sessions"][made["first"]])
            for (sid, cid), answer in made["commands"].items():
                polled = await http.get(f"/v1/sessions/{sid}/commands/{cid}")
                assert polled.json() == answer
            live = (await http.get(f"/v1/sessions/{made['live']}")).json()
            was = made["sessions"][made["live"]]
            assert live["dialogs"] == was["dialogs"]
            assert live["blockedNavigations"] == was["blockedNavigations"]
            devices = {d["deviceId"]: d for d in (await http.get("/v1/devices")).json()["devices"]}
            assert set(devices) == {"laptop-1", "laptop-2"}

            spare = SimulatedDevice(node.url, made["spare_credential"])
            node.devices.append(spare)
            await spare.connect()
            assert spare.welcome is not None
            created = await post_create(node, http, unattended(deviceId="laptop-2"))
            assert created.status_code == 201, created.text
            sid = created.json()["sessionId"]
            body = {
                "commandId": str(uuid.uuid4()),
                "command": {
                    "name": "fill_secret",
                    "ref": "g1e3",
                    "secretRef": "vault:login-password",
                },
            }
            filled = await http.post(f"/v1/sessions/{sid}/commands", json=body)
            assert filled.status_code == 200, filled.text
            assert spare.secrets_seen == [PLAINTEXT]
    finally:
        await stop_backend(node)
    assert data_counts(postgresql_url)["actors"] > 0  # the node made its own rows


_CRASHING_WRITER = """
import os, sys
from understudy._store import Database
db = Database(sys.argv[1])
with db.storage.transaction() as tx:
    tx.api_keys.add(digest="d" * 64, key_id="key_crashed", tenant="acme", actor="bot", now=1.0)
os._exit(0)  # as after SIGKILL: no close, so the commit lives only in the WAL
"""


def test_a_service_that_died_leaves_its_commits_in_the_wal_and_the_copy_reads_them(
    installation: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = installation / DB_FILE
    subprocess.run([sys.executable, "-c", _CRASHING_WRITER, str(source)], check=True)
    wal = source.with_name(DB_FILE + "-wal")
    assert wal.stat().st_size > 0
    main_file, log = file_digest(source), file_digest(wal)

    code, out, err = copy(capsys, installation, postgresql_url)

    assert (code, err) == (0, "")
    assert re.search(r"^api_keys\s+2\s+2\s+ok$", out, re.MULTILINE), out
    # Read without a checkpoint: neither the database file nor its WAL changed.
    assert (file_digest(source), file_digest(wal)) == (main_file, log)


# -- refusals --------------------------------------------------------------------------------------


async def test_copy_refuses_while_the_service_runs_and_touches_neither_database(
    tmp_path: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = await start_backend(tmp_path)
    data_dir = backend.settings.data_dir
    try:
        backend.api_key()
        await backend.services.storage.durable()
        before = content(data_dir / DB_FILE)
        code, out, err = await run_async(
            capsys, "copy-database", "--data-dir", str(data_dir), "--to", postgresql_url
        )
    finally:
        await stop_backend(backend)
    assert (code, out) == (3, "")
    assert err.count("\n") == 1
    assert f"in use by a running understudy serve (pid {os.getpid()} on host" in err
    assert "stop the service first" in err
    assert pg_counts(postgresql_url) == {}  # not even migrated
    assert content(data_dir / DB_FILE) == before
    # Once the service is stopped, the same command copies.
    assert copy(capsys, data_dir, postgresql_url)[0] == 0


def test_a_cli_command_during_a_copy_is_refused_so_nothing_is_left_behind(
    installation: Path,
    postgresql_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A key created after the copy's snapshot would exist in SQLite only: the command is refused.
    cli = ("--data-dir", str(installation))
    copy_tables = _copy._copy_in_one_transaction
    during: list[tuple[int, str, str]] = []

    def with_commands_meanwhile(*args: Any, **kwargs: Any) -> None:
        for argv in (("keys", "create", "--tenant", "acme", "--actor", "late"), ("status",)):
            code = main([*argv, *cli])
            out, err = capsys.readouterr()
            during.append((code, out, err))
        copy_tables(*args, **kwargs)

    monkeypatch.setattr(_copy, "_copy_in_one_transaction", with_commands_meanwhile)

    code, _, err = copy(capsys, installation, postgresql_url)

    assert code == 0, err
    for command_code, out, command_err in during:
        assert (command_code, out) == (2, "")
        assert "is being copied to PostgreSQL (copy-database, pid" in command_err
        assert "run it against PostgreSQL (UNDERSTUDY_DATABASE_URL)" in command_err
    assert len(sqlite_rows(installation / DB_FILE, "api_keys")) == 1  # no key made meanwhile
    assert data_counts(postgresql_url)["api_keys"] == 1
    # After the copy the directory takes commands again.
    assert run(capsys, "keys", "create", "--tenant", "acme", "--actor", "after", *cli)[0] == 0


def test_a_copy_waits_for_a_cli_command_under_way_then_refuses(
    installation: Path,
    postgresql_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_lock, "COPY_WAIT_S", 0.3)
    with _lock.operator_access(installation):  # a command with the database open
        started = time.monotonic()
        code, out, err = copy(capsys, installation, postgresql_url)
        waited = time.monotonic() - started

    assert (code, out) == (3, "")
    assert "another understudy command has the database in" in err
    assert waited >= 0.3
    assert pg_counts(postgresql_url) == {}  # not even migrated
    # Neither lock is left held: a service could start, and the copy runs once the command ends.
    _lock.unlock_data_dir(_lock.lock_data_dir(installation))
    assert copy(capsys, installation, postgresql_url)[0] == 0


def test_copy_refuses_a_target_that_holds_rows_and_names_the_table(
    installation: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A password in the URL (the test cluster trusts local users, so any works) is never printed.
    url = postgresql_url.replace("://understudy@", "://understudy:s3cret-pw@", 1)
    code, out, err = copy(capsys, installation, url)
    assert code == 0
    assert re.search(r"^api_keys\s+1\s+1\s+ok$", out, re.MULTILINE), out
    assert "to postgresql://understudy:***@127.0.0.1:" in out
    cli = ("--data-dir", str(installation))
    assert run(capsys, "keys", "create", "--tenant", "acme", "--actor", "other", *cli)[0] == 0
    copied = data_counts(postgresql_url)

    code, again, err = copy(capsys, installation, url)

    assert (code, again) == (4, "")
    assert "is not empty: table api_keys holds 1 row(s)" in err
    assert "never into one in use" in err
    assert "s3cret-pw" not in out + err
    assert data_counts(postgresql_url) == copied  # nothing merged


def test_tables_of_another_application_in_the_target_are_left_alone(
    installation: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(postgresql_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE other_app (x TEXT)")
        conn.execute("INSERT INTO other_app VALUES ('kept')")

    assert copy(capsys, installation, postgresql_url)[0] == 0

    assert pg_counts(postgresql_url)["other_app"] == 1
    assert data_counts(postgresql_url)["api_keys"] == 1


async def test_copy_refuses_a_target_a_node_serves(
    tmp_path: Path, installation: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    node = await start_backend(tmp_path / "node", database_url=postgresql_url, node_id="n1")
    try:
        code, _, err = await run_async(
            capsys, "copy-database", "--data-dir", str(installation), "--to", postgresql_url
        )
    finally:
        await stop_backend(node)
    assert code == 4
    assert "is served by running nodes (n1)" in err
    counts = data_counts(postgresql_url)
    assert not any(counts[t] for t in COPIED_TABLES)


def test_copy_refuses_a_target_whose_tables_another_client_keeps_locked(
    installation: Path,
    postgresql_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_copy, "LOCK_WAIT", "200ms")
    storage = PostgresStorage(postgresql_url)
    try:
        storage.migrate(0.0)
    finally:
        storage.close()
    with psycopg.connect(postgresql_url) as other:
        # A writer's lock, as an open transaction in psql that inserted a key would hold.
        other.execute("LOCK TABLE api_keys IN ROW EXCLUSIVE MODE")

        code, out, err = copy(capsys, installation, postgresql_url)

        other.rollback()
    assert (code, out) == (4, "")
    assert "is in use: another session holds its tables (waited 200ms)" in err
    assert empty(postgresql_url)


@pytest.mark.parametrize("source", ["older", "newer", "unknown table"])
def test_copy_refuses_a_source_at_another_schema_version(
    installation: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    if source == "unknown table":
        sqlite_write(installation / DB_FILE, "CREATE TABLE extras (x TEXT)")
        expected = "has table(s) extras that no migration of this binary makes"
    elif source == "older":
        sqlite_write(
            installation / DB_FILE,
            f"DELETE FROM {VERSIONS_TABLE} WHERE version = ?",  # noqa: S608
            (LATEST,),
        )
        expected = f"is at schema version {LATEST - 1}, this binary's is {LATEST}: run `understudy"
    else:
        make_newer(installation)
        gc.collect()  # the helper leaves its connection open: its close checkpoints the WAL
        expected = f"at schema version {LATEST + 1}, but this binary knows only up to {LATEST}"
    before = file_digest(installation / DB_FILE)

    code, out, err = copy(capsys, installation, postgresql_url)

    assert (code, out) == (5, "")
    assert expected in err
    assert pg_counts(postgresql_url) == {}
    assert file_digest(installation / DB_FILE) == before


@pytest.mark.parametrize("damage", ["missing", "not a database"])
def test_copy_refuses_a_data_dir_without_a_readable_database(
    tmp_path: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    if damage == "not a database":
        (data_dir / DB_FILE).write_bytes(b"this is not SQLite\n" * 512)
        expected = f"cannot read the SQLite database at {data_dir / DB_FILE}"
    else:
        expected = f"no database at {data_dir / DB_FILE}"

    code, out, err = copy(capsys, data_dir, postgresql_url)

    assert (code, out) == (2, "")
    assert expected in err
    assert pg_counts(postgresql_url) == {}


def test_copy_refuses_a_target_migrated_by_a_newer_binary(
    installation: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = PostgresStorage(postgresql_url)
    try:
        storage.migrate(0.0)
    finally:
        storage.close()
    with psycopg.connect(postgresql_url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {VERSIONS_TABLE} (version, description, applied_at) "  # noqa: S608
            "VALUES (%s, 'from a newer binary', 0)",
            (LATEST + 1,),
        )

    code, out, err = copy(capsys, installation, postgresql_url)

    assert (code, out) == (5, "")
    assert f"schema version {LATEST + 1}, but this binary knows only up to {LATEST}" in err
    assert empty(postgresql_url)


# -- a failure halfway -----------------------------------------------------------------------------


@pytest.mark.parametrize("failure", ["a value PostgreSQL cannot hold", "a statement it refuses"])
def test_a_failure_halfway_leaves_the_target_empty_and_a_second_copy_works(
    installation: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str], failure: str
) -> None:
    source = installation / DB_FILE
    if failure.startswith("a value"):
        # SQLite's INTEGER is 64-bit, PostgreSQL's 32: devices load after api_keys.
        sqlite_write(source, "UPDATE devices SET connection_epoch = ?", (2**40,))
        expected = "table devices, row tenant='acme', device_id='d1', column connection_epoch"
    else:
        storage = PostgresStorage(postgresql_url)
        try:
            storage.migrate(0.0)
        finally:
            storage.close()
        # The server fails the copy of vault_secrets, after api_keys, devices and vault_keys.
        with psycopg.connect(postgresql_url, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'injected failure'; END $$"
            )
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON vault_secrets "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        expected = "table vault_secrets: PostgreSQL refused the copy (injected failure)"
    before = file_digest(source)

    code, out, err = copy(capsys, installation, postgresql_url)

    assert (code, out) == (1, "")
    assert expected in err, err
    assert "nothing was kept" in err
    assert empty(postgresql_url)  # api_keys were copied before the failure, and rolled back
    assert file_digest(source) == before

    if failure.startswith("a value"):
        sqlite_write(source, "UPDATE devices SET connection_epoch = 1")
    else:
        with psycopg.connect(postgresql_url, autocommit=True) as conn:
            conn.execute("DROP TRIGGER refuse ON vault_secrets")
    code, out, err = copy(capsys, installation, postgresql_url, "--json")
    assert (code, err) == (0, "")
    counts = {t["table"]: t["target"] for t in json.loads(out)["tables"]}
    assert (counts["api_keys"], counts["devices"], counts["vault_secrets"]) == (1, 1, 1)


def test_a_count_that_differs_after_the_commit_fails_the_command(
    installation: Path,
    postgresql_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    committed = _copy._copy_in_one_transaction

    def then_another_writer(*args: Any, **kwargs: Any) -> None:
        committed(*args, **kwargs)
        # Between the commit and the count: a client that should not be there removes a row.
        with psycopg.connect(postgresql_url, autocommit=True) as conn:
            conn.execute("DELETE FROM devices")

    monkeypatch.setattr(_copy, "_copy_in_one_transaction", then_another_writer)

    code, out, err = copy(capsys, installation, postgresql_url)

    assert code == 1
    assert re.search(r"^devices\s+1\s+0\s+MISMATCH$", out, re.MULTILINE), out
    assert re.search(r"^api_keys\s+1\s+1\s+ok$", out, re.MULTILINE), out
    assert "verification failed: the row counts of devices differ" in err


# -- a write whose outcome was pending -------------------------------------------------------------


async def granted_without_result(
    root: Path, clock: ManualClock
) -> tuple[Path, SimulatedDevice, str, str, str]:
    """A stopped SQLite service whose session holds a write granted to the device, which started
    it and never reported a result (its journal says `started`)."""
    backend = await start_backend(root, clock)
    key = backend.api_key()
    device = await backend.device(behaviour=Behaviour(execute="crash_after_start"))
    async with backend.client(key) as http:
        created = await post_create(backend, http, unattended())
        assert created.status_code == 201, created.text
        sid = created.json()["sessionId"]
        cid = str(uuid.uuid4())
        waiting = asyncio.ensure_future(
            http.post(
                f"/v1/sessions/{sid}/commands",
                json={"commandId": cid, "command": {"name": "click", "ref": "g1e1"}},
            )
        )
        await device.wait_for(lambda: device.executions.get(cid))
        row = backend.command(sid, cid)
        assert row is not None
        assert (row.state, row.result) == ("granted", None)
        waiting.cancel()
        await stop_backend(backend)
    return backend.settings.data_dir, device, key, sid, cid


async def after_restart(
    node: Backend, device: SimulatedDevice, key: str, sid: str, cid: str
) -> dict[str, Any]:
    """What the caller and the device see once the service runs again and the device is back."""
    async with node.client(key) as http:
        url = f"/v1/sessions/{sid}/commands/{cid}"
        before = await http.get(url)
        lease = next(iter(device.leases.values()))

        def hello_acks() -> list[m.SessionServerHelloAck]:
            return [f for f in lease.session_frames if isinstance(f, m.SessionServerHelloAck)]

        earlier = len(hello_acks())  # the session socket's first hello, before the stop
        device.base_url = node.url
        node.devices.append(device)
        await device.connect()
        await device.wait_for(lambda: len(hello_acks()) > earlier)
        acks = hello_acks()[earlier:]
        await node.until(lambda: node.command_state(sid, cid) == "unknown", "settled unknown")
        after = await http.get(url)
        session = (await http.get(f"/v1/sessions/{sid}")).json()

    def plain(value: Any) -> Any:
        return json.loads(json.dumps(value).replace(cid, "<command>").replace(sid, "<session>"))

    return {
        "before": (before.status_code, plain(before.json())),
        "hello_ack": [
            ([str(c) for c in a.unknown] == [cid], [str(c) for c in a.cancel]) for a in acks
        ],
        "after": (after.status_code, plain(after.json())),
        "session": plain(
            {
                k: session[k]
                for k in (
                    "status",
                    "writesBlocked",
                    "writesBlockedReason",
                    "writesBlockedCommandId",
                )
            }
        ),
        "executions": device.executions,
    }


async def test_a_pending_write_answers_on_postgresql_as_after_a_sqlite_restart(
    tmp_path: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = {}
    for engine in ("sqlite", "postgresql"):
        clock = ManualClock()
        root = tmp_path / engine
        data_dir, device, key, sid, cid = await granted_without_result(root, clock)
        overrides: dict[str, Any] = {}
        if engine == "postgresql":
            assert copy(capsys, data_dir, postgresql_url)[0] == 0
            overrides["database_url"] = postgresql_url
        node = await start_backend(root, clock, **overrides)
        try:
            seen[engine] = await after_restart(node, device, key, sid, cid)
            seen[engine]["executions"] = {
                "<command>" if k == cid else k: v for k, v in device.executions.items()
            }
        finally:
            await stop_backend(node)

    assert seen["postgresql"] == seen["sqlite"]
    # What the protocol says: a write that started and lost its result is unknown, never re-run.
    assert seen["postgresql"]["after"][0] == 409
    assert seen["postgresql"]["after"][1]["code"] == "command_outcome_unknown"
    assert seen["postgresql"]["executions"] == {"<command>": 1}
    assert seen["postgresql"]["session"]["writesBlockedReason"] == "unknown_outcome"
    # The device's hello named it, and the backend settled it unknown rather than granting again.
    assert seen["postgresql"]["hello_ack"] == [(True, [])]
