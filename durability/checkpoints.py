"""Checkpoints whose size tracks the step, not the chat.

Each history message is stored once as a content-addressed blob. A history is a chain of
small nodes ``{"base": <node hash or null>, "keep": n, "add": [message hashes]}`` meaning
"the first n messages of base, then these". A checkpoint row holds the masked small state
and, per history key, the head node hash and length; its digest covers that body.
"""

from __future__ import annotations

import json
import marshal
import operator
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from durability.canonical import canonical_json, digest_bytes, digest_text
from durability.errors import CorruptCheckpoint
from durability.masking import Masker
from durability.records import Checkpoint, CheckpointData, CheckpointRef
from durability.store.base import StoreTx
from durability.store.rows import CheckpointRow

FORMAT_VERSION = 1
MAX_CHAIN = 10_000_000
#: Stored JSON is UTF-8 text: decoded as text, json.loads' encoding detection is skipped.
_decode = json.JSONDecoder().decode
#: History nodes an engine reads ahead in one query (the rest are read one by one).
MAX_PREFETCH = 100_000


@dataclass(frozen=True, slots=True, eq=False)
class FrozenMessage:
    """A history message already masked, in canonical JSON and hashed (``Journal.freeze``).

    Immutable: handing the very same object again at the same position of a history costs
    one identity check, no serialisation. ``masker`` is the masker that masked it; under
    another masker the text is decoded and masked again.
    """

    text: str
    hash: str
    masker: Masker

    @classmethod
    def of(cls, masker: Masker, value: Any) -> FrozenMessage:
        text = canonical_json(masker.mask(value))
        return cls(text, digest_text(text), masker)


@dataclass(frozen=True)
class _HistoryHead:
    head: str | None
    hashes: tuple[str, ...]  # blob hash of each masked message
    # The messages as the caller passed them, packed with marshal (format 2: no
    # back-references): equal bytes mean the same types and values, hence the same
    # canonical JSON. ``ends[i]`` is where message i ends in ``packed``. None when unknown
    # (first checkpoint after a restart) or when a message cannot be packed.
    packed: bytes | None
    ends: tuple[int, ...] | None
    # The caller's messages when every one was a FrozenMessage (compared by identity).
    frozen: tuple[FrozenMessage, ...] | None = None


@dataclass(frozen=True)
class HistoryCacheEntry:
    checkpoint_id: int
    heads: dict[str, _HistoryHead]
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
    if not isinstance(body, dict) or body.get("v") != FORMAT_VERSION:
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


def load_checkpoint(
    tx: StoreTx, row: CheckpointRow, wanted: Callable[[str], bool] | None = None
) -> Checkpoint:
    """Validate and rebuild a checkpoint; any damage raises CorruptCheckpoint. With
    ``wanted``, only the histories whose key it accepts are loaded (and returned)."""
    body = _decode_body(row)
    histories: dict[str, list[Any]] = {}
    for key, ref in body["histories"].items():
        if wanted is not None and not wanted(key):
            continue
        try:
            head, length = ref["head"], int(ref["length"])
        except (KeyError, TypeError, ValueError):
            raise _corrupt(row, "undecodable") from None
        hashes = _resolve_hashes(tx, row, head)
        if len(hashes) != length:
            raise _corrupt(row, "history_length_mismatch")
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
) -> dict[str, _HistoryHead]:
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
        body = _decode_body(row)
        return {
            key: _HistoryHead(ref["head"], tuple(_resolve_hashes(tx, row, ref["head"])), None, None)
            for key, ref in body["histories"].items()
        }
    except (CorruptCheckpoint, KeyError, TypeError):
        return {}  # a damaged predecessor is never a base: start a fresh chain


def _masked_blob(masker: Masker, message: Any) -> tuple[str, bytes]:
    if isinstance(message, FrozenMessage):
        if message.masker is masker:
            return message.hash, message.text.encode("utf-8")
        message = json.loads(message.text)
    data = canonical_json(masker.mask(message)).encode("utf-8")
    return digest_bytes(data), data


def _frozen_prefix(messages: list[Any], prev: _HistoryHead, limit: int) -> int:
    """How many leading messages are the very FrozenMessage objects ``prev`` saw."""
    if prev.frozen is None or limit == 0:
        return 0
    if all(map(operator.is_, messages[:limit], prev.frozen[:limit])):
        return limit
    keep = 0
    while keep < limit and messages[keep] is prev.frozen[keep]:
        keep += 1
    return keep


_PACK_VERSION = 2  # marshal format without back-references: bytes depend only on the value
_LIST_HEADER = 5  # marshal list: type byte + 4-byte length, then the items' bytes


def _pack(value: Any) -> bytes | None:
    try:
        return marshal.dumps(value, _PACK_VERSION)
    except ValueError:  # a type marshal does not know (e.g. a str subclass)
        return None


def _packed_prefix(messages: list[Any], prev: _HistoryHead, limit: int) -> int:
    """How many leading messages are byte-for-byte what the previous checkpoint saw.

    One C-level pass over the messages (no JSON, no hashing); 0 when unknown.
    """
    if prev.packed is None or prev.ends is None or limit == 0:
        return 0
    packed = _pack(messages[:limit])
    if packed is None:
        return 0
    if packed[_LIST_HEADER:] == prev.packed[: prev.ends[limit - 1]]:
        return limit
    keep, start = 0, 0
    while keep < limit:
        one = _pack(messages[keep])
        if one is None or one != prev.packed[start : prev.ends[keep]]:
            break
        start = prev.ends[keep]
        keep += 1
    return keep


def _store_history(
    tx: StoreTx,
    masker: Masker,
    messages: list[Any],
    prev: _HistoryHead | None,
    now: float,
    known: dict[tuple[str, ...], str | None] | None = None,
) -> _HistoryHead:
    """Store the messages not already in ``prev``'s chain; return the new head.

    The unchanged prefix is found from the packed bytes; past it (or without them) each
    message is masked and hashed, and a message whose hash still matches the previous
    one at its position extends the prefix. ``known`` maps the messages (their hashes) of
    the chains stored so far in this checkpoint to their heads: a chain with the very same
    messages reuses that head instead of a node of its own (a run's resume base taken at
    this step equals the current history: one node less per chain, issue #24).
    """
    limit = 0 if prev is None else min(len(prev.hashes), len(messages))
    keep = 0
    if prev is not None:
        keep = _frozen_prefix(messages, prev, limit) or _packed_prefix(messages, prev, limit)
    all_frozen = prev is not None and prev.frozen is not None and keep > 0
    hashes = list(prev.hashes[:keep]) if prev is not None else []
    parts: list[bytes] | None = None if all_frozen else []
    if (
        parts is not None
        and keep
        and prev is not None
        and prev.packed is not None
        and prev.ends is not None
    ):
        parts = [prev.packed[: prev.ends[keep - 1]]]
        ends = list(prev.ends[:keep])
    else:
        ends = []
    if keep == 0:
        all_frozen = True
    for index in range(keep, len(messages)):
        message = messages[index]
        if all_frozen and not isinstance(message, FrozenMessage):
            all_frozen = False
        h, data = _masked_blob(masker, message)
        if index == keep and index < limit and prev is not None and h == prev.hashes[index]:
            keep += 1  # unchanged after all (e.g. no packed bytes after a restart)
        else:
            tx.blobs.put(h, data, now)
        hashes.append(h)
        one = _pack(message) if parts is not None else None
        if one is None:
            parts = None
        elif parts is not None:
            parts.append(one)
            ends.append((ends[-1] if ends else 0) + len(one))
    packed = b"".join(parts) if parts is not None else None
    packed_ends = tuple(ends) if packed is not None else None
    frozen = tuple(messages) if all_frozen and messages else None
    all_hashes = tuple(hashes)
    if prev is not None and keep == len(prev.hashes) == len(messages):
        head: str | None = prev.head
    elif known is not None and all_hashes in known:
        head = known[all_hashes]  # the same messages as a chain stored just before
    else:
        base = prev.head if (prev is not None and keep > 0) else None
        node = canonical_json({"base": base, "keep": keep if base else 0, "add": hashes[keep:]})
        node_data = node.encode("utf-8")
        head = digest_bytes(node_data)
        tx.blobs.put(head, node_data, now)
    if known is not None:
        known.setdefault(all_hashes, head)
    return _HistoryHead(head, all_hashes, packed, packed_ends, frozen)


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
    heads: dict[str, _HistoryHead] = {}
    known: dict[tuple[str, ...], str | None] = {}
    for key, messages in data.histories.items():
        prev = previous.get(str(key))
        heads[str(key)] = _store_history(tx, masker, list(messages), prev, now, known)
    masked_state = masker.mask(dict(data.state))
    body = canonical_json(
        {
            "v": FORMAT_VERSION,
            "run_id": run_id,
            "seq": data.seq,
            "state": masked_state,
            "histories": {k: {"head": h.head, "length": len(h.hashes)} for k, h in heads.items()},
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
