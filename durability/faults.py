"""Named crash points for tests that kill the real process at a precise moment.

Set ``A0_CRASH_AT=<name>`` (or ``<name>@<n>`` for the n-th time the point is reached) in
the environment the process starts with, and it sends itself SIGKILL there. The variable is
read once, when this module is imported: unset, a crash point costs one comparison.
"""

from __future__ import annotations

import os
import signal
import threading

CRASH_ENV = "A0_CRASH_AT"

#: Points inside the journal. The agent loop may add its own names.
JOURNAL_POINTS = (
    "journal.batch_before_commit",  # a batch's writes are done, COMMIT not yet issued
    "journal.batch_after_commit",  # COMMIT returned, no caller acknowledged yet
)

_hits: dict[str, int] = {}
_lock = threading.Lock()


_WANTED = os.environ.get(CRASH_ENV) or None


def crash_point(name: str) -> None:
    """SIGKILL this process if ``A0_CRASH_AT`` names this point (and hit count)."""
    wanted = _WANTED
    if wanted is None:
        return
    target, _, count = wanted.partition("@")
    if target != name:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        hit = _hits[name]
    if hit == (int(count) if count.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
