"""Fixtures of the contract suite: the live backend the fuzzer's requests reach, one backend per
named scenario, the ledger the coverage tests judge, run ordering, and the printed case count."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.backend.conftest import start_backend, stop_backend
from tests.contract._ledger import LEDGER, Ledger
from tests.contract._live import OPERATOR_TOKEN, LiveBackend, LiveServer
from tests.contract._scenario import Scenario
from tests.contract._schema import EXAMPLES, SEED
from understudy import _security
from understudy._config import QuotaPolicy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
# Where a contract run started by `run_ledger` writes what it observed (read by this conftest).
LEDGER_OUT = "UNDERSTUDY_CONTRACT_LEDGER_OUT"
# The test modules whose cases the coverage tests judge: every contract module but theirs.
PRODUCERS = frozenset(p.name for p in HERE.glob("test_*.py") if p.name != "test_status_coverage.py")
# The longest a contract run of its own may take (CI's budget runs in about two minutes).
OWN_RUN_TIMEOUT_S = 1800
_DESELECTED: set[str] = set()


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveBackend]:
    server = LiveServer(tmp_path_factory.mktemp("contract"))
    running = server.start()
    try:
        for credential in (running.api_key, running.device_credential, OPERATOR_TOKEN):
            LEDGER.secret(credential)
            LEDGER.secret(_security.token_digest(credential))
        for plaintext in running.secrets.values():
            LEDGER.secret(plaintext)
        yield running
    finally:
        server.stop()


@pytest.fixture
async def scenario(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Scenario]:
    """A fresh backend for one named scenario; indirect parameters override quotas."""
    quota = getattr(request, "param", None)
    overrides: dict[str, Any] = {"quota": replace(QuotaPolicy(), **quota)} if quota else {}
    backend = await start_backend(tmp_path, **overrides)
    try:
        yield Scenario(request.node.name, backend)
    finally:
        await stop_backend(backend)


@pytest.fixture(scope="session")
def run_ledger(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Ledger:
    """What the whole contract run observed, for the coverage tests to judge.

    When this process runs every case of the suite, that is its own ledger (the coverage tests
    run last). When it does not (the coverage tests run alone or with part of the suite, or
    pytest-xdist spread the cases over workers, each with its ledger), a partial ledger would make
    them fail for nothing, or pass on what another run saw; so they start a contract run of their
    own, in one process, and judge what it observed.
    """
    if _runs_every_producer(request.session):
        return LEDGER
    out = tmp_path_factory.mktemp("contract-run") / "ledger.json"
    command = [sys.executable, "-m", "pytest", str(HERE), "-q", "-p", "no:cacheprovider"]
    command += ["-p", "no:xdist", "-m", "not contract_coverage"]
    proc = subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, LEDGER_OUT: str(out)},
        capture_output=True,
        text=True,
        timeout=OWN_RUN_TIMEOUT_S,
        check=False,
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
    assert proc.returncode == 0, f"the contract run the coverage tests judge failed:\n{tail}"
    assert out.exists(), f"the contract run wrote no ledger:\n{tail}"
    return Ledger.loads(out.read_text())


def _runs_every_producer(session: pytest.Session) -> bool:
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: some cases run elsewhere
        return False
    collected = {Path(str(item.path)).name for item in session.items if _producer(item)}
    return collected == PRODUCERS and not _DESELECTED


def _producer(item: pytest.Item) -> bool:
    path = Path(str(item.path))
    return path.parent == HERE and path.name in PRODUCERS


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Remember deselected contract cases (`-k`, `-m`): the run then does not observe them all."""
    _DESELECTED.update(item.nodeid for item in items if _producer(item))


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get(LEDGER_OUT)
    if out and not hasattr(session.config, "workerinput"):
        Path(out).write_text(LEDGER.dumps())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the status coverage test last: it judges what every other contract test observed."""
    last = [item for item in items if item.get_closest_marker("contract_coverage")]
    if last:
        items[:] = [item for item in items if item not in last] + last


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "contract_coverage: judges the whole contract run; runs last"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not LEDGER.cases:
        return
    parts = ", ".join(f"{source}: {count}" for source, count in sorted(LEDGER.cases.items()))
    terminalreporter.write_line(
        f"contract: {sum(LEDGER.cases.values())} cases run ({parts}); "
        f"seed {SEED}, {EXAMPLES} fuzz examples per operation"
    )
