"""Settings from the environment and a TOML file, and the master key file."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import stat
from pathlib import Path

import pytest

from understudy._config import (
    MAX_FRAME_BYTES,
    VARIABLES,
    ConfigError,
    ConnectionLimits,
    DeviceTokenEntry,
    QuotaPolicy,
    Settings,
    ensure_master_key,
    load_settings,
)
from understudy._security import generate_token, token_digest

DIGEST = "a" * 64


def test_defaults_follow_the_seed() -> None:
    settings = load_settings({})
    assert settings.host == "127.0.0.1"
    assert settings.port == 8787
    assert settings.data_dir == Path(".understudy")
    assert settings.public_url == "http://127.0.0.1:8787"
    assert settings.unattended_enabled_tenants == frozenset()
    assert settings.sqlite_synchronous == "FULL"
    assert settings.sqlite_group_commit is True
    assert settings.master_key is None
    assert settings.telemetry_path is None
    assert dict(settings.device_tokens) == {}
    assert settings.quota == QuotaPolicy(
        session_creates_per_actor_per_min=10,
        commands_per_session_per_min=120,
        commands_per_tenant_per_min=600,
        credential_fills_per_actor_per_min=30,
        device_tickets_per_device_per_min=30,
        commands_per_session_lifetime=10_000,
        requests_per_credential_per_min=300,
    )


def test_environment_sets_service_fields() -> None:
    key = bytes(range(32))
    settings = load_settings(
        {
            "UNDERSTUDY_HOST": "0.0.0.0",  # noqa: S104 - a value under test, not a bind
            "UNDERSTUDY_PORT": "9000",
            "UNDERSTUDY_DATA_DIR": "/var/lib/understudy",
            "UNDERSTUDY_PUBLIC_URL": "https://understudy.example/",
            "UNDERSTUDY_MASTER_KEY": base64.b64encode(key).decode(),
            "UNDERSTUDY_SQLITE_SYNCHRONOUS": "normal",
            "UNDERSTUDY_SQLITE_GROUP_COMMIT": "off",
            "UNDERSTUDY_TELEMETRY_PATH": "/tmp/t.jsonl",  # noqa: S108 - never opened
            "UNATTENDED_ENABLED_TENANTS": '["acme", "globex"]',
        }
    )
    assert settings.port == 9000
    assert settings.data_dir == Path("/var/lib/understudy")
    assert settings.public_url == "https://understudy.example"
    assert settings.socket_base_url == "wss://understudy.example"
    assert settings.master_key == key
    assert settings.sqlite_synchronous == "NORMAL"
    assert settings.sqlite_group_commit is False
    assert settings.telemetry_path == Path("/tmp/t.jsonl")  # noqa: S108
    assert settings.unattended_enabled_tenants == {"acme", "globex"}
    assert key.hex() not in repr(settings)


def test_group_commit_switch_refuses_other_words() -> None:
    with pytest.raises(ConfigError, match="UNDERSTUDY_SQLITE_GROUP_COMMIT: give true or false"):
        load_settings({"UNDERSTUDY_SQLITE_GROUP_COMMIT": "sometimes"})


def test_a_database_url_selects_postgresql_and_stays_out_of_the_repr() -> None:
    url = "postgresql://svc:s3cret@db.internal:5432/understudy"
    settings = load_settings({"UNDERSTUDY_DATABASE_URL": url})
    assert settings.database_url == url
    assert "s3cret" not in repr(settings)
    assert load_settings({}).database_url is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("sqlite:///tmp/x.db", "give a PostgreSQL URL like postgresql://"),
        ("postgresql://svc:s3cret@db:99999/understudy", "give a PostgreSQL URL like"),
        ("postgresql://svc:s3cret@db:5432", "name the database in the URL's path"),
    ],
)
def test_a_bad_database_url_is_refused_without_repeating_it(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match="UNDERSTUDY_DATABASE_URL") as caught:
        load_settings({"UNDERSTUDY_DATABASE_URL": value})
    assert message in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_public_url_follows_host_and_port_and_brackets_ipv6() -> None:
    assert load_settings({"UNDERSTUDY_PORT": "9001"}).socket_base_url == "ws://127.0.0.1:9001"
    assert load_settings({"UNDERSTUDY_HOST": "::1"}).public_url == "http://[::1]:8787"


def test_empty_variables_count_as_unset() -> None:
    assert load_settings({"UNDERSTUDY_PORT": "", "QUOTA_POLICY": " "}) == load_settings({})


def test_only_the_documented_variable_names_are_read() -> None:
    assert load_settings({"port": "9000", "understudy_port": "9000"}).port == 8787


def test_quota_policy_accepts_camel_and_snake_case() -> None:
    settings = load_settings(
        {"QUOTA_POLICY": '{"commandsPerSessionPerMin": 60, "commands_per_tenant_per_min": 100}'}
    )
    assert settings.quota.commands_per_session_per_min == 60
    assert settings.quota.commands_per_tenant_per_min == 100
    assert settings.quota.session_creates_per_actor_per_min == 10


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (
            '{"foo": 1}',
            "QUOTA_POLICY: unknown key 'foo'; known keys: commandsPerSessionLifetime, "
            "commandsPerSessionPerMin, commandsPerTenantPerMin, credentialFillsPerActorPerMin, "
            "deviceTicketsPerDevicePerMin, requestsPerCredentialPerMin, "
            "sessionCreatesPerActorPerMin (snake_case also accepted)",
        ),
        (
            '{"commandsPerSessionPerMin": 0}',
            "QUOTA_POLICY: 'commandsPerSessionPerMin' must be a whole number from 1 to 1000000, "
            "got 0",
        ),
        ('{"commandsPerSessionPerMin": 1000001}', "got 1000001"),
        ('{"commandsPerSessionPerMin": true}', "got True"),
        ('{"commandsPerSessionPerMin": 10.0}', "got 10.0"),
        ('{"commandsPerSessionPerMin": "10"}', "got '10'"),
        (
            '{"commandsPerSessionPerMin": 5, "commands_per_session_per_min": 6}',
            "is given twice (camelCase and snake_case); keep one",
        ),
        ("[1]", "QUOTA_POLICY: give a JSON object"),
        ("{commands: 1}", "QUOTA_POLICY: not valid JSON"),
    ],
)
def test_bad_quota_policy_is_refused_with_an_actionable_message(policy: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"QUOTA_POLICY": policy})
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("UNDERSTUDY_PORT", "eighty", "UNDERSTUDY_PORT: give a port number from 0 to 65535"),
        ("UNDERSTUDY_PORT", "70000", "UNDERSTUDY_PORT: give a port number"),
        ("UNATTENDED_ENABLED_TENANTS", "acme", "UNATTENDED_ENABLED_TENANTS: not valid JSON"),
        ("UNATTENDED_ENABLED_TENANTS", '["acme", ""]', "give a JSON list of tenant ids"),
        ("UNATTENDED_ENABLED_TENANTS", '{"acme": true}', "give a JSON list of tenant ids"),
        ("UNDERSTUDY_SQLITE_SYNCHRONOUS", "OFF", "give FULL (survives power loss"),
        ("UNDERSTUDY_PUBLIC_URL", "ftp://x.example", "give the URL clients use"),
        ("UNDERSTUDY_PUBLIC_URL", "https://x.example/?a", "remove the query"),
        ("UNDERSTUDY_MASTER_KEY", "not base64!", "not valid base64"),
        ("UNDERSTUDY_MASTER_KEY", base64.b64encode(b"k" * 16).decode(), "decodes to 16 bytes"),
        ("UNDERSTUDY_ALLOWED_SOCKET_ORIGINS", '["chrome-extension://abc"]', "32 letters a-p"),
        ("UNDERSTUDY_ALLOWED_SOCKET_ORIGINS", '["http://evil.example"]', "[0]: http is allowed"),
    ],
)
def test_bad_values_name_the_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({variable: value})
    assert message in str(caught.value)
    assert str(caught.value).startswith(variable)


def test_master_key_errors_never_echo_the_key() -> None:
    short = base64.b64encode(b"secret-material!").decode()
    with pytest.raises(ConfigError) as caught:
        load_settings({"UNDERSTUDY_MASTER_KEY": short})
    assert short not in str(caught.value)


def test_device_tokens_map_digests_to_tenant_and_device() -> None:
    credential = generate_token("device")
    digest = token_digest(credential)
    settings = load_settings(
        {"DEVICE_TOKENS": f'{{"{digest.upper()}": {{"tenant": "acme", "device": "laptop-1"}}}}'}
    )
    assert dict(settings.device_tokens) == {digest: DeviceTokenEntry("acme", "laptop-1")}
    with pytest.raises(TypeError):
        settings.device_tokens[digest] = DeviceTokenEntry("x", "y")  # type: ignore[index]


def test_a_raw_credential_in_device_tokens_is_refused_without_echoing_it() -> None:
    credential = generate_token("device")
    with pytest.raises(ConfigError) as caught:
        load_settings({"DEVICE_TOKENS": f'{{"{credential}": {{"tenant": "a", "device": "b"}}}}'})
    message = str(caught.value)
    assert message.startswith("DEVICE_TOKENS: key #1 is not a 64-character hex SHA-256 digest")
    assert "looks like a raw credential" in message
    assert credential not in message


@pytest.mark.parametrize(
    "entry",
    [
        '{"tenant": "acme"}',
        '{"tenant": "acme", "device": ""}',
        '"acme"',
        '{"tenant": "a", "device": "b", "x": 1}',
    ],
)
def test_device_token_entries_must_name_tenant_and_device(entry: str) -> None:
    with pytest.raises(ConfigError, match=r"DEVICE_TOKENS: entry #1 must be exactly"):
        load_settings({"DEVICE_TOKENS": f'{{"{DIGEST}": {entry}}}'})


def test_toml_file_is_read_and_the_environment_wins(tmp_path: Path) -> None:
    config = tmp_path / "understudy.toml"
    config.write_text(
        'port = 9100\nhost = "127.0.0.2"\nunattended_enabled_tenants = ["acme"]\n'
        "[quota]\ncommandsPerSessionPerMin = 50\ncommands_per_tenant_per_min = 400\n"
        f'[device_tokens.{DIGEST}]\ntenant = "acme"\ndevice = "laptop-1"\n',
        encoding="utf-8",
    )
    settings = load_settings(
        {
            "UNDERSTUDY_CONFIG": str(config),
            "UNDERSTUDY_PORT": "9200",
            "QUOTA_POLICY": '{"commandsPerTenantPerMin": 500}',
        }
    )
    assert settings.port == 9200
    assert settings.host == "127.0.0.2"
    assert settings.public_url == "http://127.0.0.2:9200"
    assert settings.unattended_enabled_tenants == {"acme"}
    assert settings.quota.commands_per_session_per_min == 50
    assert settings.quota.commands_per_tenant_per_min == 500
    assert settings.device_tokens[DIGEST] == DeviceTokenEntry("acme", "laptop-1")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("prot = 1\n", "unknown key 'prot'"),
        ('master_key = "abc"\n', "master_key cannot live in the config file"),
        ("port = [\n", "is not valid TOML"),
        ("port = true\n", "[port]: give a port number"),
        ("[quota]\nfoo = 1\n", "[quota]: unknown key 'foo'"),
    ],
)
def test_bad_toml_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    config = tmp_path / "understudy.toml"
    config.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings({}, file=config)
    assert message in str(caught.value)
    assert str(config) in str(caught.value)


def test_missing_config_file_is_reported() -> None:
    with pytest.raises(ConfigError, match="UNDERSTUDY_CONFIG: cannot read"):
        load_settings({"UNDERSTUDY_CONFIG": "/nonexistent/understudy.toml"})


def test_socket_origins_default_to_our_extension_or_no_origin() -> None:
    settings = load_settings({})
    assert settings.socket_origin_allowed(None)
    assert settings.socket_origin_allowed("chrome-extension://bpeobpapddlllpjoebimcillbkllkega")
    assert not settings.socket_origin_allowed("chrome-extension://abcdefghijklmnopabcdefghijklmnop")
    assert not settings.socket_origin_allowed("https://evil.example")


def test_configured_socket_origins_are_exact() -> None:
    extension = "chrome-extension://abcdefghijklmnopabcdefghijklmnop"
    settings = load_settings(
        {"UNDERSTUDY_ALLOWED_SOCKET_ORIGINS": f'["{extension}", "HTTP://LOCALHOST:5173/"]'}
    )
    assert settings.allowed_socket_origins == {extension, "http://localhost:5173"}
    assert settings.socket_origin_allowed(extension)
    assert settings.socket_origin_allowed("http://localhost:5173")
    assert not settings.socket_origin_allowed("chrome-extension://pppppppppppppppppppppppppppppppp")


def test_master_key_file_is_created_private_and_reused(tmp_path: Path) -> None:
    data_dir = tmp_path / "state" / "understudy"
    settings = Settings(data_dir=data_dir)
    key = ensure_master_key(settings)
    assert len(key) == 32
    path = data_dir / "master.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert ensure_master_key(settings) == key
    assert sorted(p.name for p in data_dir.iterdir()) == ["master.key"]


def test_configured_master_key_wins_over_the_file(tmp_path: Path) -> None:
    key = b"c" * 32
    assert ensure_master_key(Settings(data_dir=tmp_path, master_key=key)) == key
    assert not (tmp_path / "master.key").exists()


def test_master_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    path.write_bytes(b"k" * 32)
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by other users; run `chmod 600"):
        ensure_master_key(Settings(data_dir=tmp_path))


def test_truncated_master_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    path.write_bytes(b"k" * 8)
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="holds 8 bytes"):
        ensure_master_key(Settings(data_dir=tmp_path))


def test_connection_limits_merge_over_the_defaults() -> None:
    limits = load_settings(
        {"UNDERSTUDY_CONNECTION_LIMITS": '{"helloTimeoutS": 2.5, "socket_frame_burst": 50}'}
    ).connection_limits
    assert (limits.hello_timeout_s, limits.socket_frame_burst) == (2.5, 50)
    assert limits.request_head_timeout_s == 10.0
    assert limits.max_frame_bytes == MAX_FRAME_BYTES


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"helloTimeout": 2}', "unknown key 'helloTimeout'; known keys: helloTimeoutS"),
        ('{"helloTimeoutS": 0}', "'helloTimeoutS' must be a number from 0.1 to 600"),
        ('{"socketFrameBurst": 2.5}', "'socketFrameBurst' must be a whole number from 1"),
        ('{"maxFrameBytes": true}', "'maxFrameBytes' must be a whole number from 65536"),
        ("[1]", 'give a JSON object like {"requestHeadTimeoutS": 10'),
    ],
)
def test_connection_limits_refuse_bad_values_by_name(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match="UNDERSTUDY_CONNECTION_LIMITS") as caught:
        load_settings({"UNDERSTUDY_CONNECTION_LIMITS": value})
    assert message in str(caught.value)


RUNBOOK = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def _runbook_rows() -> dict[str, str]:
    """The settings table of the runbook: variable -> its Default cell."""
    rows = {}
    for line in RUNBOOK.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| `([A-Z_]+)` \| (.*?) \| ", line)
        if match:
            rows[match[1]] = match[2]
    return rows


def test_the_runbook_lists_every_setting_with_its_default() -> None:
    rows = _runbook_rows()
    assert set(rows) == {*VARIABLES.values(), "UNDERSTUDY_CONFIG", "UNDERSTUDY_CRASH_AFTER"}
    defaults = Settings()
    expected = {
        "host": f"`{defaults.host}`",
        "port": f"`{defaults.port}`",
        "data_dir": f"`{defaults.data_dir}`",
        "public_url": "`http://{host}:{port}`",
        "unattended_enabled_tenants": "`[]`",
        "quota": "`{}`",
        "device_tokens": "`{}`",
        "sqlite_synchronous": f"`{defaults.sqlite_synchronous}`",
        "sqlite_group_commit": f"`{str(defaults.sqlite_group_commit).lower()}`",
        "telemetry_path": "unset",
        "database_url": "unset",
        "node_id": "unset",
        "log_format": f"`{defaults.log_format}`",
        "connection_limits": "`{}`",
    }
    assert defaults.unattended_enabled_tenants == frozenset()
    assert (dict(defaults.device_tokens), defaults.telemetry_path) == ({}, None)
    for name, cell in expected.items():
        assert rows[VARIABLES[name]] == cell, name
    assert defaults.master_key is None
    assert rows[VARIABLES["master_key"]].startswith("`data_dir/master.key`")
    origins = json.dumps(sorted(defaults.allowed_socket_origins))
    assert rows[VARIABLES["allowed_socket_origins"]].startswith(f"`{origins}`")


def test_the_runbook_gives_the_quota_and_connection_limit_defaults() -> None:
    text = RUNBOOK.read_text(encoding="utf-8")
    documented = {key: int(n) for key, n in re.findall(r"^\| `(\w+)` \| (\d+)", text, re.M)}
    assert documented == {
        _camel(f.name): getattr(QuotaPolicy(), f.name) for f in dataclasses.fields(QuotaPolicy)
    }
    row = _runbook_rows()[VARIABLES["connection_limits"]]
    assert row == "`{}`"
    line = next(
        x for x in text.splitlines() if x.startswith(f"| `{VARIABLES['connection_limits']}`")
    )
    limits = {key: float(n) for key, n in re.findall(r"`(\w+)` (\d+(?:\.\d+)?)\b", line)}
    assert limits == {
        _camel(f.name): float(getattr(ConnectionLimits(), f.name))
        for f in dataclasses.fields(ConnectionLimits)
    }


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.capitalize() for part in rest)
