"""A real Understudy backend, a cookie site and fleets of real Chromium, for the fleet tests.

The backend and the extension build come from the end-to-end suite's harness (uvicorn on
127.0.0.1 with the wall clock; `extension/dist` rebuilt when stale). The fleet provisions itself
through the operator API with an operator token, as the service would; nothing here enrolls a
device or enables the tenant for it.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from synthetic_users._fleet import LocalChromiumFleet
from tests.e2e.conftest import Hit, Reply, Site, extension_dist, start_backend, stop_backend
from understudy import _security
from understudy_connector import AsyncClient, AsyncOperatorClient, render_snapshot

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from synthetic_users._fleet import Profile
    from tests.e2e.conftest import Backend

__all__ = ["Stack", "cookie_site", "extension_dist", "stack"]

TENANT = "synthetic-users"


def _set(hit: Hit) -> Reply:
    value = hit.query.get("v", "")
    return Reply(
        f"<!doctype html><title>set</title><h1>set {value}</h1>",
        headers={"Set-Cookie": f"persona={value}; Path=/; SameSite=Lax"},
    )


def _echo(hit: Hit) -> Reply:
    cookies = hit.headers.get("cookie") or "none"
    return Reply(f"<!doctype html><title>echo</title><h1>cookies: {cookies}</h1>")


@pytest.fixture(scope="session")
def cookie_site() -> Iterator[Site]:
    """`/set?v=X` sets the cookie `persona=X`; `/echo` shows the cookies it was sent."""
    running = Site({"/set": _set, "/echo": _echo})
    try:
        yield running
    finally:
        running.close()


@dataclass
class Stack:
    backend: Backend
    operator_token: str
    extension: Path
    site: Site
    root: Path
    exits: AsyncExitStack

    async def fleet(self, max_browsers: int = 2, **options: Any) -> LocalChromiumFleet:
        """A started fleet on `root` (closed, and every browser killed, at teardown)."""
        operator = AsyncOperatorClient(self.backend.url, self.operator_token)
        self.exits.push_async_callback(operator.aclose)
        fleet = LocalChromiumFleet(
            self.backend.url,
            operator,
            root=self.root,
            extension_dir=self.extension,
            max_browsers=max_browsers,
            tenant=TENANT,
            **options,
        )
        self.exits.push_async_callback(fleet.close)
        await fleet.start()
        return fleet

    async def operator(self) -> AsyncOperatorClient:
        client = AsyncOperatorClient(self.backend.url, self.operator_token)
        self.exits.push_async_callback(client.aclose)
        return client

    async def consumer(self) -> AsyncClient:
        key = await (await self.operator()).create_api_key(TENANT, "fleet-test")
        client = AsyncClient(self.backend.url, key.api_key)
        self.exits.push_async_callback(client.aclose)
        return client

    async def page_text(self, client: AsyncClient, profile: Profile, *paths: str) -> str:
        """Open a session pinned to the profile's device, visit `paths`, return the last page."""
        async with client.session(
            allowed_origins=[self.site.origin],
            profile_state_key=f"fleet-test-{uuid.uuid4()}",
            device_id=profile.device_id,
        ) as session:
            for path in paths:
                await session.navigate(self.site.url(path))
            return render_snapshot(await session.snapshot())


@pytest.fixture
async def stack(tmp_path: Path, extension_dist: Path, cookie_site: Site) -> AsyncIterator[Stack]:
    backend = await start_backend(tmp_path)
    token = _security.generate_token("operator")
    with backend.services.storage.transaction() as tx:
        tx.operators.add_token(
            digest=_security.token_digest(token),
            token_id="op_fleet_test",  # noqa: S106 - an id, not the token
            name="fleet-test",
            now=0.0,
        )
    try:
        async with AsyncExitStack() as exits:
            yield Stack(backend, token, extension_dist, cookie_site, tmp_path / "fleet", exits)
    finally:
        await stop_backend(backend)
