"""Fixtures of the fault suite, and its figures printed at the end of the run (for the issue
note)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from tests.backend.faults._deployments import ONE_NODE, THREE_NODES, Deployment, deployed
from tests.backend.faults._figures import FIGURES, THREE_NODE_FIGURES
from tests.backend.faults._harness import PLAINTEXT, SECRET_NAME
from tests.backend.faults._process import Credentials, prepare_data_dir

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from _pytest.terminal import TerminalReporter

TEMPLATE_DEVICES = 7


@dataclass(frozen=True)
class Template:
    """A data directory the real CLI prepared: one consumer key, devices, the vaulted secret."""

    data_dir: Path
    credentials: Credentials


@pytest.fixture(scope="session")
def cli_template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    data_dir = tmp_path_factory.mktemp("template") / "data"
    credentials = prepare_data_dir(
        data_dir, devices=TEMPLATE_DEVICES, secrets={SECRET_NAME: PLAINTEXT}
    )
    return Template(data_dir, credentials)


@pytest.fixture(params=[ONE_NODE, THREE_NODES])
def deployment_kind(request: pytest.FixtureRequest) -> str:
    """One node (SQLite, or PostgreSQL under `UNDERSTUDY_TEST_ENGINE`), then three nodes on one
    PostgreSQL database (skipped without PostgreSQL outside CI, failing under `CI=true`)."""
    kind: str = request.param
    return kind


@pytest.fixture
async def deployment(
    deployment_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Deployment]:
    """The deployment of `deployment_kind` on a manual clock shared by its nodes."""
    async with deployed(deployment_kind, tmp_path, request) as running:
        yield running


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    FIGURES.report(terminalreporter, "fault figures (one node)")
    THREE_NODE_FIGURES.report(
        terminalreporter, "fault figures (three nodes on one PostgreSQL database)"
    )
