"""Three run_ui.py workers, each in its own network namespace, sharing one PostgreSQL
journal and the scripted model over their veth links; a side-effect log outside them."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from cryptography.fernet import Fernet

from durability import Journal
from durability.records import Call, Run
from tests.support.model_server import ScriptedModel
from tests.support.netns import Network, wait_for
from tests.support.netns_ui import NodeUiServer
from tests.support.postgres import PostgresServer
from tests.support.ui_server import SLOW_START, ui_env_for

KEY = {"X-API-KEY": "test-token"}
#: A provider key that cannot occur in a tmp path (the journal masks secrets in paths).
PROVIDER_KEY = "sk-scripted-0123456789abcdef"
SCHEMA = "shared_workers"
LEASE_SECONDS = 3.0
HEARTBEAT_SECONDS = 0.5


class Workers:
    """``workers.servers[i]`` is worker ``w{i}``; ``observer`` reads the shared journal."""

    def __init__(
        self,
        network: Network,
        postgres: PostgresServer,
        model: ScriptedModel,
        tmp: Path,
        count: int = 3,
        own_roles: tuple[int, ...] = (),
        own_env: dict[int, dict[str, str]] | None = None,
    ) -> None:
        self.network = network
        self.postgres = postgres
        self.model = model
        self.tmp = tmp
        self.side_log = tmp / "side_effects.log"  # outside every worker's usr dir
        self.gate = tmp / "gate"
        key = Fernet.generate_key().decode()
        env = {
            **ui_env_for(model),
            "API_KEY_OTHER": PROVIDER_KEY,
            "A0_DURABILITY_POSTGRES_DSN": postgres.dsn_at(network.host_address),
            "A0_DURABILITY_POSTGRES_NAMESPACE": SCHEMA,
            "A0_DURABILITY_RESOURCE_KEY": key,
            "A0_DURABILITY_LEASE_SECONDS": str(LEASE_SECONDS),
            "A0_DURABILITY_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
        }
        self.servers = []
        for i in range(count):
            own = {"A0_WORKER_ID": f"w{i}", **(own_env or {}).get(i, {})}
            if i in own_roles:
                own["A0_DURABILITY_POSTGRES_DSN"] = self.create_role(i)
            node = network.add_node()
            self.servers.append(NodeUiServer(node, tmp / f"w{i}" / "usr", env={**env, **own}))
        self.observer: Journal | None = None
        self._senders: list[threading.Thread] = []

    def start(self) -> None:
        """Start the workers side by side; each must answer its health check."""
        with ThreadPoolExecutor(len(self.servers)) as pool:
            for started in [pool.submit(s.start, timeout=SLOW_START) for s in self.servers]:
                started.result()
        self.observer = Journal.open_postgres(
            self.postgres.dsn, namespace=SCHEMA, worker_id="observer", pool_size=2
        )

    def close(self) -> None:
        for server in self.servers:
            server.kill()
        if self.observer is not None:
            self.observer.close()
        self.gate.touch()  # any shell still waiting ends

    # the scripted shell call -----------------------------------------------------------------
    def shell_command(self, label: str) -> str:
        """Appends one line to the side-effect log, then blocks until the gate exists."""
        return (
            f"echo effect-{label} >> {self.side_log}; "
            f"while [ ! -e {self.gate} ]; do sleep 0.05; done; echo OUTPUT-{label}"
        )

    def script_shell_call(self, label: str) -> None:
        args = {"runtime": "terminal", "session": 0, "code": self.shell_command(label)}
        self.model.tool("code_execution_tool", args)
        self.model.tool("response", {"text": f"shell {label} done"})

    def side_effects(self) -> list[str]:
        if not self.side_log.exists():
            return []
        return self.side_log.read_text(encoding="utf-8").splitlines()

    def send(self, index: int, message: str, input_id: str) -> None:
        """POST api_message to worker ``index`` in the background (it answers at the end
        of the run, or never when the worker dies)."""

        def post() -> None:
            with contextlib.suppress(httpx.HTTPError):
                self.servers[index].api_message(message, input_id=input_id)

        sender = threading.Thread(target=post, daemon=True)
        sender.start()
        self._senders.append(sender)

    def wait_effect(self, label: str, timeout: float = 90) -> None:
        wait_for(lambda: f"effect-{label}" in self.side_effects(), timeout, f"effect-{label}")

    # the shared journal --------------------------------------------------------------------
    @property
    def journal(self) -> Journal:
        assert self.observer is not None
        return self.observer

    def only_run(self) -> Run:
        runs = self.journal.list_runs()
        assert len(runs) == 1, runs
        return runs[0]

    def owner(self, run_id: str) -> tuple[str | None, bool]:
        cluster = self.journal.cluster
        assert cluster is not None
        found = cluster.owner(run_id)
        return (None, False) if found is None else (found.worker_id, found.live)

    def claim_history(self, run_id: str) -> list[tuple[str, int]]:
        """(worker, token) of each claim of the run, oldest first. Each claim names the one
        it replaced: the history must be one unbroken chain (one owner at a time)."""
        events = [e.payload for e in self.journal.list_events(run_id=run_id) if e.type == "claim"]
        chain = [(e["worker_id"], e["token"]) for e in events]
        for before, event in zip([None, *chain], events, strict=False):
            previous = event["previous"]
            named = None if previous is None else (previous["worker_id"], previous["token"])
            assert before == named, f"a claim skipped its predecessor: {events}"
        return chain

    def shell_calls(self, run_id: str) -> list[Call]:
        return [c for c in self.journal.list_calls(run_id) if c.name == "code_execution_tool"]

    def backends(self, index: int, busy_only: bool = False, liveness: bool = True) -> list[int]:
        """PostgreSQL backend pids of worker ``index``'s sessions (busy: not idle;
        ``liveness=False``: not the session holding its liveness lock)."""
        query = "SELECT pid FROM pg_stat_activity WHERE client_addr = %s::inet"
        if busy_only:
            query += " AND state IS DISTINCT FROM 'idle'"
        if not liveness:
            query += " AND application_name NOT LIKE 'a0-alive:%%'"
        with self.postgres.connect() as conn:
            rows = conn.execute(query, (self.servers[index].node.address,)).fetchall()
        return [int(r[0]) for r in rows]

    def settled(self, index: int) -> bool:
        """Nothing of worker ``index`` in flight to PostgreSQL: no byte waiting in its
        sockets' send queues (``ss`` inside its namespace), and no session busy."""
        port = self.postgres.port
        sockets = self.servers[index].node.run(["ss", "-Htn", f"( dport = :{port} )"])
        assert sockets.returncode == 0, sockets.stderr
        queued = [line for line in sockets.stdout.splitlines() if line.split()[2] != "0"]
        return not queued and not self.backends(index, busy_only=True)

    # worker roles ------------------------------------------------------------------------------
    @staticmethod
    def role(index: int) -> str:
        return f"a0_w{index}"

    def create_role(self, index: int) -> str:
        """A database role of worker ``index``'s own (``own_roles``), so that the tests can
        refuse its logins; returns its DSN through the bridge."""
        from psycopg import sql

        role = sql.Identifier(self.role(index))
        with self.postgres.connect() as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
                    role, sql.Literal(self.postgres.password)
                )
            )
        return self.postgres.dsn_with(host=self.network.host_address, user=self.role(index))

    def set_login(self, index: int, allowed: bool) -> None:
        """Allow or refuse new sessions of worker ``index``'s role (its open ones stay)."""
        from psycopg import sql

        statement = sql.SQL("ALTER ROLE {} " + ("LOGIN" if allowed else "NOLOGIN"))
        with self.postgres.connect() as conn:
            conn.execute(statement.format(sql.Identifier(self.role(index))))

    def db_now(self) -> float:
        """The database's clock (what lease ends are measured on)."""
        with self.postgres.connect() as conn:
            row = conn.execute("SELECT extract(epoch from clock_timestamp())::float8").fetchone()
        assert row is not None
        return float(row[0])

    def lease_end(self, run_id: str) -> tuple[str | None, int, float]:
        """(worker, token, expires_at on the database's clock) of the run's claim."""
        cluster = self.journal.cluster
        assert cluster is not None
        found = cluster.owner(run_id)
        assert found is not None, "the run was never claimed"
        return found.worker_id, found.token, found.expires_at

    def claimed_at(self, run_id: str) -> float:
        """When the run's current claim was taken (the database's clock)."""
        with self.postgres.connect() as conn:
            row = conn.execute(
                f'SELECT claimed_at FROM "{SCHEMA}".claims WHERE run_id = %s', (run_id,)
            ).fetchone()
        assert row is not None, "the run was never claimed"
        return float(row[0])

    def terminate_backends(self, index: int, liveness: bool = True) -> list[int]:
        """pg_terminate_backend on every session of worker ``index`` (``liveness=False``:
        but the one holding its liveness lock)."""
        pids = self.backends(index, liveness=liveness)
        with self.postgres.connect() as conn:
            for pid in pids:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return pids

    def api(self, index: int, name: str, body: dict[str, Any]) -> httpx.Response:
        url = f"{self.servers[index].url}/api/{name}"
        return httpx.post(url, json=body, headers=KEY, timeout=30)
