"""Checkpoints whose size tracks the step, not the chat.

Each history message is stored once as a content-addressed blob. A checkpoint row holds
the masked small state and, per history key, an entry naming its messages; its digest
covers that body. Two formats are read:

- ``"v": 2`` (written since issue #24, round 3): the entry is a node held inline,
  ``{"base": <node hash or null>, "keep": n, "add": [message hashes]}``, "the first n
  messages of the chain at base, then these"; or ``{"of": <key>, "keep": n}``, the first n
  messages of that key's history in this body (a run's resume base next to the current
  history it is a prefix of). Nodes that outgrow the row become node blobs
  (durability/history_write.py).
- ``"v": 1``: the entry is ``{"head": <node hash or null>, "length": n}``.

A node blob is ``{"base": <node hash or null>, "keep": n, "add": [message hashes]}`` in
both: a chain of them ends at a null base.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from durability.canonical import canonical_json, digest_bytes, digest_text
from durability.errors import CorruptCheckpoint
from durability.history_write import FrozenMessage, HistoryHead, store_history
from durability.masking import Masker
from durability.records import Checkpoint, CheckpointData, CheckpointRef
from durability.store.base import StoreTx
from durability.store.checkpoint_entries import CHECKPOINT_FORMATS, history_entry
from durability.store.rows import CheckpointRow

__all__ = ["FrozenMessage", "HistoryCache", "HistoryCacheEntry", "load_checkpoint"]

FORMAT_VERSION = 2
MAX_CHAIN = 10_000_000
#: Stored JSON is UTF-8 text: decoded as text, json.loads' encoding detection is skipped.
_decode = json.JSONDecoder().decode
#: History nodes an engine reads ahead in one query (the rest are read one by one).
MAX_PREFETCH = 100_000


@dataclass(frozen=True)
class HistoryCacheEntry:
    checkpoint_id: int
    heads: dict[str, HistoryHead]
    run_id: str = ""


class HistoryCache:
    """Per chat: the histories of its latest checkpoint, so a step hashes only new messages."""

    def __init__(self, max_entries: int = 256) -> None:
        self._entries: dict[str, HistoryCacheEntry] = {}
        self._lock = threading.Lock()
        self._max = max_entries

    def get(self, context_id: str) -> HistoryCacheEntry | None:
        with self._lock:
            return self._entries.get(context_id)

    def put(self, context_id: str, entry: HistoryCacheEntry) -> None:
        with self._lock:
            self._entries.pop(context_id, None)
            self._entries[context_id] = entry
            while len(self._entries) > self._max:
                self._entries.pop(next(iter(self._entries)))

    def forget(self, context_id: str) -> None:
        with self._lock:
            self._entries.pop(context_id, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _corrupt(row: CheckpointRow, reason: str) -> CorruptCheckpoint:
    return CorruptCheckpoint(
        "checkpoint failed validation", checkpoint_id=row.id, run_id=row.run_id, reason=reason
    )


def _decode_body(row: CheckpointRow) -> dict[str, Any]:
    if digest_text(row.body) != row.digest:
        raise _corrupt(row, "digest_mismatch")
    try:
        body = json.loads(row.body)
    except ValueError:
        raise _corrupt(row, "undecodable") from None
    if not isinstance(body, dict) or body.get("v") not in CHECKPOINT_FORMATS:
        raise _corrupt(row, "unknown_format")
    if not isinstance(body.get("histories"), dict) or not isinstance(body.get("state"), dict):
        raise _corrupt(row, "undecodable")
    return body


def _verified_blob(tx: StoreTx, row: CheckpointRow, blob_hash: str) -> bytes:
    data = tx.blobs.get_many([blob_hash]).get(blob_hash)
    if data is None:
        raise _corrupt(row, "blob_missing")
    if digest_bytes(data) != blob_hash:
        raise _corrupt(row, "blob_digest_mismatch")
    return data


def _resolve_hashes(tx: StoreTx, row: CheckpointRow, head: str | None) -> list[str]:
    """The message hashes of the history whose chain starts at ``head``.

    The engine prefetches the chain's nodes in one query where it can; every node is
    verified against its hash here, and one the prefetch missed is read on its own."""
    nodes: list[tuple[int, list[str]]] = []
    prefetched = tx.blobs.history_chain(head, MAX_PREFETCH) if head is not None else {}
    current = head
    while current is not None:
        if len(nodes) > MAX_CHAIN:
            raise _corrupt(row, "history_chain_too_long")
        data = prefetched.get(current)
        if data is None:
            data = _verified_blob(tx, row, current)
        elif digest_bytes(data) != current:
            raise _corrupt(row, "blob_digest_mismatch")
        try:
            node = _decode(data.decode("utf-8"))
            base, keep, add = node["base"], int(node["keep"]), list(node["add"])
        except (ValueError, KeyError, TypeError):
            raise _corrupt(row, "undecodable_history_node") from None
        nodes.append((keep, add))
        current = base
    hashes: list[str] = []
    for keep, add in reversed(nodes):
        del hashes[keep:]
        hashes.extend(add)
    return hashes


def _entry(tx: StoreTx, row: CheckpointRow, body: dict[str, Any], ref: Any) -> HistoryHead:
    """One history entry that names its messages itself (not ``of``), resolved."""
    try:
        entry = history_entry(body, ref)
    except (KeyError, TypeError, ValueError):
        raise _corrupt(row, "undecodable") from None
    if entry is None:  # pragma: no cover - the caller passes only entries of their own
        raise _corrupt(row, "undecodable")
    base, keep, add, exact = entry
    chain = _resolve_hashes(tx, row, base)
    if keep < 0 or len(chain) < keep or (exact and len(chain) != keep):
        raise _corrupt(row, "history_length_mismatch")
    return HistoryHead(base, keep, (*chain[:keep], *add))


def _prefix_of(other: HistoryHead, keep: int) -> HistoryHead | None:
    """The history made of the first ``keep`` messages of ``other`` (None when it has
    fewer), based where ``other`` is."""
    if not 0 <= keep <= len(other.hashes):
        return None
    return HistoryHead(other.base, min(other.keep, keep), other.hashes[:keep])


def _heads(
    tx: StoreTx, row: CheckpointRow, body: dict[str, Any], wanted: Callable[[str], bool] | None
) -> dict[str, HistoryHead]:
    """The body's histories (those ``wanted`` accepts), each resolved to its messages'
    hashes; an ``of`` entry names another key's entry, which names its messages itself."""
    refs: dict[str, Any] = body["histories"]
    version = int(body["v"])
    heads: dict[str, HistoryHead] = {}

    def own(key: Any) -> dict[str, Any] | None:  # an entry naming its messages itself
        ref = refs.get(key) if isinstance(key, str) else None
        return ref if isinstance(ref, dict) and (version == 1 or "of" not in ref) else None

    def one(key: str) -> HistoryHead:
        if key in heads:
            return heads[key]
        ref = refs.get(key)
        if not isinstance(ref, dict):
            raise _corrupt(row, "undecodable")
        found: HistoryHead | None
        if own(key) is not None:
            found = _entry(tx, row, body, ref)
        elif own(ref["of"]) is not None and type(ref.get("keep")) is int:
            found = _prefix_of(one(ref["of"]), ref["keep"])
            if found is None:
                raise _corrupt(row, "history_length_mismatch")
        else:
            raise _corrupt(row, "undecodable")
        heads[key] = found
        return found

    return {key: one(key) for key in refs if wanted is None or wanted(key)}


def load_checkpoint(
    tx: StoreTx, row: CheckpointRow, wanted: Callable[[str], bool] | None = None
) -> Checkpoint:
    """Validate and rebuild a checkpoint; any damage raises CorruptCheckpoint. With
    ``wanted``, only the histories whose key it accepts are loaded (and returned)."""
    body = _decode_body(row)
    histories: dict[str, list[Any]] = {}
    for key, head in _heads(tx, row, body, wanted).items():
        hashes = head.hashes
        blobs = tx.blobs.get_many(hashes)
        messages = []
        for h in hashes:
            data = blobs.get(h)
            if data is None:
                raise _corrupt(row, "blob_missing")
            if digest_bytes(data) != h:
                raise _corrupt(row, "blob_digest_mismatch")
            try:
                messages.append(_decode(data.decode("utf-8")))
            except ValueError:
                raise _corrupt(row, "undecodable_message") from None
        histories[key] = messages
    return Checkpoint(
        id=row.id,
        run_id=row.run_id,
        context_id=row.context_id,
        seq=row.seq,
        state=body["state"],
        histories=histories,
        digest=row.digest,
        created_at=row.created_at,
    )


def _previous_heads(
    tx: StoreTx, run_id: str, context_id: str, cache: HistoryCache
) -> dict[str, HistoryHead]:
    """Heads of the chat's latest checkpoint (from the cache when it is current).

    Only the chat's one open run writes checkpoints, so once it has one, its newest is the
    chat's newest; before that, the chat's newest comes from its earlier runs.

    Within a run the cache is used without a look-up: it names a chain this run committed,
    whose blobs stay while the run is open (retention removes only finished runs), so a new
    node based on it is correct even if another writer added a checkpoint meanwhile.
    """
    cached = cache.get(context_id)
    if cached is not None and cached.run_id == run_id:
        return cached.heads
    row = tx.checkpoints.latest(run_id=run_id) or tx.checkpoints.latest(context_id=context_id)
    if row is None:
        return {}
    if cached is not None and cached.checkpoint_id == row.id:
        return cached.heads
    try:
        return _heads(tx, row, _decode_body(row), None)
    except (CorruptCheckpoint, KeyError, TypeError, ValueError):
        return {}  # a damaged predecessor is never a base: start a fresh chain


def _entry_for(
    head: HistoryHead, heads: dict[str, HistoryHead], entries: dict[str, dict[str, Any]]
) -> tuple[dict[str, Any], HistoryHead]:
    """The body's entry for ``head`` and the head as the body names it: ``of`` another key
    stored before whose history starts with all of this one's messages, else its own."""
    n = len(head.hashes)
    for key, other in heads.items():
        if (
            n
            and "of" not in entries[key]
            and len(other.hashes) >= n
            and other.hashes[n - 1] == head.hashes[-1]  # cheap first: the last one
            and other.hashes[:n] == head.hashes
        ):
            prefix = _prefix_of(other, n)
            assert prefix is not None
            return {"of": key, "keep": n}, replace(head, base=prefix.base, keep=prefix.keep)
    return head.entry(), head


def store_checkpoint(
    tx: StoreTx,
    masker: Masker,
    cache: HistoryCache,
    run_id: str,
    context_id: str,
    data: CheckpointData,
    now: float,
) -> tuple[CheckpointRef, HistoryCacheEntry]:
    """Write one checkpoint in ``tx``; return it and the cache entry to keep after commit."""
    previous = _previous_heads(tx, run_id, context_id, cache)
    heads: dict[str, HistoryHead] = {}
    known: dict[tuple[str, ...], HistoryHead] = {}
    entries: dict[str, dict[str, Any]] = {}
    for key, messages in data.histories.items():
        head = store_history(tx, masker, list(messages), previous.get(str(key)), now, known)
        entries[str(key)], heads[str(key)] = _entry_for(head, heads, entries)
    masked_state = masker.mask(dict(data.state))
    body = canonical_json(
        {
            "v": FORMAT_VERSION,
            "run_id": run_id,
            "seq": data.seq,
            "state": masked_state,
            "histories": entries,
        }
    )
    digest = digest_text(body)
    checkpoint_id = tx.checkpoints.insert(run_id, context_id, data.seq, body, digest, now)
    checkpoint = CheckpointRef(
        id=checkpoint_id,
        run_id=run_id,
        context_id=context_id,
        seq=data.seq,
        digest=digest,
        history_lengths={k: len(h.hashes) for k, h in heads.items()},
        created_at=now,
    )
    return checkpoint, HistoryCacheEntry(checkpoint_id, heads, run_id)
