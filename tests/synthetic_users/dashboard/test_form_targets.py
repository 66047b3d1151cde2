"""The run form refuses what `POST /runs` refuses: a target that is not a public HTTPS site."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.synthetic_users.dashboard.conftest import field_errors

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.testing import TestClient

    from tests.synthetic_users.dashboard.conftest import Dashboard

Signed = tuple["TestClient[Litestar]", str]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("https://169.254.169.254/", "the host is a link-local address, which is not allowed"),
        ("http://shop.example/", "only https:// targets are allowed"),
        (
            "https://printer.local/",
            "hosts under .local are local names, which are not allowed",
        ),
    ],
)
def test_a_refused_target_is_named_beside_its_field_and_starts_nothing(
    signed_in: Signed, dash: Dashboard, target: str, message: str
) -> None:
    client, token = signed_in
    page = client.post(
        "/dashboard/runs",
        data={
            "csrf_token": token,
            "target_url": target,
            "task": "Buy",
            "inline-0-name": "Ann",
        },
    )
    assert page.status_code == 400
    assert field_errors(page.text) == {"target_url": message}
    assert dash.store.list_runs("acme").items == []
