"""The running stack of a real-Chromium test module, and a session on it.

One backend, one Chromium with the extension enrolled and online, one local site: what a module
that drives pages through the API needs, started once and torn down on any exit.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from demo.chromium import launch

from ._agent import Agent
from .conftest import (
    Site,
    device_row,
    enroll_extension,
    eventually,
    idem,
    spare_ready,
    start_backend,
    stop_backend,
    unattended,
    wait_online,
    wait_status,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import httpx

    from demo.chromium import Chromium

    from .conftest import Backend, Route


@dataclass
class Env:
    backend: Backend
    browser: Chromium
    http: httpx.AsyncClient
    site: Site
    agent: Agent


@contextlib.asynccontextmanager
async def running_stack(
    root: Path, routes: dict[str, Route], extension_dist: Path
) -> AsyncIterator[Env]:
    """Backend, Chromium (with a person's own tab open) and the site, until the block ends."""
    site = Site(routes)
    backend = await start_backend(root)
    browser = await launch(root / "profile", extension_dist, urls=[site.url("/own-tab")])
    try:
        credential = backend.enroll()
        async with backend.client(backend.api_key()) as http:
            await enroll_extension(browser, backend, credential)
            await wait_online(http)
            yield Env(backend, browser, http, site, Agent(http))
    finally:
        browser.kill()
        await stop_backend(backend)
        site.close()


@contextlib.asynccontextmanager
async def session(env: Env) -> AsyncIterator[str]:
    """A connected unattended session on the site, deleted and its capacity freed afterwards."""
    created = await env.http.post(
        "/v1/sessions",
        json=unattended([env.site.origin], f"profile-{uuid.uuid4().hex}"),
        headers=idem(),
    )
    assert created.status_code == 201, created.text
    session_id: str = created.json()["sessionId"]
    await spare_ready(env.browser)
    try:
        yield session_id
    finally:
        deleted = await env.http.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code in (200, 202), deleted.text
        await wait_status(env.http, session_id, 410)

        async def released() -> bool:
            return bool((await device_row(env.http))["usedCapacity"] == 0)

        await eventually(released, what="the device releasing the session's capacity")
