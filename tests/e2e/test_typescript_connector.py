"""The TypeScript connector against real Chromium: one sign-in through @understudy/connector.

The stack of tests/e2e/_stack.py (backend in this process, Chromium with the extension, a login
site) serves while `pnpm --filter @understudy/connector test:browser` runs
packages/connector/test/browser, which signs in with a vaulted password through the connector's
Session (approval hook with previews) and checks the AI SDK tools refuse writes by default.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from typing import TYPE_CHECKING

import pytest

from understudy._store import vault

from ._pages import LoginRoutes
from ._skip import require_chromium
from ._stack import running_stack
from .conftest import ROOT, TENANT

if TYPE_CHECKING:
    from pathlib import Path

    from .conftest import Route

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PNPM = shutil.which("pnpm")


@pytest.mark.skipif(PNPM is None, reason="pnpm is not on PATH: run scripts/bootstrap")
async def test_the_typescript_connector_signs_in_through_real_chromium(
    tmp_path: Path, extension_dist: Path
) -> None:
    password = f"pw-{secrets.token_urlsafe(18)}"
    login = LoginRoutes(password)
    routes: dict[str, Route] = {"/login": login.login, "/account": login.account}
    async with running_stack(tmp_path, routes, extension_dist) as env:
        services = env.backend.services
        with services.storage.transaction() as tx:
            vault.put(tx.vault, services.keys, TENANT, "login-password", password, 0.0)
        assert PNPM is not None
        proc = await asyncio.create_subprocess_exec(
            PNPM,
            "--filter",
            "@understudy/connector",
            "test:browser",
            cwd=ROOT,
            env={
                **os.environ,
                "UNDERSTUDY_URL": env.backend.url,
                "UNDERSTUDY_API_KEY": env.backend.api_key(),
                "SITE_ORIGIN": env.site.origin,
                "LOGIN_PASSWORD": password,
            },
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=300)
        report = out.decode(errors="replace")
        assert proc.returncode == 0, report
        assert "1 passed" in report, report
        assert login.signed_in, "the site saw a successful sign-in"
        posts = env.site.hits_on("/login", "POST")
        assert len(posts) == 1, "the sign-in was submitted once"
