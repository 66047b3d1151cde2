"""`synthetic-users`: migrate, keys create and --version, as an operator runs them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from synthetic_users import __version__, cli
from synthetic_users._store import SCHEMA_VERSION, Store, schema_version


def test_migrate_creates_the_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--data-dir", str(tmp_path / "d"), "migrate"]) == 0
    store = Store.open(tmp_path / "d" / "synthetic-users.db")
    assert schema_version(store.db) == SCHEMA_VERSION
    store.close()
    assert f"schema version {SCHEMA_VERSION}" in capsys.readouterr().out


def test_keys_create_prints_a_key_once_that_authenticates_the_customer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--data-dir", str(tmp_path), "keys", "create", "--customer", "acme"]) == 0
    out = capsys.readouterr()
    key = out.out.strip()
    assert key.startswith("suk_") and "shown only this once" in out.err
    store = Store.open(tmp_path / "synthetic-users.db")
    assert store.authenticate(key) == "acme"
    store.close()
    assert key.encode() not in (tmp_path / "synthetic-users.db").read_bytes()


@pytest.mark.parametrize("customer", ["Acme", "a/b", "", "x" * 64])
def test_a_customer_name_that_cannot_name_a_folder_is_refused(
    tmp_path: Path, customer: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--data-dir", str(tmp_path), "keys", "create", "--customer", customer]) == 2
    assert "--customer must be" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"synthetic-users {__version__}"


def test_a_data_directory_serves_one_service_at_a_time(tmp_path: Path) -> None:
    first = cli._lock(tmp_path)
    assert first is not None
    assert cli._lock(tmp_path) is None
    os.close(first)
    again = cli._lock(tmp_path)
    assert again is not None
    os.close(again)


def test_a_bad_setting_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SYNTHETIC_USERS_PORT", "eighty")
    assert cli.main(["--data-dir", str(tmp_path), "migrate"]) == 2
    assert "SYNTHETIC_USERS_PORT" in capsys.readouterr().err


def test_serve_api_only_answers_without_an_understudy_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    script = Path(sys.executable).with_name("synthetic-users")
    env = {**os.environ, "SYNTHETIC_USERS_DATA_DIR": str(tmp_path)}
    env.pop("UNDERSTUDY_OPERATOR_TOKEN", None)
    proc = subprocess.Popen(
        [str(script), "serve", "--api-only", "--host", "127.0.0.1", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"serving on (http://\S+)", line)
        assert url, line
        assert httpx.get(f"{url.group(1)}/healthz", timeout=10).json()["status"] == "ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells it.
    assert code in (0, -signal.SIGTERM)
