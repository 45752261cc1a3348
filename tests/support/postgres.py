"""A private PostgreSQL cluster for tests and benchmarks, or an existing server.

``A0_TEST_POSTGRES_DSN`` points the tests at a server someone already runs (the DSN's user
must be allowed to create schemas). Otherwise :func:`start_cluster` runs ``initdb`` and
``pg_ctl`` from ``/usr/lib/postgresql/15/bin`` (``A0_TEST_POSTGRES_BIN`` moves it) in a new
temporary folder, listening on 127.0.0.1 and a free port, with a generated password for
TCP connections (so every test runs with a password in its DSN, as production does).
``start_cluster(extra_addresses=[...])`` also listens on those addresses (the multi-host
tests' bridge address in 198.18.0.0/15, tests/support/netns.py); clients from that range
authenticate with the password like local ones.
PostgreSQL refuses to run as root: as root the commands run as the ``postgres`` user.

Each test gets its own schema (namespace), so tests never see each other's rows.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PG_BIN = Path(os.environ.get("A0_TEST_POSTGRES_BIN", "/usr/lib/postgresql/15/bin"))
DSN_ENV = "A0_TEST_POSTGRES_DSN"
USER = "postgres"


class PostgresUnavailable(RuntimeError):
    """Neither a server (A0_TEST_POSTGRES_DSN) nor the binaries to start one."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", USER, "--", *cmd]


@dataclass
class PostgresServer:
    """A server the tests may use: ``dsn`` has the superuser's password in it."""

    dsn: str
    password: str | None = None
    data_dir: Path | None = None  # None: an external server (A0_TEST_POSTGRES_DSN)
    port: int | None = None
    settings: list[str] = field(default_factory=list)
    addresses: list[str] = field(default_factory=lambda: ["127.0.0.1"])

    @property
    def own(self) -> bool:
        return self.data_dir is not None

    def connect(self, **kwargs: object):  # -> psycopg.Connection
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True, **kwargs)

    def new_namespace(self) -> str:
        return "t_" + uuid.uuid4().hex[:16]

    def drop_namespace(self, namespace: str) -> None:
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(namespace))
            )

    def dsn_with(self, **changes: str) -> str:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(self.dsn)
        params.update(changes)
        return make_conninfo(**params)  # type: ignore[arg-type]

    def dsn_at(self, address: str) -> str:
        """The DSN through another address the server listens on (``extra_addresses``)."""
        assert address in self.addresses, f"the server does not listen on {address}"
        return self.dsn_with(host=address)

    # lifecycle of an own cluster
    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        assert self.data_dir is not None, "an external server cannot be stopped by the tests"
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), *args]),
            check=True,
            capture_output=True,
            timeout=timeout,
        )

    def start(self) -> None:
        assert self.data_dir is not None and self.port is not None
        options = " ".join(
            [
                f"-p {self.port}",
                f"-k {self.data_dir.parent}",
                "-c listen_addresses=" + ",".join(self.addresses),
                *self.settings,
            ]
        )
        log = self.data_dir.parent / "server.log"
        self._pg_ctl("-o", options, "-l", str(log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("-m", mode, "-w", "stop")

    def destroy(self) -> None:
        if self.data_dir is None:
            return
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)


#: Clients the test clusters accept besides loopback: the multi-host tests' namespaces.
TEST_NETWORK = "198.18.0.0/15"


def start_cluster(*, durable: bool = False, extra_addresses: Sequence[str] = ()) -> PostgresServer:
    """initdb + start a private cluster; ``durable=False`` turns fsync off (tests only).
    ``extra_addresses``: more local addresses to listen on (besides 127.0.0.1)."""
    if not (PG_BIN / "initdb").exists():
        raise PostgresUnavailable(
            f"no PostgreSQL binaries in {PG_BIN} (scripts/test.sh installs Debian's postgresql)"
        )
    root = Path(tempfile.mkdtemp(prefix="a0-pg-"))
    data = root / "data"
    password = secrets.token_urlsafe(18)
    if os.geteuid() == 0:
        entry = pwd.getpwnam(USER)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    pwfile = root / "pw"
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        os.chown(pwfile, entry.pw_uid, entry.pw_gid)
    try:
        subprocess.run(
            _as_postgres(
                [
                    str(PG_BIN / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    USER,
                    "--pwfile",
                    str(pwfile),
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--locale=C.UTF-8",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise PostgresUnavailable(f"initdb failed: {exc.stderr.decode(errors='replace')}") from None
    pwfile.unlink()
    with (data / "pg_hba.conf").open("a") as hba:
        hba.write(f"host all all {TEST_NETWORK} scram-sha-256\n")
    settings = ["-c max_connections=300", "-c shared_buffers=32MB"]
    if not durable:
        settings += ["-c fsync=off", "-c full_page_writes=off"]
    last: Exception | None = None
    for _ in range(5):  # a free port can be taken between probing and binding
        port = _free_port()
        server = PostgresServer(
            dsn=f"host=127.0.0.1 port={port} user={USER} password={password} dbname=postgres",
            password=password,
            data_dir=data,
            port=port,
            settings=settings,
            addresses=["127.0.0.1", *extra_addresses],
        )
        try:
            server.start()
            return server
        except subprocess.CalledProcessError as exc:
            last = exc
    shutil.rmtree(root, ignore_errors=True)
    raise PostgresUnavailable(f"the test cluster did not start: {last}")


def wait_until_accepting(server: PostgresServer, timeout: float = 30) -> None:
    """Wait (with a deadline) until the server answers a query."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            with server.connect(connect_timeout=2) as conn:
                conn.execute("SELECT 1")
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextlib.contextmanager
def server_for_session() -> Iterator[PostgresServer]:
    """The external server named by A0_TEST_POSTGRES_DSN, or a private cluster."""
    external = os.environ.get(DSN_ENV)
    if external:
        yield PostgresServer(dsn=external)
        return
    server = start_cluster()
    try:
        yield server
    finally:
        server.destroy()
