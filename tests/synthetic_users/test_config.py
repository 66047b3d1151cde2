"""Settings: the embedded defaults, environment overrides, and refusals that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from synthetic_users._config import ConfigError, Settings, load_settings


def test_the_defaults_are_the_embedded_ones() -> None:
    settings = load_settings({})
    assert settings == Settings()
    assert (settings.host, settings.port) == ("127.0.0.1", 8788)
    assert settings.data_dir == Path(".synthetic-users")
    assert settings.db_path == Path(".synthetic-users/synthetic-users.db")
    assert (settings.model, settings.fleet_max_browsers, settings.default_turn_budget) == (
        "heuristic",
        3,
        30,
    )


def test_the_environment_overrides_and_empty_means_unset() -> None:
    settings = load_settings(
        {
            "SYNTHETIC_USERS_DATA_DIR": "/srv/su",
            "SYNTHETIC_USERS_PORT": "9000",
            "SYNTHETIC_USERS_HOST": "",
            "UNDERSTUDY_URL": "http://127.0.0.1:8787/",
            "SYNTHETIC_USERS_MODEL": "OpenAI",
            "SYNTHETIC_USERS_MODEL_BASE_URL": "http://127.0.0.1:11434/v1",
            "OPENAI_API_KEY": "sk-test",
            "FLEET_MAX_BROWSERS": "5",
            "SYNTHETIC_USERS_DEFAULT_TURN_BUDGET": "12",
        }
    )
    assert settings.data_dir == Path("/srv/su") and settings.port == 9000
    assert settings.host == "127.0.0.1"
    assert settings.understudy_url == "http://127.0.0.1:8787"
    assert (settings.model, settings.model_api_key) == ("openai", "sk-test")
    assert settings.model_base_url == "http://127.0.0.1:11434/v1"
    assert (settings.fleet_max_browsers, settings.default_turn_budget) == (5, 12)


def test_secrets_never_show_in_the_settings_repr() -> None:
    settings = load_settings(
        {"UNDERSTUDY_OPERATOR_TOKEN": "uop_secret", "SYNTHETIC_USERS_MODEL_API_KEY": "sk-secret"}
    )
    assert settings.understudy_operator_token == "uop_" + "secret"
    assert "secret" not in repr(settings)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SYNTHETIC_USERS_PORT", "70000"),
        ("SYNTHETIC_USERS_MODEL", "gpt"),
        ("UNDERSTUDY_URL", "localhost:8787"),
        ("FLEET_MAX_BROWSERS", "-7"),
        ("SYNTHETIC_USERS_DEFAULT_TURN_BUDGET", "many"),
        ("SYNTHETIC_USERS_MODEL_TIMEOUT_S", "-1"),
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable) as info:
        load_settings({variable: value})
    assert value not in str(info.value)
