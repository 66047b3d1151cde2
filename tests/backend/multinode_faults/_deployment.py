"""Three `understudy serve` nodes on one throwaway PostgreSQL database, behind the runbook's nginx.

    async with three_nodes(template, cluster, run_dir, crash_after={0: "granted"}) as nodes:
        nodes.url                    # the balancer: http://127.0.0.1:{nginx port}
        nodes[0].url                 # one node directly
        async with nodes.client(0) as http: ...
        await nodes.kill(1)          # SIGKILL: the node is lost

Each node is the fault suite's `ServerProcess` (warm: the app is imported while the test sets up,
so the three start in about the time one does), with the shared `UNDERSTUDY_DATABASE_URL`, the
balancer as `UNDERSTUDY_PUBLIC_URL` (socket URLs in tickets point at it) and an
`UNDERSTUDY_NODE_ID`. Its data directory is a copy of the template's (the master key the vaulted
secret is sealed with; on PostgreSQL nothing else lives there). The database is a copy of a
template database the CLI prepared once per run, so a test starts from the same key, devices and
secret without paying for the CLI again.

The balancer is nginx running the `nginx three-nodes` block of `docs/operations.md` as written,
its `server` lines pointed at the three nodes. A killed node refuses connections at once, so
nginx passes new connections (and a command POST it had sent to the dead node) to a live one.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from tests.backend.faults._process import Credentials, ServerProcess, copy_data_dir, free_port
from tests.backend.multinode_faults._roaming import RoamingDevice
from tests.support import nginx

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Mapping
    from pathlib import Path

    from tests.support.pgcluster import PgCluster

NODES = 3
NGINX_LABEL = "three-nodes"
# How long a step that crosses nodes (a provision, a grant) may take on a loaded 2-core machine
# before a test gives up on it; far above what it takes (well under a second).
SETTLE_S = 20.0


@dataclass(frozen=True)
class Template:
    """What the CLI prepared once: a data directory (its master key), a template database, and
    the credentials both hold."""

    data_dir: Path
    database: str
    credentials: Credentials


@dataclass
class Deployment:
    """Three running nodes and their balancer."""

    nodes: list[ServerProcess]
    balancer: nginx.Nginx
    database_url: str
    credentials: Credentials

    @property
    def url(self) -> str:
        return self.balancer.url

    def __getitem__(self, index: int) -> ServerProcess:
        return self.nodes[index]

    def __iter__(self) -> Iterator[ServerProcess]:
        return iter(self.nodes)

    def client(self, node: int | None = None, timeout: float = 30) -> httpx.AsyncClient:
        """A consumer client of node `node`, or of the balancer when None."""
        base = self.url if node is None else self.nodes[node].url
        return httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {self.credentials.api_key}"},
            timeout=timeout,
        )

    def address(self, node: int) -> str:
        """Node `node`'s `host:port`, as a device's placement names it."""
        return f"127.0.0.1:{self.nodes[node].port}"

    @contextlib.asynccontextmanager
    async def roaming(
        self,
        device: str,
        *,
        device_node: int | None = None,
        session_node: int | None = None,
        fallback_node: int | None = None,
    ) -> AsyncIterator[RoamingDevice]:
        """The enrolled device `device`, its sockets placed on these nodes (None: where the
        balancer sends them); stopped at the end."""

        def at(node: int | None) -> str | None:
            return None if node is None else self.address(node)

        roaming = RoamingDevice(
            self.url,
            self.credentials.devices[device],
            device_node=at(device_node),
            session_node=at(session_node),
            fallback_node=at(fallback_node),
        )
        try:
            yield roaming
        finally:
            await roaming.stop()

    async def session_answer(
        self, node: int | None, session_id: str, path: str = ""
    ) -> tuple[int, Any]:
        """`GET /v1/sessions/{session_id}/{path}` as node `node` (None: the balancer) answers."""
        async with self.client(node) as http:
            response = await http.get(f"/v1/sessions/{session_id}/{path}".rstrip("/"))
        return response.status_code, response.json()

    async def kill(self, node: int) -> None:
        """SIGKILL one node: its sockets close, its in-memory state is gone."""
        await self.nodes[node].kill()

    def logs(self) -> str:
        return "\n".join(f"--- {n.name}\n{n.output()[-4000:]}" for n in self.nodes)


@contextlib.asynccontextmanager
async def three_nodes(
    template: Template,
    cluster: PgCluster,
    run_dir: Path,
    *,
    crash_after: Mapping[int, str] | None = None,
) -> AsyncIterator[Deployment]:
    """Start the deployment on a fresh copy of the template database; stop and drop it after.

    Args:
        template: The CLI-prepared data directory and database.
        cluster: The run's throwaway PostgreSQL cluster.
        run_dir: Logs, telemetry, the nodes' data directories and nginx's prefix.
        crash_after: Node index -> `UNDERSTUDY_CRASH_AFTER` step for that node.
    """
    name = f"mn_{uuid.uuid4().hex[:12]}"
    database_url = await asyncio.to_thread(cluster.create_database, name, template.database)
    port = free_port()
    public_url = f"http://127.0.0.1:{port}"
    nodes = [
        ServerProcess(
            copy_data_dir(template.data_dir, run_dir / f"node-{i}"),
            run_dir,
            name=f"node-{i}",
            env={
                "UNDERSTUDY_DATABASE_URL": database_url,
                "UNDERSTUDY_PUBLIC_URL": public_url,
                "UNDERSTUDY_NODE_ID": f"node-{i}",
            },
        )
        for i in range(NODES)
    ]
    crash_after = crash_after or {}
    try:
        spawned = [await node.spawn(crash_after.get(i)) for i, node in enumerate(nodes)]
        block = nginx.pointed_at(
            nginx.runbook_nginx_block(NGINX_LABEL), [f"127.0.0.1:{n.port}" for n in nodes], port
        )
        with nginx.Nginx.start(block, run_dir / "nginx", port) as balancer:
            await asyncio.gather(*(n.start(p) for n, p in zip(nodes, spawned, strict=True)))
            yield Deployment(nodes, balancer, database_url, template.credentials)
    finally:
        await asyncio.gather(*(node.stop() for node in nodes))
        await asyncio.to_thread(cluster.drop_database, name)
