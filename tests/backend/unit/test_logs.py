"""Server logs as JSON lines: one object a line, still content-free."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import httpx
from tests.backend.test_cli import subprocess_env

from understudy._logs import JsonLinesFormatter, log_config
from understudy._telemetry import ServerLogFilter

if TYPE_CHECKING:
    from pathlib import Path

TICKET = "ust1.eyJhdWQiOiJzZXNzaW9uIn0.c2lnbmF0dXJl"
SESSION = "3f9c1e2a-8b7d-4c6e-9f01-23456789abcd"


def test_a_record_becomes_one_json_object_with_ids_and_tickets_replaced() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/1.1" %d',
        ("127.0.0.1:5000", "GET", f"/v1/sessions/{SESSION}/socket?ticket={TICKET}", 101),
        None,
    )
    assert ServerLogFilter().filter(record)
    line = JsonLinesFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert (parsed["level"], parsed["logger"]) == ("info", "uvicorn.access")
    assert (
        parsed["message"] == '127.0.0.1:5000 - "GET /v1/sessions/<id>/socket?<query> HTTP/1.1" 101'
    )
    assert TICKET not in line
    assert SESSION not in line


def test_text_format_keeps_uvicorns_own_configuration() -> None:
    assert log_config("text") is None
    config = log_config("json")
    assert config is not None
    assert set(config["loggers"]) == {"uvicorn", "uvicorn.access", "understudy", "litestar"}
    assert config["root"]["handlers"] == list(config["handlers"])


def test_serve_writes_json_lines_to_stderr_when_asked(tmp_path: Path) -> None:
    env = subprocess_env(tmp_path / "data") | {"UNDERSTUDY_LOG_FORMAT": "json"}
    process = subprocess.Popen(
        [sys.executable, "-m", "understudy.cli", "serve", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[3]
        host, port = url.removeprefix("http://").rsplit(":", 1)
        # A malformed request head: uvicorn logs a warning about it.
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            raw.recv(1024)  # the 400 leaves after the warning is logged
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert lines, err
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    assert any(
        line["level"] == "warning" and line["logger"].startswith("uvicorn") for line in lines
    )
