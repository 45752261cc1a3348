"""A shared worker's sign of life in PostgreSQL: a session-level advisory lock.

Each worker holds, on a connection of its own for its whole life, the advisory lock keyed
by its namespace and worker id (``alive_key``). PostgreSQL frees a session-level lock the
moment its session ends: when the worker's process dies (SIGKILL, OOM, a crash) the kernel
closes its sockets, the server's backend reads end-of-file and exits, and the lock is free
within milliseconds. A claim records the key of its holder's lock
(``claims.alive_key``); a sweep treats a claim whose lock nobody holds as over, without
waiting for its lease (durability/store/_tables/claims.py, ``held``).

Why this signal and not ``pg_stat_activity``: a lock belongs to exactly one live session
and is freed by the server itself when that session ends, whatever the pool does with the
worker's other connections (an idle pool may close them all; the lock's connection is
never pooled); ``application_name`` is cut to 63 bytes (worker ids may have 128), is not
unique, and other roles' rows may be hidden. ``pg_locks`` shows every session's advisory
locks to every role.

What it does not change: a worker that is alive but frozen (SIGSTOP, a long pause) or cut
off from the network keeps its session on the server, so its lock stays held and the lease
alone bounds its claims. A worker whose session ended while the process lives (the server
terminated it, or noticed a network cut by TCP keepalive) is taken for dead: its claims may
be taken over at once; its late writes are then refused by the fence (``fencing_lost``) and
the new owner holds every open intent, as after a lease ran out. It takes its lock again on
a new connection as soon as it can (a watcher thread), after which its claims are covered
again.
"""

from __future__ import annotations

import hashlib
import logging
import select
import threading
from collections.abc import Callable
from typing import Any

from durability import failpoints

logger = logging.getLogger("a0.durability.liveness")

#: How often the watcher looks at its connection and retries a lock it does not hold.
WATCH_SECONDS = 1.0


def alive_key(namespace: str, worker_id: str) -> int:
    """The advisory lock key of ``worker_id`` in ``namespace`` (non-negative 63 bits)."""
    digest = hashlib.sha256(f"a0-alive:{namespace}:{worker_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class LivenessLock:
    """Holds the worker's advisory lock on a dedicated connection; ``key`` is the key to
    record in claims while the lock is held, else None (the lease alone then bounds them)."""

    def __init__(
        self,
        conninfo: str,
        namespace: str,
        worker_id: str,
        *,
        connect_timeout: float = 10.0,
        mask: Callable[[str], str] = str,
    ) -> None:
        self._conninfo = conninfo
        self._connect_timeout = max(1, int(connect_timeout))
        self._mask = mask
        self.worker_id = worker_id
        self.lock_key = alive_key(namespace, worker_id)
        self._conn: Any = None
        self._held = threading.Event()
        self._stop = threading.Event()
        self._warned = False
        self._thread = threading.Thread(
            target=self._watch, name=f"liveness:{worker_id}", daemon=True
        )

    @property
    def key(self) -> int | None:
        return self.lock_key if self._held.is_set() else None

    @property
    def held(self) -> bool:
        return self._held.is_set()

    def start(self) -> None:
        """Take the lock now (a failure is logged; the watcher keeps trying), then watch."""
        self._acquire()
        self._thread.start()

    def _acquire(self) -> None:
        import psycopg

        try:
            conn = psycopg.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                application_name=f"a0-alive:{self.worker_id}"[:63],
            )
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            self._say(f"cannot connect ({self._mask(first)})")
            return
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.lock_key,)).fetchone()
        except psycopg.Error:
            conn.close()
            return
        if not (row and row[0]):
            conn.close()
            self._say("another session holds this worker id's lock (the same A0_WORKER_ID twice?)")
            return
        self._conn = conn
        self._held.set()
        if self._warned:
            logger.info("liveness lock of worker %s held again", self.worker_id)
        self._warned = False

    def _say(self, why: str) -> None:
        if not self._warned:
            logger.warning(
                "liveness lock of worker %s not held: %s; its claims are bounded by the lease"
                " alone until it is",
                self.worker_id,
                why,
            )
        self._warned = True

    def _lost(self) -> None:
        import psycopg

        self._held.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass
        self._say("its session ended")
        failpoints.failpoint("cluster.liveness_lost")  # a test may keep it from relocking

    def _watch(self) -> None:
        import psycopg

        while not self._stop.is_set():
            conn = self._conn
            if conn is None:
                self._stop.wait(WATCH_SECONDS)
                if not self._stop.is_set():
                    self._acquire()
                continue
            try:
                # an idle session says nothing unless it ends: readable means closed
                readable, _, _ = select.select([conn.pgconn.socket], [], [], WATCH_SECONDS)
                if readable and not self._stop.is_set():
                    conn.execute("SELECT 1")
            except (psycopg.Error, OSError, ValueError):
                if not self._stop.is_set():
                    self._lost()

    def close(self) -> None:
        """Give the lock up (the session ends)."""
        self._stop.set()
        self._held.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a connection that may be gone
                pass
        if self._thread.is_alive():
            self._thread.join(timeout=WATCH_SECONDS * 3)
