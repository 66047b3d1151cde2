"""LocalChromiumFleet refuses misuse before it launches or enrolls anything (no browser needed)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from synthetic_users._fleet import FleetError, LocalChromiumFleet
from understudy_connector import AsyncOperatorClient

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

# Nothing listens here: a test that reached the operator API would fail with BackendUnreachable.
NOWHERE = "http://127.0.0.1:9"


@pytest.fixture
async def operator() -> AsyncIterator[AsyncOperatorClient]:
    async with AsyncOperatorClient(NOWHERE, "uop_unused") as client:
        yield client


def _extension(tmp_path: Path) -> Path:
    built = tmp_path / "dist"
    built.mkdir()
    # The public key of extension/manifest.json is not needed: any base64 key gives an id.
    (built / "manifest.json").write_text(json.dumps({"key": "AAAA"}))
    return built


def _fleet(operator: AsyncOperatorClient, tmp_path: Path, **options: object) -> LocalChromiumFleet:
    settings: dict[str, object] = {
        "root": tmp_path / "fleet",
        "extension_dir": _extension(tmp_path),
        "max_browsers": 2,
        **options,
    }
    return LocalChromiumFleet(NOWHERE, operator, **settings)  # type: ignore[arg-type]


def test_a_bound_below_one_browser_is_refused(
    operator: AsyncOperatorClient, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="max_browsers"):
        _fleet(operator, tmp_path, max_browsers=0)


async def test_acquiring_before_start_is_refused(
    operator: AsyncOperatorClient, tmp_path: Path
) -> None:
    with pytest.raises(FleetError, match="start"):
        await _fleet(operator, tmp_path).acquire("persona-a")


async def test_an_unbuilt_extension_is_refused_at_start(
    operator: AsyncOperatorClient, tmp_path: Path
) -> None:
    fleet = LocalChromiumFleet(
        NOWHERE, operator, root=tmp_path / "fleet", extension_dir=tmp_path, max_browsers=1
    )
    with pytest.raises(FleetError, match="not usable"):
        await fleet.start()


async def test_a_state_file_of_another_tenant_is_refused_at_start(
    operator: AsyncOperatorClient, tmp_path: Path
) -> None:
    root = tmp_path / "fleet"
    root.mkdir()
    (root / "fleet.json").write_text(
        json.dumps({"version": 1, "tenant": "acme", "devices": {}, "browsers": {}})
    )
    with pytest.raises(FleetError, match="belongs to tenant 'acme'"):
        await _fleet(operator, tmp_path).start()
