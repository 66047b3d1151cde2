"""The safety settings: loopback targets off unless asked for, limits and retention in range."""

from __future__ import annotations

import pytest

from synthetic_users._config import ConfigError, load_settings


def test_safety_defaults_are_strict() -> None:
    settings = load_settings({})
    assert settings.allow_loopback_targets is False
    assert (settings.retention_days, settings.retention_sweep_minutes) == (30, 60)
    assert (settings.runs_per_minute, settings.max_active_runs) == (10, 5)
    assert settings.requests_per_minute == 600


def test_safety_settings_come_from_the_environment() -> None:
    settings = load_settings(
        {
            "SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS": "1",
            "SYNTHETIC_USERS_RETENTION_DAYS": "7",
            "SYNTHETIC_USERS_RETENTION_SWEEP_MINUTES": "5",
            "SYNTHETIC_USERS_RUNS_PER_MINUTE": "0",
            "SYNTHETIC_USERS_MAX_ACTIVE_RUNS": "20",
            "SYNTHETIC_USERS_REQUESTS_PER_MINUTE": "0",
        }
    )
    assert settings.allow_loopback_targets is True
    assert (settings.retention_days, settings.retention_sweep_minutes) == (7, 5)
    assert (settings.runs_per_minute, settings.max_active_runs) == (0, 20)
    assert settings.requests_per_minute == 0


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS", "maybe"),
        ("SYNTHETIC_USERS_RETENTION_DAYS", "0"),
        ("SYNTHETIC_USERS_RETENTION_SWEEP_MINUTES", "0"),
        ("SYNTHETIC_USERS_RUNS_PER_MINUTE", "-1"),
        ("SYNTHETIC_USERS_MAX_ACTIVE_RUNS", "lots"),
    ],
)
def test_a_bad_safety_setting_is_refused_by_name(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        load_settings({variable: value})
