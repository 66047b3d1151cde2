"""The operator CLI: migrations, the newer-database refusal, keys, devices, tenants and the
DEVICE_TOKENS mapping, checked against the SQLite file and a running app."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.backend.conftest import start_backend, stop_backend
from tests.support.simdevice import SimulatedDevice
from understudy import _security
from understudy._bootstrap import DB_FILE, build_services
from understudy._config import load_settings
from understudy._store import LATEST, SchemaTooNewError
from understudy.cli import main

if TYPE_CHECKING:
    from pathlib import Path

SETTINGS_VARIABLES = ("UNATTENDED_ENABLED_TENANTS", "QUOTA_POLICY", "DEVICE_TOKENS")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment whose only setting is UNDERSTUDY_DATA_DIR."""
    for variable in list(os.environ):
        if variable.startswith("UNDERSTUDY_") or variable in SETTINGS_VARIABLES:
            monkeypatch.delenv(variable)
    path = tmp_path / "data"
    monkeypatch.setenv("UNDERSTUDY_DATA_DIR", str(path))
    return path


@pytest.fixture
def database(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """`data_dir` with a database, as `understudy migrate` (or a first `serve`) leaves it."""
    assert main(["migrate"]) == 0
    capsys.readouterr()
    return data_dir


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def printed(out: str, label: str) -> str:
    match = re.search(rf"^{label}:\s+(\S+)$", out, re.MULTILINE)
    assert match is not None, out
    return match[1]


def versions(data_dir: Path) -> list[int]:
    with sqlite3.connect(data_dir / DB_FILE) as db:
        rows = db.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    return [row[0] for row in rows]


def database_bytes(data_dir: Path) -> bytes:
    """The database with its WAL and shared-memory files, as a backup would copy them."""
    return b"".join(p.read_bytes() for p in sorted(data_dir.glob(f"{DB_FILE}*")))


def make_newer(data_dir: Path) -> None:
    with sqlite3.connect(data_dir / DB_FILE) as db:
        db.execute(
            "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, 0)",
            (LATEST + 1, "from a newer binary"),
        )


def subprocess_env(data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("UNDERSTUDY_") and k not in SETTINGS_VARIABLES
    }
    return env | {"UNDERSTUDY_DATA_DIR": str(data_dir), "UNDERSTUDY_PORT": "0"}


# -- migrations ------------------------------------------------------------------------------------


def test_migrate_applies_every_version_on_a_new_data_dir_and_is_idempotent(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "migrate")
    assert code == 0
    every = list(range(1, LATEST + 1))
    assert f"applied schema migration(s) {', '.join(map(str, every))}" in out
    assert versions(data_dir) == every

    code, out, _ = run(capsys, "migrate")
    assert code == 0
    assert "applied" not in out
    assert f"schema is up to date (version {LATEST})" in out
    assert versions(data_dir) == every


def test_a_newer_database_is_refused_by_migrate_build_and_serve(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "migrate")[0] == 0
    make_newer(data_dir)
    expected = f"schema version {LATEST + 1}, but this binary knows only up to {LATEST}"

    for argv in (["migrate"], ["keys", "list"]):
        code, out, err = run(capsys, *argv)
        assert code == 2, argv
        assert expected in err
        assert out == ""
    with pytest.raises(SchemaTooNewError, match=expected):
        build_services(load_settings())
    served = subprocess.run(
        [sys.executable, "-m", "understudy.cli", "serve"],
        env=subprocess_env(data_dir),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert served.returncode == 2, served.stderr
    assert expected in served.stderr
    assert "Traceback" not in served.stderr
    assert "serving" not in served.stdout
    assert versions(data_dir) == [*range(1, LATEST + 1), LATEST + 1]


# -- credentials -----------------------------------------------------------------------------------


def test_keys_create_list_revoke_store_only_the_digest(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "keys", "create", "--tenant", "acme", "--actor", "bot")
    assert code == 0
    key_id, token = printed(out, "key id"), printed(out, "api key")
    assert _security.token_kind(token) == "consumer"

    code, listing, _ = run(capsys, "keys", "list")
    assert code == 0
    assert listing.splitlines() == [f"{key_id}\tacme\tbot\tactive"]
    stored = database_bytes(database)
    assert token.encode() not in stored
    assert token.removeprefix("usk_").encode() not in stored
    assert hashlib.sha256(token.encode()).hexdigest().encode() in stored

    assert run(capsys, "keys", "revoke", key_id)[:2] == (0, "revoked\n")
    assert run(capsys, "keys", "list")[1].splitlines() == [f"{key_id}\tacme\tbot\trevoked"]
    assert run(capsys, "keys", "revoke", key_id)[0] == 1


def test_devices_enroll_list_revoke_store_only_the_digest(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "devices", "enroll", "--tenant", "acme", "--device", "laptop-1")
    assert code == 0
    credential = printed(out, "credential")
    assert _security.token_kind(credential) == "device"
    code, _, err = run(capsys, "devices", "enroll", "--tenant", "acme", "--device", "laptop-1")
    assert (code, err) == (1, "device acme/laptop-1 already exists\n")

    code, listing, _ = run(capsys, "devices", "list")
    assert listing.splitlines() == ["acme\tlaptop-1\toffline"]
    assert credential not in listing
    stored = database_bytes(database)
    assert credential.encode() not in stored
    assert hashlib.sha256(credential.encode()).hexdigest().encode() in stored

    assert run(capsys, "devices", "revoke", "--tenant", "acme", "--device", "laptop-1")[0] == 0
    assert run(capsys, "devices", "list")[1].splitlines() == ["acme\tlaptop-1\trevoked"]


def test_operator_tokens_create_list_revoke_store_only_the_digest(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "operator-tokens", "create", "--name", "synthetic-users")
    assert code == 0
    token_id, token = printed(out, "token id"), printed(out, "operator token")
    assert _security.token_kind(token) == "operator"
    listing = run(capsys, "operator-tokens", "list")[1]
    assert listing.splitlines() == [f"{token_id}\tsynthetic-users\tactive"]
    stored = database_bytes(database)
    assert token.encode() not in stored
    assert hashlib.sha256(token.encode()).hexdigest().encode() in stored
    assert run(capsys, "operator-tokens", "revoke", token_id)[:2] == (0, "revoked\n")
    assert json.loads(run(capsys, "operator-tokens", "list", "--json")[1]) == [
        {"tokenId": token_id, "name": "synthetic-users", "state": "revoked"}
    ]
    assert run(capsys, "operator-tokens", "revoke", token_id)[0] == 1


def test_tenants_list_names_every_tenant_with_keys_or_devices(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "keys", "create", "--tenant", "globex", "--actor", "bot")
    run(capsys, "devices", "enroll", "--tenant", "acme", "--device", "laptop-1")
    run(capsys, "keys", "create", "--tenant", "acme", "--actor", "planner")
    assert run(capsys, "tenants", "list")[1].splitlines() == ["acme", "globex"]


def test_invalid_names_are_refused_by_the_parser(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["keys", "create", "--tenant", "Acme Corp", "--actor", "bot"])
    assert exit_info.value.code == 2
    assert "lowercase letters" in capsys.readouterr().err
    assert not (data_dir / DB_FILE).exists()


async def test_cli_credentials_take_effect_in_a_running_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = await start_backend(tmp_path)
    try:
        monkeypatch.setenv("UNDERSTUDY_DATA_DIR", str(backend.settings.data_dir))
        out = run(capsys, "keys", "create", "--tenant", "acme", "--actor", "bot")[1]
        key_id, token = printed(out, "key id"), printed(out, "api key")
        out = run(capsys, "devices", "enroll", "--tenant", "acme", "--device", "laptop-1")[1]
        device = SimulatedDevice(backend.url, printed(out, "credential"))
        backend.devices.append(device)

        assert (await device.connect()).device_id == "laptop-1"
        async with backend.client(token) as http:
            listed = await http.get("/v1/devices")
            assert listed.status_code == 200
            assert [d["deviceId"] for d in listed.json()["devices"]] == ["laptop-1"]

            assert run(capsys, "keys", "revoke", key_id)[0] == 0
            refused = await http.get("/v1/devices")
            assert refused.status_code == 401
            assert refused.json()["code"] == "unauthorized"

        assert run(capsys, "devices", "revoke", "--tenant", "acme", "--device", "laptop-1")[0] == 0
        async with backend.client(device.credential) as http:
            ticket = await http.post(
                "/v1/device/connect-ticket", json={"browserEpoch": device.browser_epoch}
            )
            assert ticket.status_code == 401
    finally:
        await stop_backend(backend)


async def test_device_tokens_mapping_admits_a_device_without_enrolment(tmp_path: Path) -> None:
    credential = _security.generate_token("device")
    mapping = {_security.token_digest(credential): {"tenant": "acme", "device": "kiosk-1"}}
    tokens = load_settings({"DEVICE_TOKENS": json.dumps(mapping)}).device_tokens
    backend = await start_backend(tmp_path, device_tokens=tokens)
    try:
        device = SimulatedDevice(backend.url, credential)
        backend.devices.append(device)
        assert (await device.connect()).device_id == "kiosk-1"
        async with backend.client(backend.api_key()) as http:
            listed = (await http.get("/v1/devices")).json()["devices"]
        assert [(d["deviceId"], d["online"]) for d in listed] == [("kiosk-1", True)]

        stranger = SimulatedDevice(backend.url, _security.generate_token("device"))
        async with backend.client(stranger.credential) as http:
            ticket = await http.post(
                "/v1/device/connect-ticket", json={"browserEpoch": stranger.browser_epoch}
            )
        assert ticket.status_code == 401
    finally:
        await stop_backend(backend)
