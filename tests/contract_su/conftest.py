"""Fixtures of the Synthetic Users contract suite: the live service, run ordering, the count."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import pytest

from tests.contract_su._checks import LEDGER
from tests.contract_su._driving import LISTS
from tests.contract_su._live import LiveServer, LiveService
from tests.contract_su._schema import EXAMPLES, SEED

if TYPE_CHECKING:
    from collections.abc import Iterator

MARKER = "contract_su_coverage"


@pytest.fixture(scope="session")
def live_su(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    server = LiveServer(tmp_path_factory.mktemp("contract-su"))
    running = server.start()
    try:
        for secret in running.secrets:
            LEDGER.secret(secret)
        # Cursors are read before any test runs: a stateful run deletes what it created, and a
        # cursor read later would depend on what was left (Hypothesis calls that flaky).
        for path in LISTS.values():
            with contextlib.suppress(RuntimeError):  # a list with one page keeps reading lazily
                running.cursor(path.format(webhook=running.webhook_id))
        yield running
    finally:
        server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the status coverage tests last: they judge what every other test here observed."""
    last = [item for item in items if item.get_closest_marker(MARKER)]
    if last:
        items[:] = [item for item in items if item not in last] + last


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: judges the whole Synthetic Users contract run; runs last"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not LEDGER.cases:
        return
    parts = ", ".join(f"{source}: {count}" for source, count in sorted(LEDGER.cases.items()))
    terminalreporter.write_line(
        f"contract (synthetic users): {sum(LEDGER.cases.values())} cases run ({parts}); "
        f"seed {SEED}, {EXAMPLES} fuzz examples per operation"
    )
