"""A commit whose acknowledgement was lost: find out what became of it, then go on.

Every write transaction learns its transaction id as it begins (``pg_current_xact_id()``,
sent with BEGIN in the same round trip). When the connection is lost while COMMIT is on
its way, the server may or may not have committed. ``settle`` then asks on a fresh
connection, with ``pg_xact_status(xid)``:

- ``committed``: the transaction's own outcome (the value it computed, or the refusal it
  committed with) is the recorded one, and is returned as if the acknowledgement had
  arrived: nothing is written twice, and a write whose repeat would not be a no-op (a
  checkpoint, an event, a consumed retry, a claim) is exact;
- ``aborted``: nothing of it was committed: the write is run again from the start;
- ``in progress``: the server has not finished with it yet: asked again;
- no answer (the id is too old, or unknown to this server after a failover): the write
  is run again; the journal's writes are idempotent (the same intent or result returns
  the recorded row).

Each try waits first (50 ms, doubling) and logs a warning naming the operation and the
try; after ``TRIES`` tries, or once ``budget`` seconds have passed, the write fails as
before: ``StorageError`` with ``outcome_unknown=True``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from durability.errors import StorageError

logger = logging.getLogger("a0.durability.postgres")

#: Questions asked (and repeats made) after lost acknowledgements, per write.
TRIES = 5
#: The wait before the first question; it doubles each time (50, 100, 200, 400, 800 ms).
FIRST_WAIT = 0.05
#: Sent with BEGIN of a write transaction: its id, to ask about later.
XID_QUERY = "SELECT pg_current_xact_id()"
_STATUS_QUERY = "SELECT pg_xact_status(%s::xid8)"


class XactStatus(StrEnum):
    """What ``pg_xact_status`` says of a transaction id (NULL: too old to be known)."""

    COMMITTED = "committed"
    ABORTED = "aborted"
    IN_PROGRESS = "in progress"


#: Connection-level failures: class 08, the server shutting down or killing the session.
_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03")


def is_connection_error(exc: BaseException) -> bool:
    """The connection was lost or could not be had (the store's retry and settle rules)."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate or ""
    if state.startswith(_CONNECTION_STATES):
        return True
    return isinstance(exc, psycopg.OperationalError) and not state


class LostAck(Exception):
    """Internal: the connection was lost while COMMIT was on its way."""

    def __init__(
        self, xid: str | None, value: Any, refusal: BaseException | None, reason: str
    ) -> None:
        super().__init__(reason)
        self.xid = xid
        self.value = value
        self.refusal = refusal
        self.reason = reason

    def outcome(self) -> Any:
        """What the committed transaction answered: its value, or its refusal raised."""
        if self.refusal is not None:
            raise self.refusal
        return self.value


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:200]


def ask(conninfo: str, xid: str, timeout: float) -> str | None:
    """``pg_xact_status`` of ``xid`` on a new connection (None: too old to be known)."""
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=max(2, int(timeout))) as conn:
        row = conn.execute(_STATUS_QUERY, (xid,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def settle(
    lost: LostAck,
    *,
    operation: str,
    tries: int,
    deadline: float,
    question: Callable[[str, float], str | None],
    is_connection_error: Callable[[BaseException], bool],
    mask: Callable[[str], str],
) -> tuple[bool, int]:
    """(True, tries) when the write committed, (False, tries) when it is to be run
    again; raises StorageError(outcome_unknown=True) when no answer came in time.
    ``tries`` counts the questions asked for this write so far (across its repeats)."""
    reason = mask(_first_line(lost.reason))
    last = reason
    while tries < TRIES and time.monotonic() < deadline:
        tries += 1
        wait = FIRST_WAIT * 2 ** (tries - 1)
        logger.warning(
            "journal write %s: the connection was lost while committing (%s); try %d of %d:"
            " asking PostgreSQL on a fresh connection in %d ms whether transaction %s"
            " committed",
            operation,
            reason,
            tries,
            TRIES,
            round(wait * 1000),
            lost.xid or "unknown",
        )
        time.sleep(wait)
        if lost.xid is None:
            status = None
        else:
            try:
                status = question(lost.xid, max(0.0, deadline - time.monotonic()))
            except (psycopg.Error, OSError) as exc:
                if isinstance(exc, OSError) or is_connection_error(exc):
                    last = mask(_first_line(str(exc)))
                    continue  # the database is not back yet: ask again
                status = None  # e.g. an id from the future: another server after a failover
        if status == XactStatus.COMMITTED:
            logger.warning(
                "journal write %s: transaction %s had committed (try %d of %d): its"
                " recorded outcome is used, nothing is written again",
                operation,
                lost.xid,
                tries,
                TRIES,
            )
            return True, tries
        if status == XactStatus.IN_PROGRESS:
            last = "the server had not finished the commit yet"
            continue
        logger.warning(
            "journal write %s: transaction %s %s (try %d of %d): the write runs again on a"
            " fresh connection",
            operation,
            lost.xid or "unknown",
            "was not committed" if status == XactStatus.ABORTED else "has no known outcome",
            tries,
            TRIES,
        )
        return False, tries
    logger.error(
        "journal write %s: no answer about transaction %s after %d tries (%s): it fails as"
        " outcome unknown (it may or may not have been committed)",
        operation,
        lost.xid or "unknown",
        tries,
        last,
    )
    raise StorageError(
        "the connection was lost while committing and the database could not say whether"
        f" the write was committed ({tries} tries); it may or may not have been",
        reason=last,
        operation=operation,
        tries=tries,
        outcome_unknown=True,
    )
