"""Fixtures of the contract suite: the live backend the fuzzer's requests reach, one backend per
named scenario, run ordering, and the printed case count."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from tests.backend.conftest import start_backend, stop_backend
from tests.contract._ledger import LEDGER
from tests.contract._live import OPERATOR_TOKEN, LiveBackend, LiveServer
from tests.contract._scenario import Scenario
from tests.contract._schema import EXAMPLES, SEED
from understudy import _security
from understudy._config import QuotaPolicy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path


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
