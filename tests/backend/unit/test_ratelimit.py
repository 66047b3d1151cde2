"""The approximate per-key limiter, driven by a fake clock."""

from __future__ import annotations

import pytest

from understudy._ratelimit import ApproximateLimiter


class FakeClock:
    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def test_allows_the_limit_then_refuses_with_a_positive_whole_wait() -> None:
    clock = FakeClock()
    limiter = ApproximateLimiter(limit=5, window_s=60, now=clock)
    assert [limiter.hit("cred") for _ in range(5)] == [None] * 5
    wait = limiter.hit("cred")
    assert wait is not None
    assert wait >= 1
    assert wait == int(wait)


def test_recovers_after_the_advised_wait_but_not_before() -> None:
    clock = FakeClock()
    limiter = ApproximateLimiter(limit=5, window_s=60, now=clock)
    for _ in range(5):
        limiter.hit("cred")
    wait = limiter.hit("cred")
    assert wait is not None
    clock.now += wait - 1
    assert limiter.hit("cred") is not None
    clock.now += 1
    assert limiter.hit("cred") is None


def test_refused_hits_do_not_extend_the_wait() -> None:
    clock = FakeClock()
    limiter = ApproximateLimiter(limit=3, window_s=60, now=clock)
    for _ in range(3):
        limiter.hit("cred")
    first = limiter.hit("cred")
    for _ in range(100):
        limiter.hit("cred")
    assert limiter.hit("cred") == first


def test_keys_are_counted_separately() -> None:
    clock = FakeClock()
    limiter = ApproximateLimiter(limit=2, window_s=60, now=clock)
    limiter.hit("a")
    limiter.hit("a")
    assert limiter.hit("a") is not None
    assert limiter.hit("b") is None


def test_previous_window_counts_in_proportion_to_its_overlap() -> None:
    clock = FakeClock(start=6000.0)  # a window boundary
    limiter = ApproximateLimiter(limit=10, window_s=60, now=clock)
    for _ in range(10):
        assert limiter.hit("cred") is None
    # Half-way through the next window, half of the previous 10 hits still count.
    clock.now += 90
    allowed = 0
    while limiter.hit("cred") is None:
        allowed += 1
    assert allowed == 5


def test_a_steady_rate_just_under_the_limit_is_never_refused() -> None:
    clock = FakeClock()
    limiter = ApproximateLimiter(limit=300, window_s=60, now=clock)
    refused = 0
    for _ in range(2900):  # ten minutes at 290/min
        clock.now += 60 / 290
        refused += limiter.hit("cred") is not None
    assert refused == 0


def test_a_steady_rate_over_the_limit_is_held_near_the_limit() -> None:
    clock = FakeClock()
    limiter = ApproximateLimiter(limit=300, window_s=60, now=clock)
    allowed = 0
    for _ in range(6000):  # ten minutes at 600/min
        clock.now += 0.1
        allowed += limiter.hit("cred") is None
    assert 2900 <= allowed <= 3100


def test_idle_keys_are_evicted_after_two_windows() -> None:
    clock = FakeClock()
    limiter = ApproximateLimiter(limit=5, window_s=60, now=clock)
    for index in range(1000):
        limiter.hit(f"cred-{index}")
    assert len(limiter) == 1000
    clock.now += 121
    limiter.hit("fresh")
    assert len(limiter) == 1


def test_recently_seen_keys_are_kept() -> None:
    clock = FakeClock()
    limiter = ApproximateLimiter(limit=5, window_s=60, now=clock)
    limiter.hit("old")
    clock.now += 100
    limiter.hit("recent")
    clock.now += 61
    limiter.hit("other")
    assert len(limiter) == 2


@pytest.mark.parametrize(("limit", "window"), [(0, 60.0), (5, 0.0), (5, -1.0)])
def test_nonsense_configuration_is_refused(limit: int, window: float) -> None:
    with pytest.raises(ValueError):
        ApproximateLimiter(limit=limit, window_s=window, now=FakeClock())
