"""Fixtures of the three-node fault suite, and its figures printed at the end of the run (for the
issue note)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from tests.backend.faults._figures import Figures
from tests.backend.faults._harness import PLAINTEXT, SECRET_NAME
from tests.backend.faults._process import prepare_data_dir
from tests.backend.multinode_faults._deployment import Template

if TYPE_CHECKING:
    from collections.abc import Iterator

    from _pytest.terminal import TerminalReporter

    from tests.support.pgcluster import PgCluster

TEMPLATE_DEVICES = 4
FIGURES = Figures()


@pytest.fixture(scope="session")
def multinode_template(
    pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Template]:
    """A database and a data directory the real CLI prepared once: one consumer key, devices and
    the vaulted secret. Each test runs on a copy of the database."""
    database = f"mn_template_{uuid.uuid4().hex[:8]}"
    url = pg_cluster.create_database(database)
    data_dir = tmp_path_factory.mktemp("multinode-template") / "data"
    credentials = prepare_data_dir(
        data_dir, devices=TEMPLATE_DEVICES, secrets={SECRET_NAME: PLAINTEXT}, database_url=url
    )
    yield Template(data_dir, database, credentials)
    pg_cluster.drop_database(database)


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    FIGURES.report(terminalreporter, "three-node fault figures")
