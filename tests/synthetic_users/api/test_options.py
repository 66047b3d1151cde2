"""`OPTIONS` lists every method of a path, also where several handlers share it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.synthetic_users.api.conftest import Api


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/runs", "GET, OPTIONS, POST"),
        ("/runs/run_0f8e2a446d0f4d398f0c5a9d1c7e3f21", "DELETE, GET, OPTIONS"),
        ("/personas", "GET, OPTIONS, POST"),
        ("/personas/per_5f1d2c3b4a594e8fa7b6c5d4e3f2a1b0", "DELETE, GET, OPTIONS"),
        ("/webhooks", "GET, OPTIONS, POST"),
        ("/webhooks/whk_3b9d2f0e6c1a4d7e8f9a0b1c2d3e4f50", "DELETE, GET, OPTIONS"),
        ("/healthz", "GET, OPTIONS"),
    ],
)
async def test_options_allows_every_method_of_the_path(api: Api, path: str, allow: str) -> None:
    # Litestar 2 answered from the first handler alone (`Allow: OPTIONS, POST` on /runs).
    response = await api.client.options(path)
    assert response.status_code == 204
    assert response.headers["allow"] == allow
