"""Service settings, read from the environment.

Every variable is optional; an empty one counts as unset. A bad value raises `ConfigError` naming
the variable and what to do; messages never repeat a value that may be secret.

| Variable | Default | Meaning |
|---|---|---|
| `SYNTHETIC_USERS_DATA_DIR` | `.synthetic-users` | database, artifacts |
| `SYNTHETIC_USERS_HOST` / `_PORT` | `127.0.0.1` / `8788` | where `serve` listens |
| `UNDERSTUDY_URL` | `http://127.0.0.1:8787` | the Understudy backend personas drive |
| `UNDERSTUDY_OPERATOR_TOKEN` | none | its operator credential (enrolling fleet devices) |
| `UNDERSTUDY_API_KEY` | none | its consumer API key (sessions and commands) |
| `SYNTHETIC_USERS_MODEL` | `heuristic` | `heuristic`, `openai` or `anthropic` |
| `SYNTHETIC_USERS_MODEL_NAME` | per provider | the provider's model (`gpt-4o-mini`, …) |
| `SYNTHETIC_USERS_MODEL_BASE_URL` | provider's | an OpenAI-compatible server (vLLM, Ollama, …) |
| `SYNTHETIC_USERS_MODEL_API_KEY` | none | falls back to `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` |
| `SYNTHETIC_USERS_MODEL_TIMEOUT_S` | `60` | one model call |
| `SYNTHETIC_USERS_HEURISTIC_SEED` | `7` | the heuristic persona's seed |
| `FLEET_MAX_BROWSERS` | `3` | Chromium profiles the fleet may run at once |
| `SYNTHETIC_USERS_EXTENSION_DIR` | none | the built Understudy extension the fleet loads |
| `SYNTHETIC_USERS_HEADED` | off | `1`: show the fleet's browsers (needs a display) |
| `SYNTHETIC_USERS_DEFAULT_TURN_BUDGET` | `30` | a run's `turn_budget` when it gives none |
| `SYNTHETIC_USERS_MAX_GENERATIONS` | `3` | browser generations per session before it fails |
| `SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS` | off | `1`: loopback `http(s)` targets too (local dev) |
| `SYNTHETIC_USERS_RETENTION_DAYS` | `30` | days a run is kept after it ends (CLI: per customer) |
| `SYNTHETIC_USERS_RETENTION_SWEEP_MINUTES` | `60` | how often expired runs are deleted |
| `SYNTHETIC_USERS_RUNS_PER_MINUTE` | `10` | runs each API key may create a minute (`0`: no limit) |
| `SYNTHETIC_USERS_MAX_ACTIVE_RUNS` | `5` | queued + running runs per customer (`0`: no limit) |
| `SYNTHETIC_USERS_REQUESTS_PER_MINUTE` | `600` | requests per API key a minute (`0`: none) |
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, cast
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

ModelKind = Literal["heuristic", "openai", "anthropic"]
MODEL_KINDS: Final = ("heuristic", "openai", "anthropic")
DB_FILE: Final = "synthetic-users.db"
ARTIFACTS_DIR: Final = "artifacts"


class ConfigError(ValueError):
    """A setting is malformed or out of range; the message says which and what to do."""


@dataclass(frozen=True)
class Settings:
    """Every setting of the service, with the embedded defaults."""

    data_dir: Path = Path(".synthetic-users")
    host: str = "127.0.0.1"
    port: int = 8788
    understudy_url: str = "http://127.0.0.1:8787"
    understudy_operator_token: str | None = field(default=None, repr=False)
    understudy_api_key: str | None = field(default=None, repr=False)
    model: ModelKind = "heuristic"
    model_name: str | None = None
    model_base_url: str | None = None
    model_api_key: str | None = field(default=None, repr=False)
    model_timeout_s: float = 60.0
    heuristic_seed: int = 7
    fleet_max_browsers: int = 3
    extension_dir: Path | None = None
    headed: bool = False
    default_turn_budget: int = 30
    max_generations: int = 3
    allow_loopback_targets: bool = False
    retention_days: int = 30
    retention_sweep_minutes: int = 60
    runs_per_minute: int = 10
    max_active_runs: int = 5
    requests_per_minute: int = 600

    @property
    def db_path(self) -> Path:
        return self.data_dir / DB_FILE

    @property
    def artifacts_dir(self) -> Path:
        return self.data_dir / ARTIFACTS_DIR


def _text(value: str, variable: str) -> str:
    return value.strip()


def _secret(value: str, variable: str) -> str:
    return value.strip()


def _path(value: str, variable: str) -> Path:
    return Path(value.strip()).expanduser()


def _int(low: int, high: int) -> Callable[[str, str], int]:
    def parse(value: str, variable: str) -> int:
        try:
            number = int(value.strip())
        except ValueError:
            raise ConfigError(f"{variable} must be a whole number") from None
        if not low <= number <= high:
            raise ConfigError(f"{variable} must be between {low} and {high}")
        return number

    return parse


def _seconds(value: str, variable: str) -> float:
    try:
        number = float(value.strip())
    except ValueError:
        raise ConfigError(f"{variable} must be a number of seconds") from None
    if not 0 < number <= 3600:
        raise ConfigError(f"{variable} must be more than 0 and at most 3600 seconds")
    return number


def _flag(value: str, variable: str) -> bool:
    text = value.strip().lower()
    if text not in ("1", "0", "true", "false", "yes", "no"):
        raise ConfigError(f"{variable} must be 1 or 0")
    return text in ("1", "true", "yes")


def _url(value: str, variable: str) -> str:
    url = value.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{variable} must be an absolute http(s) URL, like http://127.0.0.1:8787")
    return url


def _model(value: str, variable: str) -> ModelKind:
    kind = value.strip().lower()
    if kind not in MODEL_KINDS:
        raise ConfigError(f"{variable} must be one of {', '.join(MODEL_KINDS)}")
    return cast("ModelKind", kind)


_FIELDS: Final[dict[str, tuple[tuple[str, ...], Callable[[str, str], object]]]] = {
    "data_dir": (("SYNTHETIC_USERS_DATA_DIR",), _path),
    "host": (("SYNTHETIC_USERS_HOST",), _text),
    "port": (("SYNTHETIC_USERS_PORT",), _int(1, 65535)),
    "understudy_url": (("UNDERSTUDY_URL",), _url),
    "understudy_operator_token": (("UNDERSTUDY_OPERATOR_TOKEN",), _secret),
    "understudy_api_key": (("UNDERSTUDY_API_KEY",), _secret),
    "model": (("SYNTHETIC_USERS_MODEL",), _model),
    "model_name": (("SYNTHETIC_USERS_MODEL_NAME",), _text),
    "model_base_url": (("SYNTHETIC_USERS_MODEL_BASE_URL",), _url),
    "model_timeout_s": (("SYNTHETIC_USERS_MODEL_TIMEOUT_S",), _seconds),
    "heuristic_seed": (("SYNTHETIC_USERS_HEURISTIC_SEED",), _int(0, 2**31 - 1)),
    "fleet_max_browsers": (("FLEET_MAX_BROWSERS",), _int(1, 10)),
    "extension_dir": (("SYNTHETIC_USERS_EXTENSION_DIR",), _path),
    "headed": (("SYNTHETIC_USERS_HEADED",), _flag),
    "default_turn_budget": (("SYNTHETIC_USERS_DEFAULT_TURN_BUDGET",), _int(1, 200)),
    "max_generations": (("SYNTHETIC_USERS_MAX_GENERATIONS",), _int(1, 20)),
    "allow_loopback_targets": (("SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS",), _flag),
    "retention_days": (("SYNTHETIC_USERS_RETENTION_DAYS",), _int(1, 3650)),
    "retention_sweep_minutes": (("SYNTHETIC_USERS_RETENTION_SWEEP_MINUTES",), _int(1, 1440)),
    "runs_per_minute": (("SYNTHETIC_USERS_RUNS_PER_MINUTE",), _int(0, 100_000)),
    "max_active_runs": (("SYNTHETIC_USERS_MAX_ACTIVE_RUNS",), _int(0, 100_000)),
    "requests_per_minute": (("SYNTHETIC_USERS_REQUESTS_PER_MINUTE",), _int(0, 1_000_000)),
}
_PROVIDER_KEYS: Final = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read the settings from `env` (default `os.environ`).

    Raises:
        ConfigError: a value is malformed or out of range.
    """
    env = os.environ if env is None else env
    values: dict[str, object] = {}
    for name, (variables, parse) in _FIELDS.items():
        for variable in variables:
            if env.get(variable, "").strip():
                values[name] = parse(env[variable], variable)
    model = cast("ModelKind", values.get("model", "heuristic"))
    key = env.get("SYNTHETIC_USERS_MODEL_API_KEY", "").strip()
    if not key and model in _PROVIDER_KEYS:
        key = env.get(_PROVIDER_KEYS[model], "").strip()
    if key:
        values["model_api_key"] = key
    return Settings(**values)  # type: ignore[arg-type]
