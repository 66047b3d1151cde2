"""The deployments the fault suite runs on: one node, or three nodes on one PostgreSQL database.

On three nodes the roles are spread so that every fault crosses nodes: the consumer's HTTP calls
go to node a, the devices' sockets (device socket and the session sockets it opens) to nodes b
and c, so admissions, frames, outcomes and wake-ups all travel through PostgreSQL.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.backend.conftest import engine_overrides, start_backend, stop_backend
from tests.backend.faults._figures import FIGURES, THREE_NODE_FIGURES
from tests.backend.multinode.conftest import Nodes

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import pytest

    from tests.backend.conftest import Backend
    from tests.backend.faults._figures import Figures
    from understudy._clock import ManualClock

ONE_NODE = "one-node"
THREE_NODES = "three-nodes"


@dataclass(frozen=True)
class Deployment:
    """Running nodes (one or three) and the tally their fault runs are counted in."""

    kind: str
    nodes: list[Backend]
    figures: Figures

    @property
    def three_nodes(self) -> bool:
        return len(self.nodes) > 1

    @property
    def http(self) -> Backend:
        """The node the consumer's HTTP calls go to."""
        return self.nodes[0]

    @property
    def device(self) -> Backend:
        """The node the (first) device connects to; another node than `http` on three nodes."""
        return self.device_node(0)

    def device_node(self, index: int) -> Backend:
        """The node device number `index` connects to (round robin over b and c)."""
        if not self.three_nodes:
            return self.nodes[0]
        return self.nodes[1 + index % (len(self.nodes) - 1)]


@contextlib.asynccontextmanager
async def deployed(
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    clock: ManualClock | None = None,
    *,
    telemetry: bool = False,
) -> AsyncIterator[Deployment]:
    """Start the deployment `kind` (`ONE_NODE` or `THREE_NODES`); stop every node at the end.

    `telemetry` gives every node a telemetry file, `telemetry.jsonl` in the node's directory.
    """

    def own(node_dir: Path) -> dict[str, Any]:
        return {"telemetry_path": node_dir / "telemetry.jsonl"} if telemetry else {}

    if kind == ONE_NODE:
        overrides = engine_overrides(request) | own(tmp_path)
        single = await start_backend(tmp_path, clock, **overrides)
        try:
            yield Deployment(kind, [single], FIGURES)
        finally:
            await stop_backend(single)
        return
    nodes = Nodes(tmp_path, request.getfixturevalue("postgresql_url"), clock)
    try:
        started = [await nodes.start(name, **own(tmp_path / name)) for name in ("a", "b", "c")]
        yield Deployment(kind, started, THREE_NODE_FIGURES)
    finally:
        for name in list(nodes.running):
            await nodes.stop(name)
