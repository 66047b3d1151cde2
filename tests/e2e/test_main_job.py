"""The README's first command: the main job runs to the end and leaves nothing running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ._skip import require_chromium

require_chromium()
pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]


def test_the_main_job_logs_in_through_the_whole_stack(tmp_path: Path) -> None:
    data = tmp_path / "main-job"
    done = subprocess.run(
        [sys.executable, "-m", "demo", "--headless", "--data-dir", str(data)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for step, status in [
        ("create session", "201"),
        ("fill_secret password", "200"),
        ("click sign in", "200"),
        ("delete session", "202"),
    ]:
        assert any(
            line.split()[:-1] and step in line and f" {status} " in line for line in lines
        ), (step, done.stdout)
    assert "Welcome, demo-user" in done.stdout
    assert "Main job completed" in done.stdout
    # Nothing it started is still running: no process uses its data directory.
    leftovers = subprocess.run(["/usr/bin/pgrep", "-f", str(data)], capture_output=True, text=True)
    assert leftovers.stdout == ""
