"""Writing a checkpoint's histories: which messages are new, and the history entry that
names them (the format is described in durability/checkpoints.py).

A history entry is a node held inline in the checkpoint row, ``{"base", "keep", "add"}``:
"the first ``keep`` messages of the chain at ``base`` (a node blob, or none), then these"
(or one naming another key's entry: ``checkpoints._entry_for``).
A step's entry keeps its predecessor's base and carries the messages added since; once
more than :data:`INLINE_MAX` are carried, they go into one node blob (the old format's
node) and the entry starts again from it. A same-chat turn so adds its messages and no
node blob (issue #24: each blob costs a random leaf of the blobs' hash index).
"""

from __future__ import annotations

import json
import marshal
import operator
from dataclasses import dataclass
from typing import Any

from durability.canonical import canonical_json, digest_bytes, digest_text
from durability.masking import Masker
from durability.store.base import StoreTx

#: Message hashes an entry carries inline before they are stored as a node blob: more
#: makes every checkpoint body longer (67 bytes a hash), fewer writes more node blobs.
INLINE_MAX = 8


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
class HistoryHead:
    """One history as a checkpoint stored it: the entry (``base``, ``keep``; the inline
    messages are ``hashes[keep:]``) and what the next step compares against."""

    base: str | None  # node blob hash: its chain's first ``keep`` messages start the history
    keep: int
    hashes: tuple[str, ...]  # blob hash of each masked message
    # The messages as the caller passed them, packed with marshal (format 2: no
    # back-references): equal bytes mean the same types and values, hence the same
    # canonical JSON. ``ends[i]`` is where message i ends in ``packed``. None when unknown
    # (first checkpoint after a restart) or when a message cannot be packed.
    packed: bytes | None = None
    ends: tuple[int, ...] | None = None
    # The caller's messages when every one was a FrozenMessage (compared by identity).
    frozen: tuple[FrozenMessage, ...] | None = None

    def entry(self) -> dict[str, Any]:
        """The entry in the checkpoint body."""
        return {"base": self.base, "keep": self.keep, "add": list(self.hashes[self.keep :])}


def _masked_blob(masker: Masker, message: Any) -> tuple[str, bytes]:
    if isinstance(message, FrozenMessage):
        if message.masker is masker:
            return message.hash, message.text.encode("utf-8")
        message = json.loads(message.text)
    data = canonical_json(masker.mask(message)).encode("utf-8")
    return digest_bytes(data), data


def _frozen_prefix(messages: list[Any], prev: HistoryHead, limit: int) -> int:
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


def _packed_prefix(messages: list[Any], prev: HistoryHead, limit: int) -> int:
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


def _entry_base(
    tx: StoreTx, prev: HistoryHead | None, keep: int, hashes: tuple[str, ...], now: float
) -> tuple[str | None, int]:
    """(base, keep) of the entry for ``hashes``, whose first ``keep`` are ``prev``'s: the
    predecessor's base while the history still holds all of it, else the part of it kept;
    a node blob once the entry would carry more than INLINE_MAX messages."""
    if prev is not None and keep >= prev.keep:
        base, base_keep = prev.base, prev.keep
    elif prev is not None and keep > 0:
        base, base_keep = prev.base, keep  # cut back into the base chain: its first ``keep``
    else:
        base, base_keep = None, 0
    if len(hashes) - base_keep <= INLINE_MAX:
        return base, base_keep
    node = {"base": base, "keep": base_keep if base else 0, "add": list(hashes[base_keep:])}
    data = canonical_json(node).encode("utf-8")
    head = digest_bytes(data)
    tx.blobs.put(head, data, now)
    return head, len(hashes)


def store_history(
    tx: StoreTx,
    masker: Masker,
    messages: list[Any],
    prev: HistoryHead | None,
    now: float,
    known: dict[tuple[str, ...], HistoryHead] | None = None,
) -> HistoryHead:
    """Store the messages not already in ``prev``'s history; return the new head.

    The unchanged prefix is found from the packed bytes; past it (or without them) each
    message is masked and hashed, and a message whose hash still matches the previous
    one at its position extends the prefix. ``known`` maps the messages (their hashes) of
    the histories stored so far in this checkpoint to their heads: a history with the very
    same messages takes that head's base (a run's resume base taken at this step equals
    the current history; the body names the other key instead of repeating the entry).
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
    same = known.get(all_hashes) if known is not None else None
    if same is not None:
        base, base_keep = same.base, same.keep
    elif prev is not None and keep == len(prev.hashes) == len(messages):
        base, base_keep = prev.base, prev.keep
    else:
        base, base_keep = _entry_base(tx, prev, keep, all_hashes, now)
    head = HistoryHead(base, base_keep, all_hashes, packed, packed_ends, frozen)
    if known is not None:
        known.setdefault(all_hashes, head)
    return head
