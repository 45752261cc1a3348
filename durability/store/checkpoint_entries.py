"""A checkpoint body's history entries as stored, in either format (durability/checkpoints.py
describes both), read without the blobs they name: for the offline scans (verify,
retention) and the chat summaries."""

from __future__ import annotations

from typing import Any

CHECKPOINT_FORMATS = (1, 2)

Entry = tuple[str | None, int, list[str], bool]


def history_entry(body: dict[str, Any], ref: Any) -> Entry | None:
    """One history entry of a checkpoint body as (base node, keep, inline message hashes,
    exact): format 1 names a chain's head and its length (exact: the chain has that many
    messages), format 2 a base, how many of its chain's messages come first and the
    messages after them. None for a format 2 ``of`` entry (the first ``keep`` messages of
    another key's entry, which names its messages itself). Raises KeyError, TypeError or
    ValueError when malformed."""
    if body.get("v") == 1:
        base, keep, add, exact = ref["head"], int(ref["length"]), [], True
    elif "of" in ref:
        if "of" in body["histories"][ref["of"]] or type(ref["keep"]) is not int:
            raise ValueError("undecodable")
        return None
    else:
        base, keep, add, exact = ref["base"], int(ref["keep"]), ref["add"], False
    if not isinstance(add, list) or not all(isinstance(h, str) for h in add):
        raise TypeError("add")
    if base is not None and not isinstance(base, str):
        raise TypeError("base")
    return base, keep, add, exact


def entry_length(body: dict[str, Any], ref: Any) -> int:
    """How many messages a history entry holds: format 1 says it; format 2 keeps ``keep``
    messages of its base chain (or of another entry: ``of``) and adds its own. Raises as
    ``history_entry`` does when malformed."""
    entry = history_entry(body, ref)
    if entry is None:
        return int(ref["keep"])
    _, keep, add, _ = entry
    return keep + len(add)
