"""Each node says who it is and whether it is healthy: `/readyz`, `/metrics`, the CLI's status."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.backend.multinode.conftest import Nodes
    from understudy._node import SharedNode


def _listening(node: SharedNode) -> Callable[[], bool]:
    return lambda: node.listening


async def test_readyz_and_metrics_name_the_node_and_its_health(nodes: Nodes) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    for node, name in ((a, "a"), (b, "b")):
        shared = node.services.node
        assert shared is not None
        async with httpx.AsyncClient(base_url=node.url) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["node"] == name
            await node.until(_listening(shared), "the LISTEN connection is up")
            scraped = (await http.get("/metrics")).text
        assert f'understudy_node_up{{node="{name}"}} 1.0' in scraped
        assert f'understudy_node_listening{{node="{name}"}} 1.0' in scraped
    assert a.services.storage.service_holder() == "nodes a, b"  # type: ignore[attr-defined]


async def test_a_node_whose_heartbeat_fails_is_not_ready(nodes: Nodes) -> None:
    a = await nodes.start("a")
    assert a.services.node is not None
    storage = a.services.db.storage
    storage.heartbeat_ok = False  # type: ignore[attr-defined]  # what a failed heartbeat leaves
    await a.services.claim.stop()  # no heartbeat puts it back meanwhile
    async with httpx.AsyncClient(base_url=a.url) as http:
        ready = await http.get("/readyz")
    assert (ready.status_code, ready.json()["code"]) == (503, "not_ready")
    assert "node a" in ready.json()["detail"]
