"""Shared workers: worker identity, claims with leases, heartbeats, fencing tokens.

A run is executed by the one worker that holds its **claim**: a lease with an end time on
the database's clock, renewed by heartbeat. Each claim carries a **fencing token** from
one sequence, so a run's tokens only grow; the run's current token is kept on its row.

Fencing: a journal opened with a worker identity (``Journal.open_postgres(...,
worker_id=...)``) keeps the tokens of the claims it holds here, in its ``cluster``. Each of
its writes for a run (intent, result, checkpoint, status, hold, recovery attempt, retry
consumption, run events) first locks the run's row and compares the run's token with the
held one, inside the same transaction: a worker whose claim was taken over (or that
never claimed the run, or released it) gets ``FencingLost`` and nothing of that write
commits. The glue passes no token: the journal knows it. A takeover locks and updates
the run's row too, so a late write and a takeover serialise on that row: the write either
commits before the takeover, or waits for it, then reads the new token and is refused.

A worker also stops *starting effects* on its own clock: ``is_live(run_id)`` is False once
the lease it last renewed may have run out (``live_until``, measured from the moment the
renewal was sent), even before anybody took the run over.

People's actions (decisions, retry grants, interventions, plans) are not fenced: any
worker serves them, and run versions guard them as in single-process mode.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from durability import failpoints
from durability.errors import FencingLost, InvalidArgument
from durability.heartbeat import Heartbeat
from durability.status import FencingReason
from durability.store.base import FencedOp, Store, StoreTx
from durability.store.liveness import LivenessLock
from durability.store.rows import ClaimRow

T = TypeVar("T")

logger = logging.getLogger("a0.durability.cluster")

DEFAULT_LEASE_SECONDS = 30.0
#: A worker resumes at most this many taken-over runs at once (DESIGN.md section 5).
DEFAULT_SWEEP_LIMIT = 2


@dataclass(frozen=True)
class Claim:
    run_id: str
    context_id: str
    worker_id: str
    token: int
    expires_at: float  # the database's clock (Unix seconds)
    live_until: float  # this process's monotonic clock: start no new effect after it
    previous_worker: str | None = None  # the holder this claim took the run from


@dataclass(frozen=True)
class Owner:
    """Who holds a run now, as the database says."""

    worker_id: str | None  # None: released
    token: int
    expires_at: float
    live: bool


@dataclass(frozen=True)
class Renewal:
    renewed: list[Claim]
    lost: list[str]  # run ids whose claim was taken over or released meanwhile


#: How many lost claims a worker remembers to name their token in a refusal.
LOST_KEPT = 1024


class Cluster:
    """One worker's claims on one shared journal store (a PostgresStore: its transactions'
    ``tx.claims``)."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(worker_id, str) or not worker_id.strip() or len(worker_id) > 128:
            raise InvalidArgument("worker_id must be a non-empty string", field="worker_id")
        if not lease_seconds > 0:
            raise InvalidArgument("lease_seconds must be positive", field="lease_seconds")
        self.store = store
        self.worker_id = worker_id
        self.lease_seconds = float(lease_seconds)
        self._monotonic = monotonic
        self._book: dict[str, Claim] = {}
        # run id -> the token of a claim this worker lost (for the refusal's detail only),
        # the newest LOST_KEPT of them
        self._lost: dict[str, int] = {}
        self._lock = threading.Lock()
        #: Called with each claim this worker takes (the journal forgets cached state).
        self.on_claim: Callable[[Claim], None] | None = None
        #: This worker's liveness lock (durability/store/liveness.py), when it holds one.
        self.liveness: LivenessLock | None = None

    @property
    def alive_key(self) -> int | None:
        """The key recorded in this worker's new claims: its liveness lock's while held
        (a sweep may then take them over as soon as the lock is free), else None."""
        return None if self.liveness is None else self.liveness.key

    def close(self) -> None:
        """Give the liveness lock up (the journal closes)."""
        if self.liveness is not None:
            self.liveness.close()

    def __repr__(self) -> str:
        return f"Cluster(worker_id={self.worker_id!r}, claims={len(self._book)})"

    # the book of claims this worker holds
    def token(self, run_id: str) -> int | None:
        with self._lock:
            claim = self._book.get(run_id)
        return None if claim is None else claim.token

    def claims(self) -> list[Claim]:
        with self._lock:
            return list(self._book.values())

    def get(self, run_id: str) -> Claim | None:
        with self._lock:
            return self._book.get(run_id)

    def is_live(self, run_id: str) -> bool:
        """True while this worker holds the run's claim and its lease cannot have run out."""
        claim = self.get(run_id)
        return claim is not None and self._monotonic() < claim.live_until

    def _adopt(self, row: ClaimRow, sent_at: float) -> Claim:
        claim = Claim(
            run_id=row.run_id,
            context_id=row.context_id,
            worker_id=row.worker_id,
            token=row.token,
            expires_at=row.expires_at,
            live_until=sent_at + self.lease_seconds,
            previous_worker=row.previous_worker,
        )
        with self._lock:
            self._book[claim.run_id] = claim
            self._lost.pop(claim.run_id, None)
        if claim.previous_worker is not None and claim.previous_worker != self.worker_id:
            logger.info(
                "claim: worker %s took run %s over from %s (token %d)",
                self.worker_id,
                claim.run_id,
                claim.previous_worker,
                claim.token,
            )
        if self.on_claim is not None:
            self.on_claim(claim)
        return claim

    def lose(self, run_id: str, reason: str, *, quiet: bool = False) -> None:
        """Forget a claim this worker no longer holds, and say so in the log (``quiet``:
        the caller's own line says it)."""
        with self._lock:
            claim = self._book.pop(run_id, None)
            if claim is not None:
                self._lost.pop(run_id, None)
                self._lost[run_id] = claim.token
                while len(self._lost) > LOST_KEPT:  # oldest first (insertion order)
                    del self._lost[next(iter(self._lost))]
        if claim is not None and not quiet:
            logger.warning(
                "claim lost: worker %s no longer holds run %s (token %d): %s; it starts no"
                " new effect and writes nothing more for that run",
                self.worker_id,
                run_id,
                claim.token,
                reason,
            )

    def refused(self, exc: FencingLost, write: str, call_id: str | None = None) -> None:
        """A write of this worker was refused by the fence (``check_fence``): one line
        naming the write, the run, the call and the tokens; the claim is forgotten."""
        run_id = str(exc.fields.get("run_id") or "")
        held = exc.fields.get("held_token", exc.fields.get("lost_token"))
        logger.warning(
            "fenced write refused (%s): worker %s's %s for run %s (call %s) under token %s;"
            " the run's token is %s: nothing of it committed, and the worker starts no new"
            " effect for that run",
            exc.fields.get("reason", "fencing_lost"),
            self.worker_id,
            write,
            run_id,
            call_id or "none",
            "none" if held is None else held,
            exc.fields.get("current_token", "unknown"),
        )
        if exc.fields.get("reason") == FencingReason.SUPERSEDED:
            self.lose(run_id, "a newer claim superseded this worker's token", quiet=True)

    # claiming
    def claim(self, run_id: str) -> Claim | None:
        """Claim one active run whose claim is free or expired; None when another worker
        holds a live claim (or the run is not active). A claim this worker already holds
        is renewed instead."""
        if self.get(run_id) is not None:
            renewal = self.renew([run_id])
            return renewal.renewed[0] if renewal.renewed else None
        sent = self._monotonic()
        row = self.store.write(
            lambda tx: tx.claims.claim_run(
                run_id, self.worker_id, self.lease_seconds, self.alive_key
            )
        )
        return None if row is None else self._adopt(row, sent)

    def sweep(self, limit: int = DEFAULT_SWEEP_LIMIT) -> list[Claim]:
        """Claim up to ``limit`` active runs whose lease expired, whose holder's liveness
        lock is free (it died: durability/store/liveness.py) or that nobody claimed
        (``FOR NO KEY UPDATE SKIP LOCKED``: concurrent sweepers never wait on each other
        and never win the same run). Runs in this worker's own book are left to their
        renewal: a worker whose liveness lock was lost never takes its own runs back under
        a new token. Recover each through the start-up classification."""
        if limit <= 0:
            return []
        sent = self._monotonic()
        with self._lock:
            mine = [claim.token for claim in self._book.values()]
        rows = self.store.write(
            lambda tx: tx.claims.sweep(
                self.worker_id, self.lease_seconds, limit, self.alive_key, mine
            )
        )
        return [self._adopt(row, sent) for row in rows]

    def adopt_new_run(self, tx: StoreTx, run_id: str) -> Callable[[], Claim]:
        """Inside an admission's transaction: claim the run it admits. Returns what to call
        once the transaction committed (the claim enters the book only then)."""
        sent = self._monotonic()
        row = tx.claims.claim_new_run(run_id, self.worker_id, self.lease_seconds, self.alive_key)
        return lambda: self._adopt(row, sent)

    def renew(self, run_ids: list[str] | None = None) -> Renewal:
        """Renew this worker's claims (all, or ``run_ids``); claims taken over or released
        meanwhile are lost: forgotten and logged."""
        with self._lock:
            held = {r: c.token for r, c in self._book.items() if run_ids is None or r in run_ids}
        if not held:
            return Renewal([], [])
        sent = self._monotonic()
        renewed_at = self.store.write(
            lambda tx: tx.claims.renew(self.worker_id, self.lease_seconds, held)
        )
        if set(held) - set(renewed_at):  # a claim was lost: a test may hold the heartbeat here
            failpoints.failpoint("cluster.renewal_lost")
        renewed, lost = [], []
        for run_id, token in held.items():
            if run_id in renewed_at:
                with self._lock:
                    current = self._book.get(run_id)
                    if current is not None and current.token == token:
                        current = replace(
                            current,
                            expires_at=renewed_at[run_id],
                            live_until=sent + self.lease_seconds,
                        )
                        self._book[run_id] = current
                if current is not None:
                    renewed.append(current)
            else:
                lost.append(run_id)
                self.lose(run_id, "its heartbeat's renewal found the run taken over or released")
        return Renewal(renewed, lost)

    def release(self, run_id: str) -> bool:
        """Give a run's claim up (its run ended, was held, or this worker stops)."""
        with self._lock:
            claim = self._book.pop(run_id, None)
        if claim is None:
            return False
        return self.store.write(lambda tx: tx.claims.release(self.worker_id, run_id, claim.token))

    def release_all(self) -> int:
        return sum(self.release(claim.run_id) for claim in self.claims())

    def owner(self, run_id: str) -> Owner | None:
        """The run's claim as the database has it (None: never claimed)."""
        found = self.store.read(lambda tx: tx.claims.owner(run_id))
        if found is None:
            return None
        worker, token, expires_at, now = found
        return Owner(worker, token, expires_at, live=worker is not None and expires_at > now)

    # fencing
    def check_fence(
        self,
        tx: StoreTx,
        *,
        run_id: str | None = None,
        call_id: str | None = None,
        pinned: int | None = None,
    ) -> int | None:
        """Inside a write transaction: refuse (FencingLost) unless this worker holds the
        run's current token; returns that token. A run or call that does not exist passes
        (None: the operation then raises its own precise error). ``pinned``: the token a
        first attempt of this write ran under; a repeat (after a lost connection) is
        refused unless it runs under the same one."""
        return self.verify(tx.claims.lock_fence(run_id=run_id, call_id=call_id), pinned)

    def verify(self, found: tuple[str, int | None] | None, pinned: int | None = None) -> int | None:
        """``check_fence`` on a fence already read with its run's row locked: ``found``
        is (run id, its current token), None when there is no such run or call."""
        if found is None:
            return None
        rid, current = found
        held = self.token(rid)
        if held is None:
            with self._lock:
                lost = self._lost.get(rid)
            raise FencingLost(
                "this worker holds no claim on the run",
                run_id=rid,
                worker_id=self.worker_id,
                reason=FencingReason.NOT_CLAIMED,
                current_token=current,
                **({} if lost is None else {"lost_token": lost}),
            )
        changed = pinned is not None and held != pinned
        if changed or current != held:
            raise FencingLost(
                "the worker's claim changed between two attempts of one write"
                if changed
                else "the run was claimed by another worker",
                run_id=rid,
                worker_id=self.worker_id,
                reason=FencingReason.SUPERSEDED,
                held_token=pinned if changed else held,
                current_token=current,
            )
        return held

    def fenced(
        self, op: Callable[[StoreTx], T], run_id: str | None, call_id: str | None
    ) -> FencedOp[T]:
        """``op`` behind this worker's fence on the run (or the call's run). The token of
        its first attempt is pinned: a repeat (after a lost connection) carries it. The
        store reads the fence where it costs least (PostgreSQL: in the round trip that
        opens the transaction)."""
        pinned: list[int] = []

        def verify(found: tuple[str, int | None] | None) -> None:
            token = self.verify(found, pinned[0] if pinned else None)
            if token is not None and not pinned:
                pinned.append(token)

        return FencedOp(op, run_id, call_id, verify)

    # heartbeat
    def start_heartbeat(
        self, interval: float, on_lost: Callable[[list[str]], None] | None = None
    ) -> Heartbeat:
        heartbeat = Heartbeat(self, interval, on_lost)
        heartbeat.start()
        return heartbeat
