"""Fixtures of the fault suite, and its figures printed at the end of the run (for the issue
note)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from tests.backend.faults._figures import FIGURES
from tests.backend.faults._harness import PLAINTEXT, SECRET_NAME
from tests.backend.faults._process import Credentials, prepare_data_dir

if TYPE_CHECKING:
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


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    FIGURES.report(terminalreporter, "fault figures")
