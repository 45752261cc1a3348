"""The journal's rows read and pruned offline on a SQLite file (schema 0001 and later):
each checkpoint's digest and history chains checked (``verify``), finished runs and the
blobs only they reached deleted (``retention``), a run's checkpoints listed (``inspect``).
Opening and checking the file itself is durability/store/sqlite_files.py.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from durability.store._sql import FINISHED_RUNS
from durability.store.checkpoint_entries import CHECKPOINT_FORMATS, history_entry


def runs_with_status(conn: sqlite3.Connection, statuses: Iterable[str]) -> list[tuple[str, float]]:
    """(id, updated_at) of every run in one of ``statuses``."""
    wanted = list(statuses)
    marks = ",".join("?" * len(wanted))
    rows = conn.execute(
        f"SELECT id, updated_at FROM runs WHERE status IN ({marks})", wanted
    ).fetchall()
    return [(str(r[0]), float(r[1])) for r in rows]


@dataclass(frozen=True)
class CheckpointProblem:
    checkpoint_id: int
    run_id: str
    reason: str  # digest_mismatch, undecodable, unknown_format, blob_missing, ...


class _HistoryWalker:
    """Resolves history node chains through the blobs table, remembering what it saw."""

    def __init__(self, conn: sqlite3.Connection, check_digests: bool) -> None:
        self.conn = conn
        self.check_digests = check_digests
        self.seen_nodes: dict[str, list[str]] = {}  # node hash -> resolved message hashes
        self.reachable: set[str] = set()

    def blob(self, blob_hash: str) -> bytes | None:
        row = self.conn.execute("SELECT data FROM blobs WHERE hash = ?", (blob_hash,)).fetchone()
        return None if row is None else bytes(row[0])

    def resolve(self, head: str | None) -> list[str]:
        """Message hashes of the history whose head node is `head`; raises ValueError(reason)."""
        chain: list[tuple[str, dict[str, Any]]] = []
        current = head
        base_hashes: list[str] = []
        while current is not None:
            if current in self.seen_nodes:
                base_hashes = self.seen_nodes[current]
                break
            data = self.blob(current)
            if data is None:
                raise ValueError("blob_missing")
            if self.check_digests and hashlib.sha256(data).hexdigest() != current:
                raise ValueError("blob_digest_mismatch")
            try:
                node = json.loads(data)
                base, keep, add = node["base"], int(node["keep"]), [str(h) for h in node["add"]]
            except (ValueError, KeyError, TypeError):
                raise ValueError("undecodable_history_node") from None
            self.reachable.add(current)
            chain.append((current, {"keep": keep, "add": add}))
            current = base
            if len(chain) > 10_000_000:
                raise ValueError("history_chain_too_long")
        hashes = base_hashes
        for node_hash, node in reversed(chain):
            hashes = hashes[: node["keep"]] + node["add"]
            self.seen_nodes[node_hash] = hashes
        return hashes

    def messages_present(self, hashes: list[str]) -> str | None:
        """None when every message blob exists (and matches its hash); else the reason."""
        for h in hashes:
            if h in self.reachable:
                continue
            data = self.blob(h)
            if data is None:
                return "blob_missing"
            if self.check_digests and hashlib.sha256(data).hexdigest() != h:
                return "blob_digest_mismatch"
            self.reachable.add(h)
        return None


def _checkpoint_reason(walker: _HistoryWalker, body_text: str, digest: str) -> str | None:
    if hashlib.sha256(body_text.encode("utf-8")).hexdigest() != digest:
        return "digest_mismatch"
    try:
        body = json.loads(body_text)
    except ValueError:
        return "undecodable"
    if not isinstance(body, dict) or body.get("v") not in CHECKPOINT_FORMATS:
        return "unknown_format"
    histories = body.get("histories")
    if not isinstance(histories, dict) or not isinstance(body.get("state"), dict):
        return "undecodable"
    lengths: dict[str, int] = {}
    for key, ref in histories.items():
        try:
            entry = history_entry(body, ref)
        except (KeyError, TypeError, ValueError):
            return "undecodable"
        if entry is None:
            continue
        base, keep, add, exact = entry
        lengths[key] = keep + len(add)
        try:
            chain = walker.resolve(base)
        except ValueError as exc:
            return str(exc) if str(exc).isidentifier() else "undecodable"
        if keep < 0 or len(chain) < keep or (exact and len(chain) != keep):
            return "history_length_mismatch"
        reason = walker.messages_present(chain[:keep] + add)
        if reason:
            return reason
    for ref in histories.values() if body["v"] == 2 else ():  # ``of``: a prefix of its key's
        if "of" in ref and not 0 <= ref["keep"] <= lengths[ref["of"]]:
            return "history_length_mismatch"
    return None


def checkpoint_problems(conn: sqlite3.Connection) -> tuple[int, list[CheckpointProblem]]:
    """Recompute every checkpoint's digest and resolve its histories; (checked, problems)."""
    walker = _HistoryWalker(conn, check_digests=True)
    problems: list[CheckpointProblem] = []
    checked = 0
    rows = conn.execute("SELECT id, run_id, body, digest FROM checkpoints ORDER BY id")
    for cp_id, run_id, body, digest in rows.fetchall():
        checked += 1
        try:
            reason = _checkpoint_reason(walker, str(body), str(digest))
        except UnicodeError:
            reason = "undecodable"
        if reason:
            problems.append(CheckpointProblem(int(cp_id), str(run_id), reason))
    return checked, problems


def blob_problems(conn: sqlite3.Connection) -> tuple[int, list[str]]:
    """(blobs checked, hashes of blobs whose bytes no longer match their content address)."""
    bad = []
    checked = 0
    for blob_hash, data in conn.execute("SELECT hash, data FROM blobs"):
        checked += 1
        if hashlib.sha256(bytes(data)).hexdigest() != blob_hash:
            bad.append(str(blob_hash))
    return checked, bad


def _reachable_from(conn: sqlite3.Connection, where: str, args: list[str]) -> set[str]:
    """Blobs the selected checkpoints and calls reach: history nodes, messages, results."""
    walker = _HistoryWalker(conn, check_digests=False)
    rows = conn.execute(f"SELECT body FROM checkpoints {where}", args).fetchall()
    for (text,) in rows:
        try:
            body = json.loads(text)
            refs = list(body["histories"].values())
        except (ValueError, AttributeError, KeyError, TypeError):
            continue
        for ref in refs:
            try:
                entry = history_entry(body, ref)
            except (ValueError, KeyError, TypeError):
                entry = None
                if isinstance(ref, dict):  # keep what a damaged entry still names
                    names = [ref.get("head"), ref.get("base"), *(ref.get("add") or [])]
                    walker.reachable.update(h for h in names if isinstance(h, str))
            if entry is None:
                continue
            base, _, add, _ = entry
            walker.reachable.update(add)
            try:
                walker.reachable.update(walker.resolve(base))
            except ValueError:
                if base is not None:
                    walker.reachable.add(base)  # keep what a damaged chain still names
    rows = conn.execute(
        f"SELECT result_blob FROM calls {where or 'WHERE 1'} AND result_blob IS NOT NULL", args
    ).fetchall()
    walker.reachable.update(str(r[0]) for r in rows)
    return walker.reachable


def referenced_blobs(conn: sqlite3.Connection) -> set[str]:
    """Every blob a remaining checkpoint or call can reach."""
    return _reachable_from(conn, "", [])


def delete_runs_and_orphan_blobs(conn: sqlite3.Connection, run_ids: list[str]) -> tuple[int, int]:
    """Inside the caller's write transaction: delete finished runs (their inputs, calls,
    checkpoints, decisions, grants and events cascade), then the blobs those runs reached
    that no remaining checkpoint or call reaches. Blobs stored on their own (put_blob) are
    never candidates. Returns (runs removed, blobs removed).
    """
    candidates: set[str] = set()
    removed_runs = 0
    finished = f"status IN ({FINISHED_RUNS})"
    for chunk, marks in _ids_where(conn, "runs", run_ids, finished):
        candidates |= _reachable_from(conn, f"WHERE run_id IN ({marks})", chunk)
        cur = conn.execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk)
        removed_runs += cur.rowcount
    if not candidates:
        return removed_runs, 0
    orphans = sorted(candidates - referenced_blobs(conn))
    removed_blobs = 0
    for start in range(0, len(orphans), 500):
        chunk = orphans[start : start + 500]
        cur = conn.execute(f"DELETE FROM blobs WHERE hash IN ({','.join('?' * len(chunk))})", chunk)
        removed_blobs += cur.rowcount
    return removed_runs, removed_blobs


def contexts_of_runs(conn: sqlite3.Connection, run_ids: list[str]) -> set[str]:
    """The chats these runs belong to."""
    found: set[str] = set()
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        rows = conn.execute(
            f"SELECT DISTINCT context_id FROM runs WHERE id IN ({','.join('?' * len(chunk))})",
            chunk,
        ).fetchall()
        found.update(str(r[0]) for r in rows)
    return found


def delete_emptied_contexts(conn: sqlite3.Connection, context_ids: set[str]) -> int:
    """Inside the caller's write transaction: of these chats, delete those left without any
    run, with their documents and conflicts (cascade) and their chat-level events. A chat
    whose every run was deleted is gone. Returns how many chats were deleted."""
    removed = 0
    runless = "NOT EXISTS (SELECT 1 FROM runs WHERE runs.context_id = contexts.id)"
    for empty, marks in _ids_where(conn, "contexts", sorted(context_ids), runless):
        conn.execute(f"DELETE FROM events WHERE context_id IN ({marks})", empty)
        removed += conn.execute(f"DELETE FROM contexts WHERE id IN ({marks})", empty).rowcount
    return removed


def checkpoint_metadata(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """Id, position, digest, time and body size of each checkpoint of a run (no content)."""
    rows = conn.execute(
        "SELECT id, agent_seq, digest, created_at, size FROM ("
        " SELECT id, seq AS agent_seq, digest, created_at, length(CAST(body AS BLOB)) AS size"
        " FROM checkpoints WHERE run_id = ?) ORDER BY id",
        (run_id,),
    ).fetchall()
    return [
        {
            "id": r[0],
            "run_id": run_id,
            "seq": r[1],
            "digest": r[2],
            "created_at": r[3],
            "body_bytes": r[4],
        }
        for r in rows
    ]


def _ids_where(
    conn: sqlite3.Connection, table: str, ids: list[str], condition: str
) -> Iterator[tuple[list[str], str]]:
    """Of these ids of ``table``, those whose row meets ``condition``, 500 at a time (each
    non-empty batch with its ``?,?,...`` placeholders)."""
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        sql = f"SELECT id FROM {table} WHERE id IN ({','.join('?' * len(chunk))}) AND {condition}"
        found = [str(r[0]) for r in conn.execute(sql, chunk).fetchall()]
        if found:
            yield found, ",".join("?" * len(found))
