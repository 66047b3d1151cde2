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
| `SYNTHETIC_USERS_ALLOW_LOOPBACK` | off | `1`: loopback webhook endpoints (development only) |
| `SYNTHETIC_USERS_WEBHOOK_TIMEOUT_S` | `10` | one webhook delivery attempt |
| `SYNTHETIC_USERS_WEBHOOK_RETRY_SCHEDULE` | 5 s … 8 h, 9 delays | seconds before each retry |
| `STRIPE_API_KEY` | none | when set, usage is posted to Stripe Meter Events |
| `STRIPE_API_BASE` | `https://api.stripe.com` | where the Stripe SDK sends (tests: local) |
| `STRIPE_METERS` | two meters, below | `dimension=event_name`, comma-separated |

Webhook retries wait a random time up to each delay in turn (full jitter), by default
5,30,120,600,3600,7200,14400,28800,28800 seconds: about 24 hours in all. Stripe meters default
to `browser_minutes=synthetic_users_browser_minutes,model_tokens=synthetic_users_model_tokens`;
the dimensions are `browser_minutes`, `turns`, `input_tokens`, `output_tokens`, `model_tokens`.
| `SYNTHETIC_USERS_SMTP_HOST` / `_SMTP_PORT` | `127.0.0.1` / `2525` | inbox SMTP (`0`: off) |
| `SYNTHETIC_USERS_INBOX_DOMAIN` | `inbox.localhost` | the domain of every persona's address |
| `SYNTHETIC_USERS_INBOX_MAX_BYTES` | `1048576` | the largest message the inbox accepts |
| `SYNTHETIC_USERS_MASTER_KEY` | `<data dir>/master.key` | base64 of 32 bytes; wraps customer keys |
"""

from __future__ import annotations

import os
import re
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
WEBHOOK_RETRY_SCHEDULE: Final = (5.0, 30.0, 120.0, 600.0, 3600.0, 7200.0, 14400.0, 28800.0, 28800.0)
STRIPE_METERS: Final = {
    "browser_minutes": "synthetic_users_browser_minutes",
    "model_tokens": "synthetic_users_model_tokens",
}
USAGE_DIMENSIONS: Final = (
    "browser_minutes",
    "turns",
    "input_tokens",
    "output_tokens",
    "model_tokens",
)


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
    allow_loopback: bool = False
    webhook_timeout_s: float = 10.0
    webhook_retry_schedule: tuple[float, ...] = WEBHOOK_RETRY_SCHEDULE
    stripe_api_key: str | None = field(default=None, repr=False)
    stripe_api_base: str = "https://api.stripe.com"
    stripe_meters: dict[str, str] = field(default_factory=lambda: dict(STRIPE_METERS))
    # -- inbox per session
    smtp_host: str = "127.0.0.1"
    smtp_port: int = 2525  # 0: no inbox
    inbox_domain: str = "inbox.localhost"
    inbox_max_bytes: int = 1024 * 1024
    master_key: bytes | None = field(default=None, repr=False)

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


def _schedule(value: str, variable: str) -> tuple[float, ...]:
    try:
        delays = tuple(float(part) for part in value.split(","))
    except ValueError:
        raise ConfigError(
            f"{variable} must be seconds separated by commas, like 5,30,120"
        ) from None
    if not 1 <= len(delays) <= 30 or not all(0 < d <= 86400 for d in delays):
        raise ConfigError(
            f"{variable} must list 1 to 30 delays, each more than 0 and at most 86400"
        )
    return delays


def _meters(value: str, variable: str) -> dict[str, str]:
    meters: dict[str, str] = {}
    for part in value.split(","):
        dimension, _, event_name = part.strip().partition("=")
        if dimension not in USAGE_DIMENSIONS or not event_name.strip():
            raise ConfigError(
                f"{variable} must be dimension=event_name pairs separated by commas; dimensions "
                f"are {', '.join(USAGE_DIMENSIONS)}"
            )
        meters[dimension] = event_name.strip()
    return meters


_LABEL: Final = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN: Final = re.compile(rf"^(?=.{{1,253}}$)({_LABEL}\.)*{_LABEL}$")


def _domain(value: str, variable: str) -> str:
    domain = value.strip().lower().rstrip(".")
    if not _DOMAIN.match(domain):
        raise ConfigError(f"{variable} must be a domain name, like inbox.localhost")
    return domain


def _master_key(value: str, variable: str) -> bytes:
    from synthetic_users._safety._credentials import MasterKeyError, parse_master_key

    try:
        return parse_master_key(value, variable)
    except MasterKeyError as exc:
        raise ConfigError(str(exc)) from None


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
    "allow_loopback": (("SYNTHETIC_USERS_ALLOW_LOOPBACK",), _flag),
    "webhook_timeout_s": (("SYNTHETIC_USERS_WEBHOOK_TIMEOUT_S",), _seconds),
    "webhook_retry_schedule": (("SYNTHETIC_USERS_WEBHOOK_RETRY_SCHEDULE",), _schedule),
    "stripe_api_key": (("STRIPE_API_KEY",), _secret),
    "stripe_api_base": (("STRIPE_API_BASE",), _url),
    "stripe_meters": (("STRIPE_METERS",), _meters),
    # -- inbox per session
    "smtp_host": (("SYNTHETIC_USERS_SMTP_HOST",), _text),
    "smtp_port": (("SYNTHETIC_USERS_SMTP_PORT",), _int(0, 65535)),
    "inbox_domain": (("SYNTHETIC_USERS_INBOX_DOMAIN",), _domain),
    "inbox_max_bytes": (("SYNTHETIC_USERS_INBOX_MAX_BYTES",), _int(1024, 64 * 1024 * 1024)),
    "master_key": (("SYNTHETIC_USERS_MASTER_KEY",), _master_key),
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
