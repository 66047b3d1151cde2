"""`GET /usage`: the customer's usage events with totals over every page; filters; 400s by name."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from synthetic_users._store import rfc3339
from tests.synthetic_users.api.conftest import conforms, paths, problem
from tests.synthetic_users.usage._helpers import BROWSER_SECONDS, ended_session, installed
from tests.synthetic_users.webhooks._helpers import new_run

if TYPE_CHECKING:
    from tests.synthetic_users.api.conftest import Api


async def test_usage_lists_events_with_totals_over_every_page(api: Api) -> None:
    installed(api.store)
    run_id = new_run(api.store)
    ended_session(api.store, run_id=run_id)
    ended_session(api.store)
    ended_session(api.store, customer="globex")
    response = await api.client.get("/usage?limit=1", headers=api.auth())
    body = response.json()
    conforms(body, "UsageList")
    assert len(body["usage"]) == 1 and "next_cursor" in body
    assert body["totals"] == {
        "sessions": 2,
        "browser_minutes": round(2 * BROWSER_SECONDS / 60, 3),
        "turns": 8,
        "input_tokens": 6200,
        "output_tokens": 300,
    }
    rest = (
        await api.client.get(f"/usage?limit=1&cursor={body['next_cursor']}", headers=api.auth())
    ).json()
    assert len(rest["usage"]) == 1 and "next_cursor" not in rest
    assert rest["usage"][0]["usage_id"] != body["usage"][0]["usage_id"]
    assert body["usage"][0]["billed"] is False
    only = (await api.client.get(f"/usage?run_id={run_id}", headers=api.auth())).json()
    assert [u["run_id"] for u in only["usage"]] == [run_id]
    assert only["totals"]["sessions"] == 1


async def test_the_time_range_selects_by_when_sessions_ended(api: Api) -> None:
    usage = installed(api.store)
    for _ in range(3):
        ended_session(api.store)
    times = sorted(r.created_at for r in usage.list_usage("acme").items)
    since, until = rfc3339(times[1]), rfc3339(times[2])
    response = await api.client.get(
        "/usage", params={"from": since, "to": until}, headers=api.auth()
    )
    assert response.json()["totals"]["sessions"] == 1


async def test_another_customer_sees_none_of_it(api: Api) -> None:
    installed(api.store)
    ended_session(api.store)
    body = (await api.client.get("/usage", headers=api.auth(api.other_key))).json()
    assert body["usage"] == [] and body["totals"]["sessions"] == 0


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("run_id=run_x", "run_id"),
        ("from=yesterday", "from"),
        ("to=2026-12-01T09:00:00", "to"),  # no zone
        ("since=2026-12-01T09:00:00Z", "since"),
        ("limit=0", "limit"),
        ("cursor=abc", "cursor"),
    ],
)
async def test_bad_parameters_are_400_naming_them(api: Api, query: str, name: str) -> None:
    body = problem(
        await api.client.get(f"/usage?{query}", headers=api.auth()), 400, "validation_failed"
    )
    assert paths(body) == [name]
