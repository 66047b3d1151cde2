"""`understudy`: serve the backend, migrate its database, manage credentials and inspect sessions.

    understudy serve                         start on the embedded default (SQLite, one process)
    understudy migrate                       create the database, or apply pending migrations
    understudy copy-database --to URL        copy the stopped SQLite service onto PostgreSQL
    understudy status                        service, tenants, devices, unfinished sessions
    understudy sessions list [--tenant T] [--all]
    understudy sessions show SESSION_ID
    understudy sessions close SESSION_ID     through the running service's close path
    understudy keys create --tenant T --actor A    print a new consumer API key once
    understudy keys revoke KEY_ID
    understudy keys list
    understudy devices enroll --tenant T --device D   print a new device credential once
    understudy devices revoke --tenant T --device D
    understudy devices list
    understudy tenants list
    understudy operator-tokens create --name N   print a new operator token once
    understudy operator-tokens revoke TOKEN_ID
    understudy operator-tokens list
    understudy secrets put --tenant T --name N       read the value from stdin (never argv)
    understudy secrets list --tenant T               names only
    understudy secrets delete --tenant T --name N
    understudy secrets rotate-key --tenant T         re-seal them under a new data key
    understudy telemetry pseudonym --tenant T        the pseudonym telemetry events carry

Configuration comes from the environment (UNDERSTUDY_*, UNATTENDED_ENABLED_TENANTS, QUOTA_POLICY,
DEVICE_TOKENS) and an optional TOML file named by UNDERSTUDY_CONFIG; --data-dir overrides
UNDERSTUDY_DATA_DIR. Only `serve` and `migrate` create a database: every other command refuses a
data directory without one (exit 2), so a mistyped path never gets a fresh, empty database. Raw
tokens are printed once and never stored: only their SHA-256 digests are. List commands print
JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import sqlite3
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from understudy import _database_copy, _operator, _security
from understudy._bootstrap import missing_database, open_database
from understudy._config import ConfigError, ensure_master_key, load_settings
from understudy._lock import LOCK_FILE, DataDirCopyingError, data_dir_in_use, operator_access
from understudy._security import Keys
from understudy._store import SchemaTooNewError, StorageError, vault

if TYPE_CHECKING:
    import socket

    from understudy._config import Settings
    from understudy._services import Services
    from understudy._store import Database

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
CLOSE_POLL_S = 0.1
EXIT_USAGE = 2  # argparse's own code; the runbook promises it for every start-up refusal


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


def _port(value: str) -> int:
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(
            f"{value!r}: give a port number from 0 to 65535 (0 picks a free one), like 8787"
        )
    return int(value)


def _session_id(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r}: a session id is a UUID, as `understudy sessions list` prints it"
        ) from None


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{value!r}: give seconds from 0 to 3600")
    return seconds


def version_line() -> str:
    """The package version and the API and protocol versions it speaks (docs/versioning.md)."""
    from understudy._reference import API_VERSION, PROTOCOL_VERSIONS, package_version

    protocols = ", ".join(map(str, PROTOCOL_VERSIONS))
    return f"understudy {package_version()} (HTTP API {API_VERSION}, device protocol {protocols})"


class _Commands:
    """Builds the subcommand tree; every leaf gets --data-dir and every option a help text."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.common = argparse.ArgumentParser(add_help=False)
        # SUPPRESS: given after the subcommand it overrides the top-level one, else keeps it.
        self.common.add_argument(
            "--data-dir",
            type=Path,
            default=argparse.SUPPRESS,
            metavar="DIR",
            help="the service's data directory (default: UNDERSTUDY_DATA_DIR or .understudy)",
        )
        self.json = argparse.ArgumentParser(add_help=False)
        self.json.add_argument("--json", action="store_true", help="print JSON instead of text")
        self.root = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def group(self, name: str, help: str) -> Any:
        return self.root.add_parser(name, help=help, description=help).add_subparsers(
            dest="action", required=True, metavar="ACTION"
        )

    def leaf(self, parent: Any, name: str, help: str, *, lists: bool = False) -> Any:
        parents = [self.common, self.json] if lists else [self.common]
        return parent.add_parser(name, help=help, description=help, parents=parents)


def _tenant(parser: argparse.ArgumentParser, help: str = "tenant name") -> None:
    parser.add_argument("--tenant", required=True, type=_name, help=help)


def parser() -> argparse.ArgumentParser:
    """The argument parser (public so a test can check every option has a help text)."""
    top = argparse.ArgumentParser(
        prog="understudy",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    top.add_argument(
        "--version", action="version", version=version_line(), help="print versions and exit"
    )
    top.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the service's data directory (default: UNDERSTUDY_DATA_DIR or .understudy)",
    )
    c = _Commands(top)
    serve = c.leaf(c.root, "serve", "run the service until SIGTERM or Ctrl-C")
    serve.add_argument("--host", help="listen address (default: UNDERSTUDY_HOST or 127.0.0.1)")
    serve.add_argument(
        "--port", type=_port, help="listen port, 0 for any free one (default: UNDERSTUDY_PORT)"
    )
    c.leaf(c.root, "migrate", "create the database, or apply its pending schema migrations")
    copy = c.leaf(
        c.root,
        "copy-database",
        "copy the data directory's SQLite database into an empty PostgreSQL database "
        "(the service stopped)",
        lists=True,
    )
    copy.add_argument(
        "--to",
        type=_database_copy.target_url,
        metavar="URL",
        help="the empty PostgreSQL database, postgresql://user@host:5432/dbname (default: "
        "UNDERSTUDY_DATABASE_URL; keep the password in PGPASSWORD or ~/.pgpass)",
    )
    c.leaf(
        c.root,
        "status",
        "service, tenants, devices and unfinished sessions at a glance",
        lists=True,
    )

    sessions = c.group("sessions", "inspect and close sessions")
    listed = c.leaf(sessions, "list", "sessions not finished (oldest first)", lists=True)
    listed.add_argument("--tenant", type=_name, help="only this tenant's sessions")
    listed.add_argument(
        "--all", action="store_true", help="include finished sessions (closed, expired, lost)"
    )
    show = c.leaf(sessions, "show", "one session in detail", lists=True)
    show.add_argument("session_id", type=_session_id, help="the session's id (a UUID)")
    close = c.leaf(sessions, "close", "close a session the way DELETE /v1/sessions/{id} does")
    close.add_argument("session_id", type=_session_id, help="the session's id (a UUID)")
    close.add_argument(
        "--wait",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for a running service to apply the close (default 10)",
    )

    keys = c.group("keys", "consumer API keys")
    create = c.leaf(keys, "create", "create a key for (tenant, actor); printed once")
    _tenant(create)
    create.add_argument(
        "--actor", required=True, type=_name, help="the consumer's actor name (e.g. a bot)"
    )
    revoke = c.leaf(keys, "revoke", "revoke a key by its id; its waiting requests end with 401")
    revoke.add_argument("key_id", help="the key's id, as `keys list` prints it (key_…)")
    c.leaf(keys, "list", "list keys (ids, never the keys)", lists=True)

    devices = c.group("devices", "enrolled devices")
    enroll = c.leaf(devices, "enroll", "enroll a device; its credential is printed once")
    _tenant(enroll)
    enroll.add_argument("--device", required=True, type=_name, help="a name for the profile")
    drevoke = c.leaf(devices, "revoke", "revoke a device; its sockets close with 4410")
    _tenant(drevoke)
    drevoke.add_argument("--device", required=True, type=_name, help="the device's name")
    c.leaf(devices, "list", "list devices and their state", lists=True)

    secret_actions = c.group("secrets", "vaulted secrets for fill_secret")
    for action, text in (("put", "store a secret read from stdin"), ("delete", "delete a secret")):
        sp = c.leaf(secret_actions, action, text)
        _tenant(sp)
        sp.add_argument(
            "--name", required=True, type=_secret_name, help="the name commands use as vault:NAME"
        )
    _tenant(c.leaf(secret_actions, "list", "list secret names (never values)", lists=True))
    _tenant(c.leaf(secret_actions, "rotate-key", "re-seal every secret under a fresh data key"))

    tokens = c.group("operator-tokens", "operator tokens of the operator API (/v1/operator/...)")
    tcreate = c.leaf(tokens, "create", "create an operator token; printed once")
    tcreate.add_argument(
        "--name", required=True, type=_name, help="who or what holds it (e.g. synthetic-users)"
    )
    trevoke = c.leaf(tokens, "revoke", "revoke an operator token by its id")
    trevoke.add_argument("token_id", help="the token's id, as `operator-tokens list` prints it")
    c.leaf(tokens, "list", "list operator tokens (ids and names, never the tokens)", lists=True)

    tenants = c.group("tenants", "tenants")
    c.leaf(tenants, "list", "list tenants that have keys or devices", lists=True)

    telemetry = c.group("telemetry", "telemetry helpers")
    pseudo = c.leaf(telemetry, "pseudonym", "print the pseudonym telemetry events carry for an id")
    which = pseudo.add_mutually_exclusive_group(required=True)
    which.add_argument("--tenant", help="a tenant name")
    which.add_argument("--device", help="a device name")
    which.add_argument("--session", help="a session id")
    which.add_argument("--actor", help="an actor name")
    return top


def _fail(message: str) -> int:
    print(f"understudy: {message}", file=sys.stderr)
    return EXIT_USAGE


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        return _fail(f"configuration error: {exc}")
    if args.data_dir is not None:
        settings = replace(settings, data_dir=args.data_dir.expanduser())
    if args.command == "serve":
        return _serve(settings, args.host, args.port)
    if args.command == "telemetry":
        return _pseudonym(settings, args)
    if args.command == "copy-database":
        return _database_copy.run(settings, args.to, as_json=args.json)
    path = missing_database(settings)
    if args.command != "migrate" and path is not None:
        return _fail(
            f"no database at {path}; point --data-dir (or UNDERSTUDY_DATA_DIR) at the service's "
            "data directory, or create one with `understudy migrate`"
        )
    # On SQLite a copy to PostgreSQL may hold the directory: what a command wrote after the
    # copy's snapshot would be left behind, so each one holds the copy out while it runs.
    if settings.database_url is not None:
        return _open_and_manage(args, settings)
    try:
        with operator_access(settings.data_dir):
            return _open_and_manage(args, settings)
    except DataDirCopyingError as exc:
        return _fail(str(exc))


def _open_and_manage(args: argparse.Namespace, settings: Settings) -> int:
    try:
        db = open_database(settings)
    except StorageError as exc:
        return _fail(str(exc))
    except (OSError, sqlite3.Error) as exc:
        return _fail(_unusable(settings.data_dir, exc))
    try:
        applied = db.storage.migrate(time.time())
    except SchemaTooNewError as exc:
        db.close()
        return _fail(str(exc))
    if args.command == "migrate" and applied:
        print(f"applied schema migration(s) {', '.join(map(str, applied))}")
    try:
        return _manage(db, args, settings)
    finally:
        db.close()


def _unusable(data_dir: Path, exc: BaseException) -> str:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return (
        f"data directory {data_dir} is unusable ({reason}); give --data-dir or "
        "UNDERSTUDY_DATA_DIR a directory this user can create and write"
    )


def _manage(db: Database, args: argparse.Namespace, settings: Settings) -> int:
    now = time.time()
    as_json = bool(getattr(args, "json", False))
    storage, repos = db.storage, db.storage.repos
    if args.command == "secrets":
        return _secrets(db, args, settings, now)
    if args.command == "sessions":
        return _sessions(db, args, settings, now)
    if args.command == "migrate":
        print(f"schema is up to date (version {storage.schema_version()})")
        return 0
    if args.command == "status":
        view = _operator.status(
            repos,
            now,
            service=_service_holder(db, settings.data_dir),
            schema_version=storage.schema_version(),
        )
        _print_json(view) if as_json else print(_operator.render_status(view))
        return 0
    if args.command == "keys" and args.action == "create":
        token = _security.generate_token("consumer")
        key_id = "key_" + secrets.token_hex(6)
        with storage.transaction() as tx:
            tx.api_keys.add(
                digest=_security.token_digest(token),
                key_id=key_id,
                tenant=args.tenant,
                actor=args.actor,
                now=now,
            )
        print(f"key id:  {key_id}\napi key: {token}\n(shown once; store it in your secret manager)")
        return 0
    if args.command == "keys" and args.action == "revoke":
        with storage.transaction() as tx:
            done = tx.api_keys.revoke(args.key_id, now)
        print("revoked" if done else f"no active key {args.key_id}")
        return 0 if done else 1
    if args.command == "keys" and args.action == "list":
        keys = [
            {
                "keyId": key.key_id,
                "tenant": key.tenant,
                "actor": key.actor,
                "state": "revoked" if key.revoked_at else "active",
            }
            for key in repos.api_keys.all()
        ]
        _print_json(keys) if as_json else _print_rows(keys)
        return 0
    if args.command == "devices" and args.action == "enroll":
        token = _security.generate_token("device")
        with storage.transaction() as tx:
            if tx.devices.get(args.tenant, args.device) is not None:
                print(f"device {args.tenant}/{args.device} already exists", file=sys.stderr)
                return 1
            tx.devices.add(
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
        with storage.transaction() as tx:
            done = tx.devices.revoke(args.tenant, args.device, now)
        print("revoked" if done else f"no active device {args.tenant}/{args.device}")
        return 0 if done else 1
    if args.command == "devices" and args.action == "list":
        if as_json:
            _print_json([_operator.device_view(repos, d, now) for d in repos.devices.all()])
            return 0
        for device in repos.devices.all():
            print(f"{device.tenant}\t{device.device_id}\t{_operator.device_state(device)}")
        return 0
    if args.command == "operator-tokens":
        return _operator_tokens(db, args, now, as_json)
    if args.command == "tenants":
        names = repos.api_keys.tenants()
        _print_json(names) if as_json else print("\n".join(names)) if names else None
        return 0
    raise AssertionError(f"unhandled command {args}")


def _operator_tokens(db: Database, args: argparse.Namespace, now: float, as_json: bool) -> int:
    if args.action == "create":
        token = _security.generate_token("operator")
        token_id = "op_" + secrets.token_hex(6)
        with db.storage.transaction() as tx:
            tx.operators.add_token(
                digest=_security.token_digest(token), token_id=token_id, name=args.name, now=now
            )
        print(
            f"token id:       {token_id}\noperator token: {token}\n"
            "(shown once; it may act on every tenant, store it in your secret manager)"
        )
        return 0
    if args.action == "revoke":
        with db.storage.transaction() as tx:
            done = tx.operators.revoke_token(args.token_id, now)
        print("revoked" if done else f"no active operator token {args.token_id}")
        return 0 if done else 1
    rows = [
        {
            "tokenId": token.token_id,
            "name": token.name,
            "state": "revoked" if token.revoked_at else "active",
        }
        for token in db.storage.repos.operators.tokens()
    ]
    _print_json(rows) if as_json else _print_rows(rows)
    return 0


def _print_rows(rows: list[dict[str, str]]) -> None:
    """Tab-separated values, one row a line (the format scripts have parsed since 0.1)."""
    for row in rows:
        print("\t".join(row.values()))


def _service_holder(db: Database, data_dir: Path) -> str | None:
    """Who holds the one-writer lock (`pid N on host H`), or None when no service runs.

    On PostgreSQL the nodes may run from other data directories (or hosts): the database's own
    node registry answers first (`nodes a, b`).
    """
    holder = db.storage.service_holder()
    if holder is not None:
        return holder
    if not data_dir_in_use(data_dir):
        return None
    try:
        return (data_dir / LOCK_FILE).read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def _sessions(db: Database, args: argparse.Namespace, settings: Settings, now: float) -> int:
    if args.action == "list":
        rows = db.storage.repos.sessions.listing(tenant=args.tenant, ended=args.all)
        summaries = [_operator.session_summary(row, now) for row in rows]
        if args.json:
            _print_json(summaries)
        elif summaries:
            lines = [_operator.SESSION_COLUMNS, *map(_operator.session_line, summaries)]
            print(_operator.table(lines))
        return 0
    row = db.storage.repos.sessions.get(args.session_id)
    if row is None:
        print(f"no session {args.session_id}", file=sys.stderr)
        return 1
    if args.action == "show":
        detail = _operator.session_detail(row, now)
        if args.json:
            _print_json(detail)
        else:
            width = max(map(len, detail))
            for name, value in detail.items():
                shown = ", ".join(value) if isinstance(value, list) else value
                print(f"{name + ':':<{width + 1}} {'-' if shown is None else shown}")
        return 0
    return _close(db, row.session_id, row.status, settings.data_dir, args.wait)


def _close(db: Database, session_id: str, status: str, data_dir: Path, wait_s: float) -> int:
    """Ask the service to close a session and wait for it to do so.

    The CLI never edits the session row itself: the service owns it, with its timers, its
    sockets and the device's capacity. A close request row is the durable message between the
    two processes: the service's once-a-second check of the storage's change marker picks it up
    (or its next start-up does) and closes through the same turn as `DELETE /v1/sessions/{id}`.
    """
    storage = db.storage
    if _operator.is_finished(storage.repos.sessions.require(session_id)):
        print(f"session {session_id} is already {status}")
        return 0
    with storage.transaction() as tx:
        tx.close_requests.request(session_id, time.time())
    if _service_holder(db, data_dir) is None:
        print(
            f"close requested for session {session_id}; no service is running on {data_dir}, "
            "so it closes when the service next starts"
        )
        return 0
    deadline = time.monotonic() + wait_s
    while True:
        with storage.read() as repos:
            request = repos.close_requests.get(session_id)
        if request is not None and request.done_at is not None:
            break
        if time.monotonic() >= deadline:
            print(
                f"understudy: close requested for session {session_id}, but the service did not "
                f"apply it within {wait_s:g} s; check its health (/readyz) and its log",
                file=sys.stderr,
            )
            return 1
        time.sleep(CLOSE_POLL_S)
    outcome = request.outcome or "closing"
    if outcome == "closing":
        print(f"session {session_id} is closing: the device is closing its tab")
    else:
        print(f"session {session_id} is {outcome}")
    return 0


def _pseudonym(settings: Settings, args: argparse.Namespace) -> int:
    key_file = settings.data_dir / "master.key"
    if settings.master_key is None and not key_file.is_file():
        # Creating a key here would print a pseudonym no service uses.
        return _fail(
            f"no master key at {key_file} and no UNDERSTUDY_MASTER_KEY; give the data directory "
            "and environment the service runs with"
        )
    try:
        keys = Keys.from_master(ensure_master_key(settings))
    except (ConfigError, OSError) as exc:
        return _fail(str(exc))
    kind = next(k for k in ("tenant", "device", "session", "actor") if getattr(args, k))
    print(_security.pseudonym(keys, kind, getattr(args, kind)))
    return 0


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
        with db.storage.transaction() as tx:
            vault.put(tx.vault, keys, args.tenant, args.name, value, now)
        print(f"stored vault:{args.name} for tenant {args.tenant}")
        return 0
    if args.action == "list":
        names = [f"vault:{name}" for name in db.storage.repos.vault.names(args.tenant)]
        _print_json(names) if args.json else print("\n".join(names)) if names else None
        return 0
    if args.action == "delete":
        with db.storage.transaction() as tx:
            done = tx.vault.delete(args.tenant, args.name)
        print("deleted" if done else f"no secret vault:{args.name}")
        return 0 if done else 1
    with db.storage.transaction() as tx:
        count = vault.rotate_data_key(tx.vault, keys, args.tenant, now)
    print(f"re-sealed {count} secret(s) under a new data key")
    return 0


def _serve(settings: Settings, host: str | None, port: int | None) -> int:
    from understudy._bootstrap import build_services
    from understudy._lock import DataDirInUseError

    # The public URL follows the listen address unless it was configured (env or file).
    implicit = replace(settings, public_url="").public_url == settings.public_url
    settings = replace(
        settings, host=host or settings.host, port=settings.port if port is None else port
    )
    if implicit:
        settings = replace(settings, public_url="")
    try:
        services = build_services(settings)
    except (ConfigError, SchemaTooNewError, DataDirInUseError, StorageError) as exc:
        return _fail(str(exc))
    except (OSError, sqlite3.Error) as exc:
        return _fail(_unusable(settings.data_dir, exc))
    try:
        listener = _listen(settings.host, settings.port)
    except OSError as exc:
        _release(services)
        return _fail(
            f"cannot listen on {settings.host}:{settings.port} ({exc.strerror or exc}); give "
            "--port (or UNDERSTUDY_PORT) a free port, or stop what holds this one"
        )
    bound = listener.getsockname()[1]
    if implicit and bound != settings.port:  # port 0: name the port the kernel picked
        services.settings = replace(settings, port=bound, public_url="")
    return _run(services, listener)


def _listen(host: str, port: int) -> socket.socket:
    """Bind the listening socket ourselves: a taken port is a one-line refusal, not a traceback
    from inside the server, and "serving" is printed only once something listens."""
    import socket

    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError:
        listener.close()
        raise
    return listener


def _release(services: Services) -> None:
    from understudy._lock import unlock_data_dir

    services.db.close()
    services.telemetry.close()
    if services.data_dir_lock is not None:
        unlock_data_dir(services.data_dir_lock)
        services.data_dir_lock = None


def _run(services: Services, listener: socket.socket) -> int:
    import uvicorn

    from understudy._server import server_config
    from understudy.http import create_app

    public_url = services.settings.public_url

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:  # the app's start-up (migrations, timers) ran; /readyz says ok
                print(
                    f"understudy: serving on {public_url} (API reference at {public_url}/docs)",
                    flush=True,
                )

    server = Server(server_config(create_app(services), services))

    def stop_serving() -> None:
        server.should_exit = True

    services.stop_serving = stop_serving
    try:
        server.run(sockets=[listener])
    finally:
        listener.close()
    if services.claim.lost is not None:
        print(f"understudy: stopped: {services.claim.lost}", file=sys.stderr, flush=True)
        return 1
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())
