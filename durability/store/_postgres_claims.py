"""The SQL of claims (shared workers); the policy is durability/cluster.py.

Every function runs inside the caller's transaction on a psycopg connection. Claims are
taken in READ COMMITTED transactions with row locks: the run's row is locked
(``FOR NO KEY UPDATE``, with ``SKIP LOCKED`` in a sweep) before its claim is written, and
the conditional upsert on ``claims`` decides in the end (it always sees the newest
committed claim), so two workers never both win a run. Lease times come from the
database's clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durability.canonical import canonical_json, digest_text

NOW = "extract(epoch from clock_timestamp())::double precision"


@dataclass(frozen=True)
class ClaimRow:
    run_id: str
    context_id: str
    worker_id: str
    token: int
    expires_at: float
    previous_worker: str | None = None
    previous_token: int | None = None


def _write_claim(
    conn: Any, run_id: str, context_id: str, worker_id: str, lease: float
) -> ClaimRow | None:
    """Take a new token and the claim, when nobody holds a live one (row already locked)."""
    prev = conn.execute(
        "SELECT worker_id, token FROM claims WHERE run_id = %s", (run_id,)
    ).fetchone()
    row = conn.execute(
        f"WITH t AS (SELECT nextval('fencing_tokens') AS token, {NOW} AS now)"
        " INSERT INTO claims (run_id, worker_id, token, claimed_at, expires_at)"
        " SELECT %s, %s, t.token, t.now, t.now + %s FROM t ON CONFLICT (run_id) DO UPDATE SET"
        " worker_id = excluded.worker_id, token = excluded.token,"
        " claimed_at = excluded.claimed_at, expires_at = excluded.expires_at"
        " WHERE claims.worker_id IS NULL OR claims.expires_at <= excluded.claimed_at"
        " RETURNING token, expires_at, claimed_at",
        (run_id, worker_id, lease),
    ).fetchone()
    if row is None:
        return None
    token, expires_at, now = int(row[0]), float(row[1]), float(row[2])
    conn.execute("UPDATE runs SET fence = %s WHERE id = %s", (token, run_id))
    previous = None if prev is None else {"worker_id": prev[0], "token": prev[1]}
    payload = canonical_json({"worker_id": worker_id, "token": token, "previous": previous})
    conn.execute(
        "INSERT INTO events (context_id, run_id, type, payload, created_at, digest)"
        " VALUES (%s, %s, 'claim', %s, %s, %s)",
        (context_id, run_id, payload, now, digest_text(payload)),
    )
    prev_worker, prev_token = (None, None) if prev is None else (prev[0], prev[1])
    return ClaimRow(run_id, context_id, worker_id, token, expires_at, prev_worker, prev_token)


def claim_new_run(
    conn: Any, run_id: str, context_id: str, worker_id: str, lease: float
) -> ClaimRow:
    """The claim of a run admitted in this very transaction (nobody else can see it)."""
    claim = _write_claim(conn, run_id, context_id, worker_id, lease)
    assert claim is not None, "a run admitted in this transaction cannot be claimed elsewhere"
    return claim


def live_claim(conn: Any, run_id: str) -> tuple[str, int, float, float] | None:
    """(worker, token, expires_at, database now) of the run's live claim, else None."""
    row = conn.execute(
        f"SELECT worker_id, token, expires_at, {NOW} FROM claims WHERE run_id = %s"
        f" AND worker_id IS NOT NULL AND expires_at > {NOW}",
        (run_id,),
    ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]), float(row[2]), float(row[3]))


def claim_run(conn: Any, run_id: str, worker_id: str, lease: float) -> ClaimRow | None:
    """Claim one active run whose claim is free or expired; None otherwise."""
    row = conn.execute(
        "SELECT context_id FROM runs WHERE id = %s AND status = 'active' FOR NO KEY UPDATE",
        (run_id,),
    ).fetchone()
    if row is None or live_claim(conn, run_id) is not None:
        return None
    return _write_claim(conn, run_id, str(row[0]), worker_id, lease)


def sweep(conn: Any, worker_id: str, lease: float, limit: int) -> list[ClaimRow]:
    """Claim up to ``limit`` active runs that nobody holds (oldest change first); rows
    another worker is locking at this moment are skipped, not waited for."""
    rows = conn.execute(
        "SELECT id, context_id FROM runs r WHERE status = 'active' AND NOT EXISTS"
        " (SELECT 1 FROM claims c WHERE c.run_id = r.id AND c.worker_id IS NOT NULL"
        f" AND c.expires_at > {NOW}) ORDER BY updated_at LIMIT %s"
        " FOR NO KEY UPDATE SKIP LOCKED",
        (limit,),
    ).fetchall()
    won = []
    for run_id, context_id in rows:
        claim = _write_claim(conn, str(run_id), str(context_id), worker_id, lease)
        if claim is not None:
            won.append(claim)
    return won


def renew(conn: Any, worker_id: str, lease: float, held: dict[str, int]) -> dict[str, float]:
    """Extend this worker's claims that still carry the held tokens: run id -> expires_at.
    A claim taken over (another token) or released is not renewed."""
    if not held:
        return {}
    rows = conn.execute(
        f"UPDATE claims c SET expires_at = {NOW} + %s"
        " FROM unnest(%s::text[], %s::bigint[]) AS h(run_id, token)"
        " WHERE c.run_id = h.run_id AND c.token = h.token AND c.worker_id = %s"
        " RETURNING c.run_id, c.expires_at",
        (lease, list(held), list(held.values()), worker_id),
    ).fetchall()
    return {str(r[0]): float(r[1]) for r in rows}


def release(conn: Any, worker_id: str, run_id: str, token: int) -> bool:
    row = conn.execute(
        "UPDATE claims SET worker_id = NULL, expires_at = 0 WHERE run_id = %s AND token = %s"
        " AND worker_id = %s RETURNING (SELECT context_id FROM runs WHERE id = %s)",
        (run_id, token, worker_id, run_id),
    ).fetchone()
    if row is None:
        return False
    payload = canonical_json({"worker_id": worker_id, "token": token})
    conn.execute(
        "INSERT INTO events (context_id, run_id, type, payload, created_at, digest)"
        f" VALUES (%s, %s, 'release', %s, {NOW}, %s)",
        (row[0], run_id, payload, digest_text(payload)),
    )
    return True


def owner(conn: Any, run_id: str) -> tuple[str | None, int, float, float] | None:
    """(worker or None when released, token, expires_at, database now) of a run's claim."""
    row = conn.execute(
        f"SELECT worker_id, token, expires_at, {NOW} FROM claims WHERE run_id = %s", (run_id,)
    ).fetchone()
    if row is None:
        return None
    return (None if row[0] is None else str(row[0]), int(row[1]), float(row[2]), float(row[3]))
