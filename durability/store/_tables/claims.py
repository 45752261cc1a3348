"""The claims table and the runs' fencing column (shared workers; the policy is
durability/cluster.py). PostgreSQL only: SQLite has one process, which owns every run.

Claims are taken in READ COMMITTED transactions with row locks: the run's row is locked
(``FOR NO KEY UPDATE``, with ``SKIP LOCKED`` in a sweep) before its claim is written, and
the conditional upsert on ``claims`` decides in the end (it always sees the newest
committed claim), so two workers never both win a run. Lease times come from the
database's clock.
"""

from __future__ import annotations

from typing import Any

from durability.canonical import canonical_json, digest_text
from durability.store._sql import ACTIVE_RUN, Table
from durability.store.rows import ClaimRow

#: A sweep looks its candidates up at most this many times (see ``ClaimTable.sweep``).
SWEEP_ROUNDS = 4
NOW = "extract(epoch from clock_timestamp())::double precision"

#: The claim ``c`` is held: by a worker, within its lease, and its holder's liveness lock
#: (durability/store/liveness.py) is still held by some session, or the claim names none. The
#: lock's bigint key appears in pg_locks as (classid, objid) = (high, low) 32 bits,
#: objsubid 1, put together by bits: other advisory locks in the database may have negative
#: keys (the migration lock's), whose high half times 2^32 would overflow a bigint.
ALIVE = (
    "SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


#: When this server started: a restart ends every session, so a liveness lock missing
#: since then says nothing about its worker (it takes the lock again on reconnecting).
SERVER_START = "extract(epoch from pg_postmaster_start_time())::double precision"


def held(c: str, now: str = NOW) -> str:
    """SQL: the claim row ``c`` is held (see ALIVE). A claim made before the server last
    started is bounded by its lease alone, so a database restart moves no run."""
    return (
        f"({c}.worker_id IS NOT NULL AND {c}.expires_at > {now} AND ({c}.alive_key IS NULL"
        f" OR {c}.claimed_at < {SERVER_START} OR {c}.alive_key IN ({ALIVE})))"
    )


_FENCE_OF_RUN = "SELECT id, fence FROM runs WHERE id = {} FOR NO KEY UPDATE"
_FENCE_OF_CALL = (
    "SELECT r.id, r.fence FROM runs r JOIN calls c ON c.run_id = r.id"
    " WHERE c.id = {} FOR NO KEY UPDATE OF r"
)


def fence_statement(run_id: str | None, call_id: str | None) -> tuple[str, tuple[str | None]]:
    """The statement (and its one argument) locking the row of a run (named, or through
    one of its calls) and reading its fencing token: queued with BEGIN in pipeline mode,
    prepared by the driver once it has been used a few times (durability/store/postgres.py)."""
    template = _FENCE_OF_RUN if run_id is not None else _FENCE_OF_CALL
    return template.format("%s"), (run_id if run_id is not None else call_id,)


#: A sweep in one statement: its candidates, their claims and the runs' fences.
#:
#: ``cand``: active runs whose claim is free (never claimed, released, expired, its
#: holder's liveness lock gone), oldest change first, their rows locked and those another
#: worker is locking skipped. The claims held (``{held}``: ``held("c")``, the time read
#: once), and the sweeper's own, named by token in ``%(mine)b``, are read once into a
#: hashed set, not looked up run by run; the tokens too are a hashed subquery, not
#: ``= ANY(%(mine)b)``, which under the generic plan of a prepared statement compares
#: each claim with the whole book (a parameter's array is never hashed). ``runs.fence``
#: is the token of the run's claim row (written in one transaction with it; NULL while
#: there is none): the statement reads the claims in its snapshot, but a run another
#: worker claimed and committed since carries a new fence on its row, and PostgreSQL
#: rechecks a locked row on its newest version, so such a run is passed over (its row
#: stays locked until the sweep commits), not handed over to be refused by the upsert.
#: That check is outside the ordered subquery so that it runs only for the runs taken in
#: order, not for every free run. ``%(tried)s``: the runs already tried in this sweep.
#:
#: ``up``: each candidate's claim with a new token where nobody holds a live one (the
#: conditional upsert sees the newest committed claim, whatever the snapshot, and decides
#: in the end); ``fenced``: the runs' fences (``fence`` is in no index, so a claim's update
#: of its run stays a HOT update). One row per candidate comes back: its new token (NULL
#: when the upsert refused it) and the claim it replaced, oldest change first.
SWEEP = (
    "WITH cand AS (SELECT id, context_id, updated_at FROM (SELECT id, context_id, fence,"
    " updated_at FROM runs r"
    f" WHERE status = {ACTIVE_RUN} AND NOT (id = ANY(%(tried)s))"
    " AND r.id NOT IN (SELECT c.run_id FROM claims c WHERE c.worker_id IS NOT NULL"
    " AND ({held} OR c.token IN (SELECT unnest(%(mine)b::bigint[]))))"
    " ORDER BY updated_at OFFSET 0) f"
    " WHERE f.fence IS NOT DISTINCT FROM (SELECT c.token FROM claims c WHERE c.run_id = f.id)"
    " LIMIT %(limit)s FOR NO KEY UPDATE OF f SKIP LOCKED),"
    " prev AS (SELECT run_id, worker_id, token FROM claims WHERE run_id IN"
    " (SELECT id FROM cand)),"
    " up AS (INSERT INTO claims (run_id, worker_id, token, claimed_at, expires_at, alive_key)"
    " SELECT cand.id, %(worker)s, nextval('fencing_tokens'), t.now, t.now + %(lease)s,"
    " %(alive)s"
    f" FROM cand, (SELECT {NOW} AS now) t"
    " ON CONFLICT (run_id) DO UPDATE SET worker_id = excluded.worker_id,"
    " token = excluded.token, claimed_at = excluded.claimed_at,"
    " expires_at = excluded.expires_at, alive_key = excluded.alive_key"
    " WHERE NOT {held_excluded} RETURNING run_id, token, expires_at, claimed_at),"
    " fenced AS (UPDATE runs SET fence = up.token FROM up WHERE runs.id = up.run_id)"
    " SELECT cand.id, cand.context_id, up.token, up.expires_at, up.claimed_at,"
    " prev.worker_id, prev.token FROM cand LEFT JOIN up ON up.run_id = cand.id"
    " LEFT JOIN prev ON prev.run_id = cand.id ORDER BY cand.updated_at, cand.id"
)
_EVENTS = (
    "INSERT INTO events (context_id, run_id, type, payload, created_at, digest)"
    " SELECT c, r, 'claim', p, t, d FROM unnest(%s::text[], %s::text[], %s::text[],"
    " %s::double precision[], %s::text[]) AS e(c, r, p, t, d)"
)


def _payload(worker_id: str, token: int, prev_worker: Any, prev_token: Any) -> str:
    """A ``claim`` event's payload: the new claim and the one it replaced (None: none)."""
    previous = None if prev_token is None else {"worker_id": prev_worker, "token": prev_token}
    return canonical_json({"worker_id": worker_id, "token": token, "previous": previous})


class ClaimTable(Table):
    def lock_fence(
        self, run_id: str | None = None, call_id: str | None = None
    ) -> tuple[str, int | None] | None:
        """The run (named, or through one of its calls) and its current fencing token, its
        row locked until the transaction ends; None when there is no such run or call."""
        row = self.sql.run(*fence_statement(run_id, call_id)).fetchone()
        return (str(row[0]), row[1]) if row else None

    def _write(
        self, run_id: str, context_id: str, worker_id: str, lease: float, alive_key: int | None
    ) -> ClaimRow | None:
        """Take a new token and the claim, when nobody holds a live one (row already locked).
        ``alive_key``: the claimer's liveness lock (None: the lease alone bounds the claim)."""
        run = self.sql.run
        prev = run("SELECT worker_id, token FROM claims WHERE run_id = %s", (run_id,)).fetchone()
        row = run(
            f"WITH t AS (SELECT nextval('fencing_tokens') AS token, {NOW} AS now)"
            " INSERT INTO claims (run_id, worker_id, token, claimed_at, expires_at, alive_key)"
            " SELECT %s, %s, t.token, t.now, t.now + %s, %s FROM t ON CONFLICT (run_id)"
            " DO UPDATE SET worker_id = excluded.worker_id, token = excluded.token,"
            " claimed_at = excluded.claimed_at, expires_at = excluded.expires_at,"
            f" alive_key = excluded.alive_key WHERE NOT {held('claims', 'excluded.claimed_at')}"
            " RETURNING token, expires_at, claimed_at",
            (run_id, worker_id, lease, alive_key),
        ).fetchone()
        if row is None:
            return None
        token, expires_at, now = int(row[0]), float(row[1]), float(row[2])
        run("UPDATE runs SET fence = %s WHERE id = %s", (token, run_id))
        prev_worker, prev_token = (None, None) if prev is None else (prev[0], prev[1])
        payload = _payload(worker_id, token, prev_worker, prev_token)
        run(
            "INSERT INTO events (context_id, run_id, type, payload, created_at, digest)"
            " VALUES (%s, %s, 'claim', %s, %s, %s)",
            (context_id, run_id, payload, now, digest_text(payload)),
        )
        return ClaimRow(run_id, context_id, worker_id, token, expires_at, prev_worker, prev_token)

    def claim_new_run(
        self, run_id: str, worker_id: str, lease: float, alive_key: int | None = None
    ) -> ClaimRow:
        """The claim of a run admitted in this very transaction (nobody else can see it)."""
        context_id = self.sql.scalar("SELECT context_id FROM runs WHERE id = %s", (run_id,))
        claim = self._write(run_id, str(context_id), worker_id, lease, alive_key)
        assert claim is not None, "a run admitted in this transaction cannot be claimed elsewhere"
        return claim

    def live(self, run_id: str) -> tuple[str, int, float, float] | None:
        """(worker, token, expires_at, database now) of the run's live claim, else None."""
        row = self.sql.run(
            f"SELECT worker_id, token, expires_at, {NOW} FROM claims c WHERE run_id = %s"
            f" AND {held('c')}",
            (run_id,),
        ).fetchone()
        return None if row is None else (str(row[0]), int(row[1]), float(row[2]), float(row[3]))

    def claim_run(
        self, run_id: str, worker_id: str, lease: float, alive_key: int | None = None
    ) -> ClaimRow | None:
        """Claim one active run whose claim is free, expired or whose holder is gone; None
        otherwise."""
        row = self.sql.run(
            f"SELECT context_id FROM runs WHERE id = %s AND status = {ACTIVE_RUN}"
            " FOR NO KEY UPDATE",
            (run_id,),
        ).fetchone()
        if row is None or self.live(run_id) is not None:
            return None
        return self._write(run_id, str(row[0]), worker_id, lease, alive_key)

    def sweep(
        self,
        worker_id: str,
        lease: float,
        limit: int,
        alive_key: int | None = None,
        mine: list[int] | None = None,
    ) -> list[ClaimRow]:
        """Claim up to ``limit`` active runs that nobody holds (oldest change first): never
        claimed, released, expired, or whose holder's liveness lock is free; rows another
        worker is locking at this moment are skipped, not waited for. ``mine``: the tokens
        of the claims the sweeper holds by its own book; never swept by it, even when its
        lock was lost: a worker taken for dead must not take its own runs back under a new
        token (its peers take them, and its late writes are refused).

        One statement looks the candidates up and claims them (``SWEEP``); the claims'
        events are queued to travel with COMMIT, so a sweep is two round trips (the
        statement, with BEGIN; COMMIT, with the events). A run another worker claimed and
        committed after the statement's snapshot is passed over, so concurrent sweepers do
        not hand each other runs that are no longer free. Should a claim still be refused
        by the upsert (it always sees the newest claim), the statement runs again, the runs
        tried left out, up to ``SWEEP_ROUNDS`` times."""
        sweep = SWEEP.format(
            held=held("c", f"(SELECT {NOW})"), held_excluded=held("claims", "excluded.claimed_at")
        )
        won: list[tuple[ClaimRow, float]] = []
        tried: list[str] = []
        for _ in range(SWEEP_ROUNDS):
            args = {
                "limit": limit - len(won),
                "tried": tried,
                "mine": list(mine or ()),
                "worker": worker_id,
                "lease": lease,
                "alive": alive_key,
            }
            rows = self.sql.run(sweep, args).fetchall()
            tried += [str(r[0]) for r in rows]
            for run_id, context_id, token, expires_at, now, prev_worker, prev_token in rows:
                if token is not None:
                    claim = ClaimRow(
                        str(run_id),
                        str(context_id),
                        worker_id,
                        int(token),
                        float(expires_at),
                        prev_worker,
                        prev_token,
                    )
                    won.append((claim, float(now)))
            if len(won) >= limit or all(r[2] is not None for r in rows):
                break  # enough, or each run found was won (none found: none is free)
        if won:  # queued, not sent: it goes with COMMIT (its outcome is the commit's)
            events = [
                (c.context_id, c.run_id, p, now, digest_text(p))
                for c, now in won
                for p in [_payload(worker_id, c.token, c.previous_worker, c.previous_token)]
            ]
            self.sql.conn.execute(self.sql.q(_EVENTS), [list(e) for e in zip(*events, strict=True)])
        return [claim for claim, _ in won]

    def renew(self, worker_id: str, lease: float, held: dict[str, int]) -> dict[str, float]:
        """Extend this worker's claims that still carry the held tokens: run id ->
        expires_at. A claim taken over (another token) or released is not renewed."""
        if not held:
            return {}
        rows = self.sql.run(
            f"UPDATE claims c SET expires_at = {NOW} + %s"
            " FROM unnest(%s::text[], %s::bigint[]) AS h(run_id, token)"
            " WHERE c.run_id = h.run_id AND c.token = h.token AND c.worker_id = %s"
            " RETURNING c.run_id, c.expires_at",
            (lease, list(held), list(held.values()), worker_id),
        ).fetchall()
        return {str(r[0]): float(r[1]) for r in rows}

    def release(self, worker_id: str, run_id: str, token: int) -> bool:
        row = self.sql.run(
            "UPDATE claims SET worker_id = NULL, expires_at = 0 WHERE run_id = %s AND token = %s"
            " AND worker_id = %s RETURNING (SELECT context_id FROM runs WHERE id = %s)",
            (run_id, token, worker_id, run_id),
        ).fetchone()
        if row is None:
            return False
        payload = canonical_json({"worker_id": worker_id, "token": token})
        self.sql.run(
            "INSERT INTO events (context_id, run_id, type, payload, created_at, digest)"
            f" VALUES (%s, %s, 'release', %s, {NOW}, %s)",
            (row[0], run_id, payload, digest_text(payload)),
        )
        return True

    def owner(self, run_id: str) -> tuple[str | None, int, float, float] | None:
        """(worker or None when released, token, expires_at, database now) of a run's
        claim."""
        row = self.sql.run(
            f"SELECT worker_id, token, expires_at, {NOW} FROM claims WHERE run_id = %s",
            (run_id,),
        ).fetchone()
        if row is None:
            return None
        worker = None if row[0] is None else str(row[0])
        return (worker, int(row[1]), float(row[2]), float(row[3]))
