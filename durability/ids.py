"""Random ids for journal records (calls, runs), in uuid4's hex form.

``uuid.uuid4()`` reads 16 bytes from the kernel per id; the read releases the GIL, and
taking it back behind the journal's writer thread can stall the event loop that prepares
the call (bench/README.md, round 5c). Here the kernel's random bytes are read 4 KiB at a
time and cut into ids with uuid4's version and variant bits, so an id is as random and
as unique as ``uuid.uuid4().hex``. A forked child drops the parent's unused bytes (it
would otherwise hand out the same ids as its parent).
"""

from __future__ import annotations

import os
import threading

_ID_BYTES = 16
_POOL_BYTES = 4096
_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_SET = (0x4000 << 64) | (0x8000 << 48)  # version 4, RFC 4122 variant

_lock = threading.Lock()
_pool = b""
_offset = 0


def _reset() -> None:
    global _pool, _offset
    _pool, _offset = b"", 0


os.register_at_fork(after_in_child=_reset)


def new_id() -> str:
    """32 lowercase hex digits, formatted as a version 4 UUID (random)."""
    global _pool, _offset
    with _lock:
        if _offset + _ID_BYTES > len(_pool):
            _pool, _offset = os.urandom(_POOL_BYTES), 0
        chunk = _pool[_offset : _offset + _ID_BYTES]
        _offset += _ID_BYTES
    value = (int.from_bytes(chunk, "big") & _CLEAR) | _SET
    return f"{value:032x}"
