"""The storage-engines benchmark's smallest slice runs end to end (figures are not checked)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from bench import engines
from tests.support.pgcluster import find_bin_dir

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _postgresql_installed() -> None:
    if find_bin_dir() is None and os.environ.get("CI") != "true":
        pytest.skip("PostgreSQL is not installed; `apt-get install postgresql`")


async def test_one_session_on_each_deployment_reports_a_row_each(tmp_path: Path) -> None:
    result = await engines.run(
        tmp_path, levels=[2], total=6, warmup=2, rounds=1, probe_seconds=0.1, log=lambda _: None
    )

    assert result["postgresql"]["fsync"] == "on"
    assert result["postgresql"]["synchronous_commit"] == "on"
    assert result["not_measured"] == {}
    for name in engines.ENGINES:
        data = result["engines"][name]
        assert data["levels"]["2"]["writes"] == 6, data["phases"]
        assert data["every_write_ran_once"], data["device_executions"]
        assert data["phases"][0]["server_side_ms"]["n"] == 6  # the rows were read back
    # Two sessions on three nodes: their HTTP connections go to nodes 0 and 1, so whichever node
    # holds their sockets, the writes of at least one of them cross nodes.
    three = result["engines"][engines.THREE_NODES]
    split = three["phases"][0]
    assert split["same_node_server_ms"]["n"] + split["cross_node_server_ms"]["n"] == 6
    assert split["cross_node_server_ms"]["n"] >= 1, split
    assert len(three["device_executions"]["session_ports"]) == 2
    [table] = engines.tables(result)
    assert [row[0] for row in table.rows] == [
        "SQLite one node",
        "PostgreSQL one node",
        "PostgreSQL three nodes",
    ]
    assert "cross-node" in table.render()
    assert [target.met for target in engines.targets(result)] == [True, True, True]


def test_the_runner_lists_the_module() -> None:
    from bench.__main__ import BENCHMARKS

    assert BENCHMARKS["engines"] is engines
