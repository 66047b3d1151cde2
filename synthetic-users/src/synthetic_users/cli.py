"""`synthetic-users`: serve the API, migrate its database, create API keys.

    synthetic-users serve [--host H] [--port P]   the API (and the orchestrator) until Ctrl-C
    synthetic-users serve --api-only              the API alone: runs are written and stay
                                                  queued until a full service resumes them
    synthetic-users migrate                       create the database or apply pending migrations
    synthetic-users keys create --customer C      print a new API key for customer C, once
    synthetic-users customers set-retention --customer C (--days N | --default)
                                                  keep C's runs N days after they end
    synthetic-users billing set-customer --customer C --stripe-customer cus_…
                                                  bill customer C's usage to that Stripe customer
    synthetic-users --version

Settings come from the environment (`_config.py`); `--data-dir` overrides
SYNTHETIC_USERS_DATA_DIR. Keys are printed once and stored only as SHA-256 digests.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import re
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from synthetic_users import __version__
from synthetic_users._config import ConfigError, Settings, load_settings
from synthetic_users._store import SCHEMA_VERSION, SchemaTooNewError, Store

if TYPE_CHECKING:
    import socket

    from synthetic_users._api import Services
    from synthetic_users._artifacts import ArtifactStore
    from synthetic_users._safety._credentials import Credentials

log = logging.getLogger("synthetic_users.cli")
CUSTOMER: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
STRIPE_CUSTOMER: Final = re.compile(r"cus_[A-Za-z0-9]{1,64}")
LOCK_FILE: Final = "service.lock"


def build_services(
    settings: Settings,
    store: Store,
    artifacts: ArtifactStore,
    credentials: Credentials | None = None,
) -> Services:
    """What `serve` runs beside the API: the orchestrator (fleet, agent loops, reports).

    The app's lifespan calls `services.start()` (resume `store.claim_resumable_runs()`, start the
    fleet) and `services.stop()`; `POST /runs` and `DELETE /runs/{id}` call `run_created` and
    `run_cancelled`.

    Raises:
        ServiceConfigError: a setting the orchestrator needs is missing (message says which).
    """
    from synthetic_users._service import RunServices

    return RunServices(settings, store, artifacts, credentials=credentials)


def credentials_for(settings: Settings, store: Store) -> Credentials:
    """The stored credentials under the service's master key (the setting, or its file)."""
    from synthetic_users._safety._credentials import Credentials, Keyring, load_master_key

    return Credentials(store.db, Keyring(load_master_key(settings.data_dir, settings.master_key)))


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        settings = load_settings()
    except ConfigError as exc:
        return _fail(str(exc))
    if args.data_dir is not None:
        settings = replace(settings, data_dir=args.data_dir)
    if args.command == "migrate":
        return _migrate(settings)
    if args.command == "keys":
        return _create_key(settings, args.customer)
    if args.command == "customers":
        return _set_retention(settings, args.customer, None if args.default else args.days)
    if args.command == "billing":
        return _set_billing_customer(settings, args.customer, args.stripe_customer)
    return _serve(settings, args.host, args.port, api_only=args.api_only)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="synthetic-users",
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"synthetic-users {__version__}")
    parser.add_argument("--data-dir", type=Path, help="overrides SYNTHETIC_USERS_DATA_DIR")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="serve the API until Ctrl-C")
    serve.add_argument("--host", help="overrides SYNTHETIC_USERS_HOST")
    serve.add_argument("--port", type=int, help="overrides SYNTHETIC_USERS_PORT (0: any free)")
    serve.add_argument(
        "--api-only",
        action="store_true",
        help="no orchestrator: runs stay queued until a full service starts (needs no Understudy)",
    )
    commands.add_parser("migrate", help="create the database or apply pending migrations")
    keys = commands.add_parser("keys", help="API keys")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = key_commands.add_parser("create", help="print a new API key once")
    create.add_argument("--customer", required=True, help="the customer it belongs to")
    customers = commands.add_parser("customers", help="per-customer settings")
    customer_commands = customers.add_subparsers(dest="customers_command", required=True)
    retention = customer_commands.add_parser(
        "set-retention", help="how many days the customer's runs are kept after they end"
    )
    retention.add_argument("--customer", required=True, help="the customer")
    days = retention.add_mutually_exclusive_group(required=True)
    days.add_argument("--days", type=int, help="1 to 3650")
    days.add_argument(
        "--default", action="store_true", help="use SYNTHETIC_USERS_RETENTION_DAYS again"
    )
    billing = commands.add_parser("billing", help="Stripe billing of usage")
    billing_commands = billing.add_subparsers(dest="billing_command", required=True)
    set_customer = billing_commands.add_parser(
        "set-customer", help="bill a customer's usage to a Stripe customer"
    )
    set_customer.add_argument("--customer", required=True, help="the Synthetic Users customer")
    set_customer.add_argument("--stripe-customer", required=True, help="its Stripe id, cus_…")
    return parser


def _fail(message: str) -> int:
    print(f"synthetic-users: {message}", file=sys.stderr)
    return 2


def _open(settings: Settings) -> Store:
    return Store.open(settings.db_path)


def _migrate(settings: Settings) -> int:
    try:
        store = _open(settings)
    except SchemaTooNewError as exc:
        return _fail(str(exc))
    except (OSError, sqlite3.Error) as exc:
        return _fail(f"cannot open the database in {settings.data_dir}: {exc}")
    store.close()
    print(f"synthetic-users: {settings.db_path} is at schema version {SCHEMA_VERSION}")
    return 0


def _create_key(settings: Settings, customer: str) -> int:
    if not CUSTOMER.fullmatch(customer):
        return _fail("--customer must be lower-case letters, digits, '-' or '_' (at most 63)")
    try:
        store = _open(settings)
    except (SchemaTooNewError, OSError, sqlite3.Error) as exc:
        return _fail(f"cannot open the database in {settings.data_dir}: {exc}")
    try:
        key = store.create_key(customer)
    finally:
        store.close()
    print(key)
    print(
        f"synthetic-users: API key for customer {customer!r}; it is shown only this once",
        file=sys.stderr,
    )
    return 0


def _set_retention(settings: Settings, customer: str, days: int | None) -> int:
    from synthetic_users._retention import set_retention

    if not CUSTOMER.fullmatch(customer):
        return _fail("--customer must be lower-case letters, digits, '-' or '_' (at most 63)")
    if days is not None and not 1 <= days <= 3650:
        return _fail("--days must be between 1 and 3650")
    try:
        store = _open(settings)
    except (SchemaTooNewError, OSError, sqlite3.Error) as exc:
        return _fail(f"cannot open the database in {settings.data_dir}: {exc}")
    try:
        set_retention(store, customer, days)
    finally:
        store.close()
    kept = f"{days} days" if days is not None else f"the default ({settings.retention_days} days)"
    print(f"synthetic-users: runs of customer {customer!r} are kept {kept} after they end")
    return 0


def _set_billing_customer(settings: Settings, customer: str, stripe_customer: str) -> int:
    if not CUSTOMER.fullmatch(customer):
        return _fail("--customer must be lower-case letters, digits, '-' or '_' (at most 63)")
    if not STRIPE_CUSTOMER.fullmatch(stripe_customer):
        return _fail("--stripe-customer must be a Stripe customer id, like cus_NffrFeUfNV2Hib")
    from synthetic_users._usage import UsageStore

    try:
        store = _open(settings)
    except (SchemaTooNewError, OSError, sqlite3.Error) as exc:
        return _fail(f"cannot open the database in {settings.data_dir}: {exc}")
    try:
        UsageStore(store).set_stripe_customer(customer, stripe_customer)
    finally:
        store.close()
    print(f"synthetic-users: usage of {customer!r} is billed to {stripe_customer}", file=sys.stderr)
    return 0


def _serve(settings: Settings, host: str | None, port: int | None, *, api_only: bool) -> int:
    from synthetic_users._artifacts import DirectoryStore

    settings = replace(
        settings, host=host or settings.host, port=settings.port if port is None else port
    )
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    lock = _lock(settings.data_dir)
    if lock is None:
        return _fail(
            f"another synthetic-users service uses {settings.data_dir}; stop it or give "
            "--data-dir another directory"
        )
    try:
        store = _open(settings)
    except SchemaTooNewError as exc:
        return _fail(str(exc))
    except (OSError, sqlite3.Error) as exc:
        return _fail(f"cannot open the database in {settings.data_dir}: {exc}")
    artifacts = DirectoryStore(settings.artifacts_dir)
    try:
        listener = _listen(settings.host, settings.port)
    except OSError as exc:
        store.close()
        return _fail(
            f"cannot listen on {settings.host}:{settings.port} ({exc.strerror or exc}); give "
            "--port (or SYNTHETIC_USERS_PORT) a free port"
        )
    try:
        return _run(settings, store, artifacts, listener, api_only=api_only)
    finally:
        store.close()
        os.close(lock)


def _lock(data_dir: Path) -> int | None:
    """Hold an exclusive lock on the data directory: two services would resume the same runs."""
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _listen(host: str, port: int) -> socket.socket:
    # Bound here so a taken port is a one-line refusal, and "serving" is printed only once
    # something listens.
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


def _run(
    settings: Settings,
    store: Store,
    artifacts: ArtifactStore,
    listener: socket.socket,
    *,
    api_only: bool,
) -> int:
    import uvicorn

    from synthetic_users._api import IdleServices, RateLimits, RunDefaults, create_app
    from synthetic_users._safety._credentials import MasterKeyError
    from synthetic_users._safety._masking import configure_service_logging
    from synthetic_users._safety._ssrf import TargetPolicy
    from synthetic_users._service import ServiceConfigError

    services: Services
    try:
        credentials = credentials_for(settings, store)
        services = (
            IdleServices() if api_only else build_services(settings, store, artifacts, credentials)
        )
    except (ServiceConfigError, MasterKeyError) as exc:
        return _fail(str(exc))
    app = create_app(
        store,
        artifacts,
        services=services,
        defaults=RunDefaults(turn_budget=settings.default_turn_budget, model=settings.model),
        targets=TargetPolicy(allow_loopback=settings.allow_loopback_targets),
        limits=RateLimits(
            runs_per_minute=settings.runs_per_minute,
            requests_per_minute=settings.requests_per_minute,
            max_active_runs=settings.max_active_runs,
        ),
        allow_loopback=settings.allow_loopback,
        credentials=credentials,
    )
    if settings.allow_loopback_targets:
        log.warning(
            "SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS is on: runs may target http(s) on this "
            "machine's loopback addresses (127.0.0.0/8, ::1, localhost); for local development "
            "only, never on a shared service"
        )
    bound = listener.getsockname()[1]
    url = f"http://{settings.host}:{bound}"

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                print(f"synthetic-users: serving on {url} (reference at {url}/docs)", flush=True)

    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    # After uvicorn set up its handlers: every handler masks emails and phone numbers.
    configure_service_logging("uvicorn", "uvicorn.error", "uvicorn.access")
    server = Server(config)
    try:
        server.run(sockets=[listener])
    finally:
        listener.close()
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())
