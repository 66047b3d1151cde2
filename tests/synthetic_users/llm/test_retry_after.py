"""Reading how long a provider asked us to wait."""

from __future__ import annotations

import pytest

from synthetic_users._llm._retry_after import retry_after_s

NOW = 1_764_590_000.0  # 2025-12-01T11:53:20Z


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "30"}, 30.0),
        ({"retry-after": "1.25"}, 1.25),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "30"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "30"}, 30.0),
        ({"retry-after": "Mon, 01 Dec 2025 11:54:00 GMT"}, 40.0),
        ({"retry-after": "Mon, 01 Dec 2025 11:54:00 -0000"}, 40.0),
        ({"retry-after": "Mon, 01 Dec 2025 11:00:00 GMT"}, 0.0),  # in the past: go now
        ({"retry-after": "-5"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "whenever"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], wait: float | None) -> None:
    assert retry_after_s(headers, now=NOW) == wait
