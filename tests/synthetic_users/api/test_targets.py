"""`POST /runs` refuses targets that are not public HTTPS sites, after resolving their names."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.synthetic_users.api.conftest import PUBLIC_V4, PUBLIC_V6, RUN, Api, problem, running_api
from tests.synthetic_users.safety.test_ssrf import HOSTILE

if TYPE_CHECKING:
    from pathlib import Path

# The request's pattern and its syntactic checks (credentials, the port's range, brackets) refuse
# these forms before the target policy does.
_VALIDATION = ("ftp:", "file:", "gopher:", "https://[fe80::1%25eth0]/")


@pytest.mark.parametrize("url", HOSTILE[::3])  # every form is in the policy's own table
async def test_a_hostile_target_is_a_400_naming_target_url_and_writes_nothing(
    api: Api, url: str
) -> None:
    response = await api.create_run({**RUN, "target_url": url})
    syntax = url.startswith(_VALIDATION) or "@" in url
    code = "validation_failed" if syntax else "target_not_allowed"
    body = problem(response, 400, code)
    assert [e["path"] for e in body["errors"]] == ["/target_url"]
    assert api.services.created == []
    assert api.store.list_runs("acme").items == []


async def test_a_name_resolving_to_public_and_private_addresses_is_refused(api: Api) -> None:
    api.resolver.answers["shop.example"] = [PUBLIC_V4, PUBLIC_V6, "10.20.30.40"]
    body = problem(await api.create_run(), 400, "target_not_allowed")
    assert body["errors"] == [
        {
            "path": "/target_url",
            "message": "the host name resolves to a private network address, which is not allowed",
        }
    ]
    # What the caller did not send stays unsaid.
    assert "10.20.30.40" not in str(body)
    assert api.resolver.asked == ["shop.example"]
    assert api.services.created == []


async def test_a_name_that_does_not_resolve_is_target_unresolvable(api: Api) -> None:
    api.resolver.answers["shop.example"] = []
    body = problem(await api.create_run(), 400, "target_unresolvable")
    assert [e["path"] for e in body["errors"]] == ["/target_url"]


async def test_a_public_name_is_resolved_and_accepted(api: Api) -> None:
    api.resolver.answers["shop.example"] = [PUBLIC_V4, PUBLIC_V6]
    response = await api.create_run()
    assert response.status_code == 202, response.text
    assert api.resolver.asked == ["shop.example"]


async def test_a_replay_answers_its_run_even_if_the_name_moved_since(api: Api) -> None:
    first = await api.create_run(key="k-1")
    assert first.status_code == 202
    api.resolver.answers["shop.example"] = ["127.0.0.1"]
    again = await api.create_run(key="k-1")
    assert (again.status_code, again.json()["run_id"]) == (200, first.json()["run_id"])
    problem(await api.create_run(key="k-2"), 400, "target_not_allowed")


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/shop", "https://[::1]:8443/", "http://localhost:3000/"]
)
async def test_loopback_targets_need_the_operator_setting(tmp_path: Path, url: str) -> None:
    async with running_api(tmp_path / "off") as api:
        problem(await api.create_run({**RUN, "target_url": url}), 400, "target_not_allowed")
    async with running_api(tmp_path / "on", allow_loopback=True) as api:
        api.resolver.answers["localhost"] = ["127.0.0.1", "::1"]
        response = await api.create_run({**RUN, "target_url": url})
        assert response.status_code == 202, response.text
        # Still nothing but loopback: a private address stays refused with the setting on.
        private = {**RUN, "target_url": "https://10.0.0.1/"}
        problem(await api.create_run(private), 400, "target_not_allowed")
