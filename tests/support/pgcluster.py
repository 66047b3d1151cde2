"""A throwaway PostgreSQL cluster for tests: Debian's binaries, a temporary directory, a free port.

`PgCluster.start()` runs `initdb` into a fresh temporary directory and starts the server with
`pg_ctl` on a free 127.0.0.1 port, its unix socket in that directory too; `stop()` stops it and
removes everything. Nothing outside the directory is touched and nothing is left behind.

Settings: `fsync=off` and `full_page_writes=off`, because the cluster is thrown away and tests
check what the engine decides, not whether the disk kept it; `synchronous_commit` stays `on`, as
in production, so a commit still waits for the server to have written the WAL. Authentication is
`trust` for the one local superuser `understudy`, reachable from 127.0.0.1 only.

PostgreSQL refuses to run as root. As root (CI is), the cluster runs as an unprivileged user: the
`postgres` user of Debian's package when it exists, else `nobody`; its directory is owned by that
user. A non-root user runs it as itself.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

SUPERUSER = "understudy"
_BIN_GLOB = "/usr/lib/postgresql/*/bin"
_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "full_page_writes": "off",
    "synchronous_commit": "on",
    "max_connections": "100",
    "shared_buffers": "32MB",
}


class PgClusterError(RuntimeError):
    """The cluster could not be created or started; the message holds the server's log tail."""


def find_bin_dir() -> Path | None:
    """The newest Debian PostgreSQL `bin` directory that has `initdb` and `pg_ctl`, or None."""
    found = [
        Path(d)
        for d in glob.glob(_BIN_GLOB)
        if (Path(d) / "initdb").is_file() and (Path(d) / "pg_ctl").is_file()
    ]
    if not found:
        return None
    return max(found, key=lambda d: _major(d.parent.name))


def _major(version: str) -> int:
    return int(version) if version.isdigit() else 0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run_as() -> pwd.struct_passwd | None:
    """The unprivileged account the server runs under, or None to run as the current user."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PgClusterError("running as root, but neither a postgres nor a nobody user exists")


@dataclass
class PgCluster:
    """A running throwaway cluster. Build it with :meth:`start`; :meth:`stop` removes it."""

    bin_dir: Path
    root: Path
    port: int
    user: pwd.struct_passwd | None
    settings: dict[str, str] = field(default_factory=dict)  # over the defaults above
    _databases: set[str] = field(default_factory=set)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    @classmethod
    def start(
        cls, bin_dir: Path | None = None, settings: Mapping[str, str] | None = None
    ) -> PgCluster:
        """initdb and start a cluster on a free port.

        Args:
            bin_dir: Debian's PostgreSQL `bin` directory (default: the newest installed).
            settings: Server settings over the defaults (a benchmark sets `fsync=on`).

        Raises:
            PgClusterError: no binaries, or initdb or the server failed (with its log).
        """
        bin_dir = bin_dir or find_bin_dir()
        if bin_dir is None:
            raise PgClusterError(f"no initdb/pg_ctl under {_BIN_GLOB}")
        user = _run_as()
        # Not pytest's tmp_path: it lies under a 0700 root directory the server user cannot enter.
        root = Path(tempfile.mkdtemp(prefix="understudy-pg-"))
        (root / "socket").mkdir()
        if user is not None:
            for path in (root, root / "socket"):
                os.chown(path, user.pw_uid, user.pw_gid)
        cluster = cls(bin_dir=bin_dir, root=root, port=0, user=user, settings=dict(settings or {}))
        try:
            cluster._initdb()
            for _ in range(3):  # a free port can be taken between the probe and the bind
                cluster.port = _free_port()
                if cluster._start_server():
                    break
            else:
                raise PgClusterError(f"the server did not start:\n{cluster.log_tail()}")
        except BaseException:
            cluster.remove()
            raise
        return cluster

    def _command(self, *argv: str) -> list[str]:
        if self.user is None:
            return list(argv)
        return [
            "setpriv",
            f"--reuid={self.user.pw_uid}",
            f"--regid={self.user.pw_gid}",
            "--clear-groups",
            "--",
            *argv,
        ]

    def _run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
        env.pop("PGDATA", None)
        return subprocess.run(
            self._command(*argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=self.root,
            check=False,
        )

    def _initdb(self) -> None:
        done = self._run(
            str(self.bin_dir / "initdb"),
            f"--pgdata={self.data_dir}",
            f"--username={SUPERUSER}",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )
        if done.returncode != 0:
            raise PgClusterError(f"initdb failed:\n{done.stdout}\n{done.stderr}")

    def _start_server(self) -> bool:
        settings = {**_SETTINGS, **self.settings}
        options = " ".join(f"-c {k}={v}" for k, v in settings.items())
        options += f" -p {self.port} -c unix_socket_directories={self.socket_dir}"
        done = self._run(
            str(self.bin_dir / "pg_ctl"),
            "start",
            "--wait",
            "--timeout=60",
            f"--pgdata={self.data_dir}",
            f"--log={self.log_file}",
            f"--options={options}",
        )
        return done.returncode == 0

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def url(self, database: str = "postgres") -> str:
        """A libpq URL for `database` over TCP on 127.0.0.1."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str, template: str = "template0") -> str:
        """Create a database as a copy of `template` (by default empty: nothing of template1 in
        it); its URL.

        A copy of a database the CLI prepared once costs a file copy (~0.1 s) where preparing it
        again costs seconds of CLI runs; nobody may be connected to `template` meanwhile.
        """
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as conn:
            create = sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY")
            conn.execute(create.format(sql.Identifier(name), sql.Identifier(template)))
        return self.url(name)

    def create_schema(self, name: str, database: str = "scratch") -> str:
        """An empty schema in `database` (created once) and a URL whose connections use only it.

        A schema costs a millisecond where a database costs a hundred, and is just as empty: the
        URL sets `search_path` to it, so unqualified names (every migration's) land there.
        """
        import psycopg
        from psycopg import sql

        if database not in self._databases:
            self.create_database(database)
            self._databases.add(database)
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        return f"{self.url(database)}?options=-csearch_path%3D{name}"

    def drop_schema(self, name: str, database: str = "scratch") -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))

    def drop_database(self, name: str) -> None:
        """Drop a database, ending whatever connections are still open on it."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended) and remove the directory."""
        try:
            self.stop_server()
        finally:
            self.remove()

    def stop_server(self) -> None:
        """Stop the server (fast shutdown) and keep its data; :meth:`start_server` resumes it."""
        if (self.data_dir / "postmaster.pid").exists():
            self._run(
                str(self.bin_dir / "pg_ctl"),
                "stop",
                "--wait",
                "--mode=fast",
                f"--pgdata={self.data_dir}",
                timeout=60,
            )

    def start_server(self) -> None:
        """Start a stopped server again, on the same port and data.

        Raises:
            PgClusterError: it did not start (with its log).
        """
        if not self._start_server():
            raise PgClusterError(f"the server did not start again:\n{self.log_tail()}")

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def session_cluster() -> Iterator[PgCluster]:
    """The body of a session fixture: one cluster for the whole run, removed at its end.

    Without the binaries the tests that need them are skipped, except in CI (`CI=true`), where a
    missing PostgreSQL fails them: `scripts/bootstrap` installs Debian's `postgresql` there.
    """
    bin_dir = find_bin_dir()
    if bin_dir is None:
        reason = (
            f"PostgreSQL is not installed (no initdb/pg_ctl under {_BIN_GLOB}); "
            "`apt-get install postgresql`, or run scripts/bootstrap as root"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true, so the PostgreSQL tests must run")
        pytest.skip(reason)
    cluster = PgCluster.start(bin_dir)
    try:
        yield cluster
    finally:
        cluster.stop()
