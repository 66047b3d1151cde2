"""The TypeScript connector's integration tests, as part of the Python suite (`make test-py`).

`pnpm --filter @understudy/connector test:integration` runs packages/connector/test/integration:
its vitest global setup starts ts_stack.py (this folder's backend and simulated devices behind a
control API) and drives every outcome row through @understudy/connector over real HTTP.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PNPM = shutil.which("pnpm")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PNPM is None, reason="pnpm is not on PATH: run scripts/bootstrap"),
]


async def test_the_typescript_connector_passes_every_outcome_row_against_the_backend() -> None:
    assert PNPM is not None
    proc = await asyncio.create_subprocess_exec(
        PNPM,
        "--filter",
        "@understudy/connector",
        "test:integration",
        cwd=ROOT,
        env={**os.environ, "UNDERSTUDY_PYTHON": sys.executable},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=600)
    report = re.sub(r"\x1b\[[0-9;]*m", "", out.decode(errors="replace"))
    assert proc.returncode == 0, report
    passed = re.search(r"Tests\s+(\d+) passed", report)
    assert passed is not None, report
    assert int(passed[1]) >= 26, report
