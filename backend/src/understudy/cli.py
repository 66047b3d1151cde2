"""`understudy`: serve the backend, migrate its database, and manage credentials.

    understudy serve                         start on the embedded default (SQLite, one process)
    understudy migrate                       apply pending schema migrations
    understudy keys create --tenant T --actor A    print a new consumer API key once
    understudy keys revoke KEY_ID
    understudy keys list
    understudy devices enroll --tenant T --device D   print a new device credential once
    understudy devices revoke --tenant T --device D
    understudy devices list
    understudy tenants list
    understudy secrets put --tenant T --name N       read the value from stdin (never argv)
    understudy secrets list --tenant T               names only
    understudy secrets delete --tenant T --name N
    understudy secrets rotate-key --tenant T         re-seal them under a new data key

Configuration comes from the environment (UNDERSTUDY_*, UNATTENDED_ENABLED_TENANTS, QUOTA_POLICY,
DEVICE_TOKENS) and an optional TOML file named by UNDERSTUDY_CONFIG. Raw tokens are printed once
and never stored: only their SHA-256 digests are.
"""

from __future__ import annotations

import argparse
import re
import secrets
import sys
import time
from typing import TYPE_CHECKING

from understudy import _security
from understudy._bootstrap import open_database
from understudy._config import ConfigError, ensure_master_key, load_settings
from understudy._security import Keys
from understudy._store import SchemaTooNewError, credentials, current_version, migrate, vault

if TYPE_CHECKING:
    from understudy._config import Settings
    from understudy._store import Database

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def _name(value: str) -> str:
    if not NAME.match(value):
        raise argparse.ArgumentTypeError(
            f"{value!r}: use 1-64 lowercase letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return value


SECRET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _secret_name(value: str) -> str:
    if not SECRET_NAME.match(value):
        raise argparse.ArgumentTypeError(
            f"{value!r}: use 1-128 letters, digits, '.', '_' or '-'; commands name it vault:<name>"
        )
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="understudy",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the service")
    serve.add_argument("--host", help="listen address (default from UNDERSTUDY_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 8787)")
    sub.add_parser("migrate", help="apply pending schema migrations")
    keys = sub.add_parser("keys", help="consumer API keys").add_subparsers(
        dest="action", required=True
    )
    create = keys.add_parser("create", help="create a key for (tenant, actor); printed once")
    create.add_argument("--tenant", required=True, type=_name)
    create.add_argument("--actor", required=True, type=_name)
    revoke = keys.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id")
    keys.add_parser("list", help="list keys (ids only)")
    devices = sub.add_parser("devices", help="enrolled devices").add_subparsers(
        dest="action", required=True
    )
    enroll = devices.add_parser("enroll", help="enroll a device; its credential is printed once")
    enroll.add_argument("--tenant", required=True, type=_name)
    enroll.add_argument("--device", required=True, type=_name)
    drevoke = devices.add_parser("revoke", help="revoke a device")
    drevoke.add_argument("--tenant", required=True, type=_name)
    drevoke.add_argument("--device", required=True, type=_name)
    devices.add_parser("list", help="list devices")
    secrets_ = sub.add_parser("secrets", help="vaulted secrets for fill_secret")
    secret_actions = secrets_.add_subparsers(dest="action", required=True)
    for action, text in (("put", "store a secret read from stdin"), ("delete", "delete a secret")):
        sp = secret_actions.add_parser(action, help=text)
        sp.add_argument("--tenant", required=True, type=_name)
        sp.add_argument("--name", required=True, type=_secret_name)
    for action, text in (
        ("list", "list secret names"),
        ("rotate-key", "re-seal every secret under a fresh data key"),
    ):
        sp = secret_actions.add_parser(action, help=text)
        sp.add_argument("--tenant", required=True, type=_name)
    tenants = sub.add_parser("tenants", help="tenants").add_subparsers(dest="action", required=True)
    tenants.add_parser("list", help="list tenants that have keys or devices")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"understudy: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.command == "serve":
        return _serve(settings, args.host, args.port)
    db = open_database(settings)
    try:
        applied = migrate(db, time.time())
    except SchemaTooNewError as exc:
        db.close()
        print(f"understudy: {exc}", file=sys.stderr)
        return 2
    if args.command == "migrate" and applied:
        print(f"applied schema migration(s) {', '.join(map(str, applied))}")
    try:
        return _manage(db, args, settings)
    finally:
        db.close()


def _manage(db: Database, args: argparse.Namespace, settings: Settings) -> int:
    now = time.time()
    if args.command == "secrets":
        return _secrets(db, args, settings, now)
    if args.command == "migrate":
        print(f"schema is up to date (version {current_version(db)})")
        return 0
    if args.command == "keys" and args.action == "create":
        token = _security.generate_token("consumer")
        key_id = "key_" + secrets.token_hex(6)
        with db.transaction():
            credentials.add_api_key(
                db,
                digest=_security.token_digest(token),
                key_id=key_id,
                tenant=args.tenant,
                actor=args.actor,
                now=now,
            )
        print(f"key id:  {key_id}\napi key: {token}\n(shown once; store it in your secret manager)")
        return 0
    if args.command == "keys" and args.action == "revoke":
        with db.transaction():
            done = credentials.revoke_api_key(db, args.key_id, now)
        print("revoked" if done else f"no active key {args.key_id}")
        return 0 if done else 1
    if args.command == "keys" and args.action == "list":
        for key in credentials.list_api_keys(db):
            state = "revoked" if key.revoked_at else "active"
            print(f"{key.key_id}\t{key.tenant}\t{key.actor}\t{state}")
        return 0
    if args.command == "devices" and args.action == "enroll":
        token = _security.generate_token("device")
        with db.transaction():
            if credentials.get_device(db, args.tenant, args.device) is not None:
                print(f"device {args.tenant}/{args.device} already exists", file=sys.stderr)
                return 1
            credentials.add_device(
                db,
                tenant=args.tenant,
                device_id=args.device,
                digest=_security.token_digest(token),
                now=now,
            )
        print(
            f"device:     {args.tenant}/{args.device}\ncredential: {token}\n"
            "(shown once; enter it in the extension's options page)"
        )
        return 0
    if args.command == "devices" and args.action == "revoke":
        with db.transaction():
            done = credentials.revoke_device(db, args.tenant, args.device, now)
        print("revoked" if done else f"no active device {args.tenant}/{args.device}")
        return 0 if done else 1
    if args.command == "devices" and args.action == "list":
        for device in credentials.all_devices(db):
            state = "revoked" if device.revoked_at else ("online" if device.online else "offline")
            print(f"{device.tenant}\t{device.device_id}\t{state}")
        return 0
    if args.command == "tenants":
        for tenant in credentials.tenants(db):
            print(tenant)
        return 0
    raise AssertionError(f"unhandled command {args}")


def _secrets(db: Database, args: argparse.Namespace, settings: Settings, now: float) -> int:
    keys = Keys.from_master(ensure_master_key(settings))
    if args.action == "put":
        value = sys.stdin.read().removesuffix("\n")
        if not value:
            print(
                "understudy: no secret on stdin; pipe it in, e.g. from your secret manager",
                file=sys.stderr,
            )
            return 2
        with db.transaction():
            vault.put(db, keys, args.tenant, args.name, value, now)
        print(f"stored vault:{args.name} for tenant {args.tenant}")
        return 0
    if args.action == "list":
        for name in vault.names(db, args.tenant):
            print(f"vault:{name}")
        return 0
    if args.action == "delete":
        with db.transaction():
            done = vault.delete(db, args.tenant, args.name)
        print("deleted" if done else f"no secret vault:{args.name}")
        return 0 if done else 1
    with db.transaction():
        count = vault.rotate_data_key(db, keys, args.tenant, now)
    print(f"re-sealed {count} secret(s) under a new data key")
    return 0


def _serve(settings: Settings, host: str | None, port: int | None) -> int:
    import uvicorn

    from understudy._bootstrap import build_services
    from understudy._lock import DataDirInUseError
    from understudy._server import server_config
    from understudy.app import create_app

    if host or port:
        from dataclasses import replace

        settings = replace(
            settings,
            host=host or settings.host,
            port=port or settings.port,
            public_url="" if not _explicit_public_url() else settings.public_url,
        )
    try:
        services = build_services(settings)
    except (ConfigError, SchemaTooNewError, DataDirInUseError) as exc:
        print(f"understudy: {exc}", file=sys.stderr)
        return 2
    print(
        f"understudy: serving on {settings.public_url} (API reference at "
        f"{settings.public_url}/docs)",
        flush=True,
    )
    server = uvicorn.Server(server_config(create_app(services), services))
    server.run()
    # uvicorn.run's own convention: 3 when the server never started (the port was taken).
    return 0 if server.started else 3


def _explicit_public_url() -> bool:
    import os

    return bool(os.environ.get("UNDERSTUDY_PUBLIC_URL"))


if __name__ == "__main__":
    sys.exit(main())
