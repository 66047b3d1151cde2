"""Service settings from the environment and an optional TOML file.

Environment variables win over the file (``UNDERSTUDY_CONFIG``); quota overrides merge key by
key (defaults, then the file's ``[quota]`` table, then ``QUOTA_POLICY``). The seed's own variables
keep their bare names: ``UNATTENDED_ENABLED_TENANTS``, ``QUOTA_POLICY`` and ``DEVICE_TOKENS``; the
others are ``UNDERSTUDY_<FIELD>``. An empty variable counts as unset. Every bad value raises
:class:`ConfigError` naming the variable and what to do; messages never repeat a value that may be
secret.

pydantic-settings reads and layers the sources (`_Layers`); the parsers below give each value its
type and its message. `Settings` stays a plain frozen dataclass, so building one in code (tests,
`dataclasses.replace`) never reads the environment.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import os
import re
import secrets
import stat
import tomllib
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from understudy._origins import OriginError, canonicalize_origins
from understudy._security import MIN_MASTER_KEY_BYTES
from understudy.generated.protocol import HELLO_TIMEOUT_S

# The largest frame a client sends is a `screenshot` result; the default frame bound covers it and
# its envelope. Both are the spec's numbers (spec/frames/protocol-constants.json).
from understudy.generated.protocol import MAX_FRAME_BYTES as MAX_FRAME_BYTES
from understudy.generated.protocol import MAX_SCREENSHOT_CHARS as MAX_SCREENSHOT_CHARS

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from importlib.resources.abc import Traversable

    from pydantic.fields import FieldInfo

# The id fixed by the `key` in the extension manifest: by default only its origin (or no Origin
# header, for non-browser clients) may open a socket; tickets still gate every connection.
EXTENSION_ID: Final[str | None] = "bpeobpapddlllpjoebimcillbkllkega"
_EXTENSION_ORIGIN = re.compile(r"chrome-extension://[a-p]{32}")
_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
_QUOTA_MAX: Final = 1_000_000


class ConfigError(ValueError):
    """A setting is missing, malformed or out of range; the message says which and what to do."""


@dataclass(frozen=True)
class QuotaPolicy:
    """Per-minute and lifetime limits: exact SQLite counters, then the approximate backstop."""

    session_creates_per_actor_per_min: int = 10
    commands_per_session_per_min: int = 120
    commands_per_tenant_per_min: int = 600
    credential_fills_per_actor_per_min: int = 30
    device_tickets_per_device_per_min: int = 30
    commands_per_session_lifetime: int = 10_000
    requests_per_credential_per_min: int = 300


@dataclass(frozen=True)
class ConnectionLimits:
    """Time, rate and size limits of one client connection (HTTP or WebSocket).

    The time limits are wall-clock seconds on the event loop, not the injected clock: they guard
    the process, not a business deadline.
    """

    # From the connection's start (or the end of its previous response) to a complete request
    # head. Covers a connection that sends nothing and headers trickled a byte at a time.
    request_head_timeout_s: float = 10.0
    # From a socket's accept to its accepted `hello`.
    hello_timeout_s: float = HELLO_TIMEOUT_S
    # Sustained frames a second one socket may send, and the burst above it. A session socket
    # may also send three frames (write_ready, result, a dialog) per command its session quota
    # admits, so raised quotas raise its bound with them.
    socket_frames_per_s: float = 50.0
    socket_frame_burst: int = 200
    max_frame_bytes: int = MAX_FRAME_BYTES


_LIMIT_RANGES: Final[dict[str, tuple[float, float]]] = {
    "request_head_timeout_s": (0.1, 600.0),
    "hello_timeout_s": (0.1, 600.0),
    "socket_frames_per_s": (1.0, 1_000_000.0),
    "socket_frame_burst": (1, 1_000_000),
    "max_frame_bytes": (64 * 1024, 256 * 1024 * 1024),
}


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.capitalize() for part in rest)


_QUOTA_KEYS: Final = {
    **{f.name: f.name for f in dataclasses.fields(QuotaPolicy)},
    **{_camel(f.name): f.name for f in dataclasses.fields(QuotaPolicy)},
}


@dataclass(frozen=True)
class DeviceTokenEntry:
    """Who a device credential digest belongs to."""

    tenant: str
    device: str


@dataclass(frozen=True)
class Settings:
    """Everything the service reads at start-up. Build it with :func:`load_settings`."""

    host: str = "127.0.0.1"
    port: int = 8787
    data_dir: Path = Path(".understudy")
    public_url: str = ""  # empty means http://{host}:{port}
    unattended_enabled_tenants: frozenset[str] = frozenset()
    quota: QuotaPolicy = QuotaPolicy()
    device_tokens: Mapping[str, DeviceTokenEntry] = field(
        default_factory=lambda: MappingProxyType({})
    )
    master_key: bytes | None = field(default=None, repr=False)
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    sqlite_group_commit: bool = True
    # PostgreSQL instead of the SQLite file in data_dir; may hold a password, so not in repr.
    database_url: str | None = field(default=None, repr=False)
    # This process's name among the nodes on one PostgreSQL database; generated when unset.
    node_id: str | None = None
    allowed_socket_origins: frozenset[str] = (
        frozenset({f"chrome-extension://{EXTENSION_ID}"}) if EXTENSION_ID else frozenset()
    )
    telemetry_path: Path | None = None
    log_format: Literal["text", "json"] = "text"
    connection_limits: ConnectionLimits = ConnectionLimits()

    def __post_init__(self) -> None:
        if not self.public_url:
            host = f"[{self.host}]" if ":" in self.host else self.host
            object.__setattr__(self, "public_url", f"http://{host}:{self.port}")

    @property
    def socket_base_url(self) -> str:
        """``public_url`` with the ws/wss scheme, for building socket URLs."""
        scheme, rest = self.public_url.split("://", 1)
        return f"{'wss' if scheme == 'https' else 'ws'}://{rest}"

    def socket_origin_allowed(self, origin: str | None) -> bool:
        """Whether a socket upgrade with this ``Origin`` header may proceed.

        No header means a non-browser client, which cannot be a cross-site page; it still needs a
        ticket.
        """
        if origin is None:
            return True
        if not self.allowed_socket_origins:
            return origin.startswith("chrome-extension://")
        return origin in self.allowed_socket_origins


# --- value parsers: (value, name) -> parsed; value is a str from the env or a TOML value ---------


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}: give a non-empty string")
    return value.strip()


def _host(value: object, name: str) -> str:
    host = _text(value, name)
    if any(char.isspace() for char in host):
        raise ConfigError(f"{name}: a host name has no spaces; give one like 127.0.0.1")
    return host


def _port(value: object, name: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ConfigError(f"{name}: give a port number from 0 to 65535, like 8787")
    return value


def _path(value: object, name: str) -> Path:
    return Path(_text(value, name)).expanduser()


def _public_url(value: object, name: str) -> str:
    url = _text(value, name).rstrip("/")
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a bad port or IPv6 literal
        valid = False
    if not valid or "@" in url or any(char.isspace() for char in url):
        raise ConfigError(
            f"{name}: give the URL clients use to reach the service, like https://u.example"
        )
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise ConfigError(f"{name}: remove the query and fragment; give a base URL only")
    return url


def _json(value: object, name: str, example: str) -> object:
    if not isinstance(value, str):
        return value  # already structured (TOML)
    try:
        return json.loads(value)
    except json.JSONDecodeError as error:
        # Position only: the value may hold secrets.
        raise ConfigError(
            f"{name}: not valid JSON ({error.msg} at char {error.pos}); {example}"
        ) from None


def _tenants(value: object, name: str) -> frozenset[str]:
    example = 'give a JSON list of tenant ids, like ["acme"], or [] to disable unattended mode'
    data = _json(value, name, example)
    if not isinstance(data, list) or not all(isinstance(t, str) and t for t in data):
        raise ConfigError(f"{name}: {example}")
    return frozenset(data)


def _quota_overrides(value: object, name: str) -> dict[str, int]:
    known = ", ".join(sorted(_camel(f.name) for f in dataclasses.fields(QuotaPolicy)))
    data = _json(value, name, 'give a JSON object like {"commandsPerSessionPerMin": 60}')
    if not isinstance(data, dict):
        raise ConfigError(f'{name}: give a JSON object like {{"commandsPerSessionPerMin": 60}}')
    overrides: dict[str, int] = {}
    for key, limit in data.items():
        if key not in _QUOTA_KEYS:
            raise ConfigError(
                f"{name}: unknown key {key!r}; known keys: {known} (snake_case also accepted)"
            )
        field_name = _QUOTA_KEYS[key]
        if field_name in overrides:
            raise ConfigError(
                f"{name}: {key!r} is given twice (camelCase and snake_case); keep one"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _QUOTA_MAX:
            raise ConfigError(
                f"{name}: {key!r} must be a whole number from 1 to {_QUOTA_MAX}, got {limit!r}"
            )
        overrides[field_name] = limit
    return overrides


def _device_tokens(value: object, name: str) -> Mapping[str, DeviceTokenEntry]:
    example = (
        'give a JSON object like {"<sha256 hex of the credential>": '
        '{"tenant": "acme", "device": "laptop-1"}}'
    )
    data = _json(value, name, example)
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: {example}")
    entries: dict[str, DeviceTokenEntry] = {}
    for position, (digest, entry) in enumerate(data.items()):
        # Keys are not echoed: a misconfigured key may be a raw credential.
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            hint = " (it looks like a raw credential)" if str(digest).startswith("udc_") else ""
            raise ConfigError(
                f"{name}: key #{position + 1} is not a 64-character hex SHA-256 digest{hint}; "
                "store sha256(credential), never the credential itself"
            )
        if (
            not isinstance(entry, dict)
            or set(entry) != {"tenant", "device"}
            or not all(isinstance(v, str) and v for v in entry.values())
        ):
            raise ConfigError(
                f'{name}: entry #{position + 1} must be exactly {{"tenant": "…", "device": "…"}} '
                "with non-empty strings"
            )
        entries[digest.lower()] = DeviceTokenEntry(tenant=entry["tenant"], device=entry["device"])
    return MappingProxyType(entries)


def _master_key(value: object, name: str) -> bytes:
    text = _text(value, name)
    try:
        key = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(
            f"{name}: not valid base64; generate one with `openssl rand -base64 32`"
        ) from None
    if len(key) < MIN_MASTER_KEY_BYTES:
        raise ConfigError(
            f"{name}: decodes to {len(key)} bytes, at least {MIN_MASTER_KEY_BYTES} are needed; "
            "generate one with `openssl rand -base64 32`"
        )
    return key


def _synchronous(value: object, name: str) -> Literal["FULL", "NORMAL"]:
    mode = _text(value, name).upper()
    if mode == "FULL":
        return "FULL"
    if mode == "NORMAL":
        return "NORMAL"
    raise ConfigError(f"{name}: give FULL (survives power loss, the default) or NORMAL")


def _database_url(value: object, name: str) -> str:
    # Never echo the value: it may carry a password.
    example = (
        "give a PostgreSQL URL like postgresql://understudy@db.example:5432/understudy, or leave "
        "it unset to use SQLite in the data directory"
    )
    url = _text(value, name)
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("postgresql", "postgres") and parts.port != 0
    except ValueError:  # a bad port or IPv6 literal
        valid = False
    if not valid or any(char.isspace() for char in url):
        raise ConfigError(f"{name}: {example}")
    if not parts.path.strip("/"):
        raise ConfigError(f"{name}: name the database in the URL's path; {example}")
    return url


def _log_format(value: object, name: str) -> Literal["text", "json"]:
    mode = _text(value, name).lower()
    if mode == "text":
        return "text"
    if mode == "json":
        return "json"
    raise ConfigError(f"{name}: give text (the default) or json (one JSON object a line)")


def _switch(value: object, name: str) -> bool:
    if isinstance(value, bool):
        return value
    word = _text(value, name).lower()
    if word in ("1", "true", "on", "yes"):
        return True
    if word in ("0", "false", "off", "no"):
        return False
    raise ConfigError(f"{name}: give true or false")


def _socket_origins(value: object, name: str) -> frozenset[str]:
    example = 'give a JSON list like ["chrome-extension://<32-letter extension id>"]'
    data = _json(value, name, example)
    if not isinstance(data, list):
        raise ConfigError(f"{name}: {example}")
    origins: set[str] = set()
    for index, origin in enumerate(data):
        if isinstance(origin, str) and origin.startswith("chrome-extension://"):
            if not _EXTENSION_ORIGIN.fullmatch(origin):
                raise ConfigError(f"{name}[{index}]: an extension id is 32 letters a-p")
            origins.add(origin)
            continue
        try:
            origins.update(canonicalize_origins([origin]))
        except OriginError as error:
            raise ConfigError(f"{name}[{index}]: {error.reason}") from None
    return frozenset(origins)


def _connection_limits(value: object, name: str) -> ConnectionLimits:
    example = 'give a JSON object like {"requestHeadTimeoutS": 10, "helloTimeoutS": 10}'
    data = _json(value, name, example)
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: {example}")
    keys = {_camel(field_name): field_name for field_name in _LIMIT_RANGES}
    keys.update({field_name: field_name for field_name in _LIMIT_RANGES})
    chosen: dict[str, float | int] = {}
    for key, limit in data.items():
        field_name = keys.get(key)
        if field_name is None:
            known = ", ".join(sorted(_camel(f) for f in _LIMIT_RANGES))
            raise ConfigError(f"{name}: unknown key {key!r}; known keys: {known}")
        low, high = _LIMIT_RANGES[field_name]
        whole = isinstance(low, int)
        number = isinstance(limit, int | float) and not isinstance(limit, bool)
        if not number or (whole and not isinstance(limit, int)) or not low <= limit <= high:
            kind = "a whole number" if whole else "a number"
            raise ConfigError(f"{name}: {key!r} must be {kind} from {low:g} to {high:g}")
        chosen[field_name] = limit
    return ConnectionLimits(**chosen)  # type: ignore[arg-type]


def _node_id(value: object, name: str) -> str | None:
    text = _text(value, name).strip()
    if not text:
        return None
    if len(text) > 64 or not all(c.isalnum() or c in "-_." for c in text):
        raise ConfigError(
            f"{name}: give up to 64 letters, digits, '-', '_' or '.' (a host name works), "
            "or leave it unset for a generated one"
        )
    return text


def _optional_path(value: object, name: str) -> Path | None:
    return None if isinstance(value, str) and not value.strip() else _path(value, name)


class _Parse:
    """Field metadata: the parser that turns one layer's raw value into the setting."""

    def __init__(self, parse: Callable[[object, str], Any]) -> None:
        self.parse = parse


class _Layers(BaseSettings):
    """Every setting under its variable name, as pydantic-settings layers them.

    Two layers, the environment over the TOML file (`settings_customise_sources`), merged by
    pydantic-settings: a value replaces the file's, and the quota overrides merge key by key.
    Each layer's values are parsed before the merge, so an error names where the bad value is:
    the variable, or the file and its key. The fields stay `Any`: the parsers type them, with
    the messages pydantic's own errors could not give.
    """

    model_config = SettingsConfigDict(case_sensitive=True, enable_decoding=False, frozen=True)

    host: Annotated[Any, _Parse(_host)] = Field(None, validation_alias="UNDERSTUDY_HOST")
    port: Annotated[Any, _Parse(_port)] = Field(None, validation_alias="UNDERSTUDY_PORT")
    data_dir: Annotated[Any, _Parse(_path)] = Field(None, validation_alias="UNDERSTUDY_DATA_DIR")
    public_url: Annotated[Any, _Parse(_public_url)] = Field(
        None, validation_alias="UNDERSTUDY_PUBLIC_URL"
    )
    unattended_enabled_tenants: Annotated[Any, _Parse(_tenants)] = Field(
        None, validation_alias="UNATTENDED_ENABLED_TENANTS"
    )
    quota: Annotated[Any, _Parse(_quota_overrides)] = Field(None, validation_alias="QUOTA_POLICY")
    device_tokens: Annotated[Any, _Parse(_device_tokens)] = Field(
        None, validation_alias="DEVICE_TOKENS"
    )
    master_key: Annotated[Any, _Parse(_master_key)] = Field(
        None, validation_alias="UNDERSTUDY_MASTER_KEY"
    )
    sqlite_synchronous: Annotated[Any, _Parse(_synchronous)] = Field(
        None, validation_alias="UNDERSTUDY_SQLITE_SYNCHRONOUS"
    )
    sqlite_group_commit: Annotated[Any, _Parse(_switch)] = Field(
        None, validation_alias="UNDERSTUDY_SQLITE_GROUP_COMMIT"
    )
    database_url: Annotated[Any, _Parse(_database_url)] = Field(
        None, validation_alias="UNDERSTUDY_DATABASE_URL"
    )
    node_id: Annotated[Any, _Parse(_node_id)] = Field(None, validation_alias="UNDERSTUDY_NODE_ID")
    allowed_socket_origins: Annotated[Any, _Parse(_socket_origins)] = Field(
        None, validation_alias="UNDERSTUDY_ALLOWED_SOCKET_ORIGINS"
    )
    telemetry_path: Annotated[Any, _Parse(_optional_path)] = Field(
        None, validation_alias="UNDERSTUDY_TELEMETRY_PATH"
    )
    log_format: Annotated[Any, _Parse(_log_format)] = Field(
        None, validation_alias="UNDERSTUDY_LOG_FORMAT"
    )
    connection_limits: Annotated[Any, _Parse(_connection_limits)] = Field(
        None, validation_alias="UNDERSTUDY_CONNECTION_LIMITS"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        env, file = _INPUTS.get()
        layers: list[PydanticBaseSettingsSource] = [_Environment(settings_cls, env)]
        if file is not None:
            layers.append(_TomlFile(settings_cls, file))
        return tuple(layers)


def _variable(info: FieldInfo) -> str:
    return str(info.validation_alias)


# The variable of each setting, in the order they are parsed (and errors reported).
VARIABLES: Final[dict[str, str]] = {
    name: _variable(info) for name, info in _Layers.model_fields.items()
}
# Read as inputs of the loader itself, not settings of the service.
CONFIG_VARIABLE: Final = "UNDERSTUDY_CONFIG"
_INPUTS: ContextVar[tuple[Mapping[str, str], Path | None]] = ContextVar("_INPUTS")


def _parsed(
    fields: dict[str, FieldInfo], raw: Mapping[str, Any], file: Path | None
) -> dict[str, Any]:
    """One layer's values by variable name, each parsed with its field's parser.

    `raw` is keyed by variable (the environment) or, with `file`, by field name (its keys).
    """
    values: dict[str, Any] = {}
    for name, info in fields.items():
        variable = _variable(info)
        key, label = (variable, variable) if file is None else (name, f"{file} [{name}]")
        if key in raw:
            parse = next(m for m in info.metadata if isinstance(m, _Parse)).parse
            values[variable] = parse(raw[key], label)
    return values


class _Environment(EnvSettingsSource):
    """The variables of `env` (not only `os.environ`); an empty or blank one counts as unset."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._given = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # Only the settings' own names: a variable named like a field (`port`) is not one.
        known = set(VARIABLES.values())
        return {k: v for k, v in self._given.items() if k in known and v.strip()}

    def __call__(self) -> dict[str, Any]:
        return _parsed(self.settings_cls.model_fields, self.env_vars, None)


class _TomlFile(TomlConfigSettingsSource):
    """The TOML file: its keys are the field names; `master_key` may not live there."""

    def __init__(self, settings_cls: type[BaseSettings], file: Path) -> None:
        self._file = file
        super().__init__(settings_cls, toml_file=file)

    def _read_files(self, files: object, deep_merge: bool = False) -> dict[str, Any]:
        # The one named file must exist: pydantic-settings would skip a missing one silently.
        return self._read_file(self._file)

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        file = self._file
        try:
            with file.open("rb") as stream:
                data = tomllib.load(stream)
        except OSError as error:
            raise ConfigError(f"{CONFIG_VARIABLE}: cannot read {file}: {error.strerror}") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{CONFIG_VARIABLE}: {file} is not valid TOML: {error}") from None
        if "master_key" in data:
            raise ConfigError(
                f"{file}: master_key cannot live in the config file; set UNDERSTUDY_MASTER_KEY or "
                "let the service create data_dir/master.key"
            )
        for key in data:
            if key not in VARIABLES:
                raise ConfigError(
                    f"{file}: unknown key {key!r}; known keys: {', '.join(sorted(VARIABLES))}"
                )
        return data

    def __call__(self) -> dict[str, Any]:
        return _parsed(self.settings_cls.model_fields, self.toml_data, self._file)


def load_settings(env: Mapping[str, str] | None = None, file: Path | None = None) -> Settings:
    """Read settings from ``env`` (default ``os.environ``) and a TOML file.

    Args:
        env: Environment variables.
        file: TOML file; defaults to ``UNDERSTUDY_CONFIG`` when set.

    Raises:
        ConfigError: a value is malformed or out of range.
    """
    env = os.environ if env is None else env
    if file is None and env.get(CONFIG_VARIABLE, "").strip():
        file = Path(env[CONFIG_VARIABLE].strip()).expanduser()
    token = _INPUTS.set((env, file))
    try:
        layers = _Layers()
    finally:
        _INPUTS.reset(token)
    values = {name: getattr(layers, name) for name in layers.model_fields_set}
    quota = QuotaPolicy(**values.pop("quota", {}))
    return Settings(**values, quota=quota)


def ensure_master_key(settings: Settings) -> bytes:
    """Return the configured master key, or read (creating it once) ``data_dir/master.key``.

    Raises:
        ConfigError: the key file is unreadable, too short, or readable by other users.
    """
    if settings.master_key is not None:
        return settings.master_key
    settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = settings.data_dir / "master.key"
    if not path.exists():
        # Write a temporary file, then link it into place: a concurrent start-up either wins the
        # link or reads the winner's complete key, never a half-written one.
        temp = settings.data_dir / f".master.key.{secrets.token_hex(8)}"
        descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(descriptor, secrets.token_bytes(MIN_MASTER_KEY_BYTES))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
        finally:
            temp.unlink()
        directory = os.open(settings.data_dir, os.O_RDONLY)
        try:
            os.fsync(directory)  # the new name must survive a power cut like the bytes do
        finally:
            os.close(directory)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        raise ConfigError(f"{path}: readable by other users; run `chmod 600 {path}`")
    key = path.read_bytes()
    if len(key) < MIN_MASTER_KEY_BYTES:
        raise ConfigError(
            f"{path}: holds {len(key)} bytes, at least {MIN_MASTER_KEY_BYTES} are needed; "
            "restore it from backup (vault secrets depend on it) or remove it to start afresh"
        )
    return key
