"""Rate limits: runs a minute and requests a minute per API key, active runs per customer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from synthetic_users._api import RateLimits
from synthetic_users._api._ratelimit import TokenBuckets, retry_after
from synthetic_users._store import RunState
from tests.synthetic_users.api.conftest import RUN, problem, running_api

if TYPE_CHECKING:
    from pathlib import Path


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_a_minutes_burst_then_one_token_per_interval() -> None:
    clock = Clock()
    buckets = TokenBuckets(6, clock)  # one token every 10 s
    assert [buckets.take("k") for _ in range(6)] == [0.0] * 6
    assert buckets.take("k") == 10.0
    clock.now += 4
    assert buckets.take("k") == 6.0
    clock.now += 6
    assert buckets.take("k") == 0.0
    assert buckets.take("other") == 0.0  # each key has its own


def test_a_token_given_back_is_available_again_but_never_beyond_the_burst() -> None:
    buckets = TokenBuckets(1, Clock())
    assert buckets.take("k") == 0.0
    buckets.give_back("k")
    assert buckets.take("k") == 0.0
    buckets.give_back("k")
    buckets.give_back("k")
    assert buckets.take("k") == 0.0
    assert buckets.take("k") > 0


def test_zero_means_no_limit_and_retry_after_is_whole_seconds() -> None:
    buckets = TokenBuckets(0, Clock())
    assert all(buckets.take("k") == 0.0 for _ in range(10_000))
    assert (retry_after(0.01), retry_after(1.0), retry_after(1.2)) == (1, 1, 2)


async def test_creating_runs_faster_than_the_limit_is_a_429_with_retry_after(
    tmp_path: Path,
) -> None:
    clock = Clock()
    limits = RateLimits(runs_per_minute=2, clock=clock)
    async with running_api(tmp_path, limits=limits) as api:
        assert [(await api.create_run()).status_code for _ in range(2)] == [202, 202]
        refused = await api.create_run()
        body = problem(refused, 429, "rate_limited")
        assert refused.headers["retry-after"] == "30"
        assert "2 runs a minute" in body["detail"]
        assert len(api.services.created) == 2
        # Another key of another customer is not slowed down by this one.
        other = await api.client.post("/runs", json=RUN, headers=api.auth(api.other_key))
        assert other.status_code == 202
        clock.now += 30
        assert (await api.create_run()).status_code == 202


async def test_an_idempotent_replay_is_never_charged(tmp_path: Path) -> None:
    limits = RateLimits(runs_per_minute=1, clock=Clock())
    async with running_api(tmp_path, limits=limits) as api:
        first = await api.create_run(key="same")
        assert first.status_code == 202
        for _ in range(5):
            again = await api.create_run(key="same")
            assert (again.status_code, again.json()["run_id"]) == (200, first.json()["run_id"])
        problem(await api.create_run(key="new"), 429, "rate_limited")


async def test_a_refused_request_does_not_use_up_the_limit(tmp_path: Path) -> None:
    limits = RateLimits(runs_per_minute=1, clock=Clock())
    async with running_api(tmp_path, limits=limits) as api:
        private = {**RUN, "target_url": "https://10.0.0.1/"}
        for _ in range(3):
            problem(await api.create_run(private), 400, "target_not_allowed")
        assert (await api.create_run()).status_code == 202


async def test_a_customer_at_its_active_runs_bound_gets_too_many_active_runs(
    tmp_path: Path,
) -> None:
    limits = RateLimits(max_active_runs=2, active_retry_s=30)
    async with running_api(tmp_path, limits=limits) as api:
        first = (await api.create_run()).json()["run_id"]
        second = (await api.create_run()).json()["run_id"]
        api.store.set_run_state(second, RunState.RUNNING)  # queued and running both count
        refused = await api.create_run()
        body = problem(refused, 429, "too_many_active_runs")
        assert refused.headers["retry-after"] == "30"
        assert "2 queued or running runs" in body["detail"]
        # The other customer has none.
        other = await api.client.post("/runs", json=RUN, headers=api.auth(api.other_key))
        assert other.status_code == 202
        # When one ends, there is room again.
        cancel = await api.client.delete(f"/runs/{first}", headers=api.auth())
        assert cancel.status_code == 202
        assert (await api.create_run()).status_code == 202


async def test_every_endpoint_is_limited_per_key(tmp_path: Path) -> None:
    clock = Clock()
    limits = RateLimits(requests_per_minute=3, clock=clock)
    async with running_api(tmp_path, limits=limits) as api:
        for _ in range(3):
            assert (await api.client.get("/runs", headers=api.auth())).status_code == 200
        refused = await api.client.get("/personas", headers=api.auth())
        problem(refused, 429, "rate_limited")
        assert refused.headers["retry-after"] == "20"
        assert (await api.client.get("/runs", headers=api.auth(api.other_key))).status_code == 200
        # Unauthenticated requests are refused as such, and health is never limited.
        assert (await api.client.get("/runs")).status_code == 401
        assert (await api.client.get("/healthz")).status_code == 200
        clock.now += 20
        assert (await api.client.get("/runs", headers=api.auth())).status_code == 200
