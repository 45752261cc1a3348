"""Named crash points for crash tests: one module, one syntax. Off unless set.

``A0_CRASH_AT=<point>`` makes the process SIGKILL itself when it reaches that point. A
point is one of the agent loop's durable boundaries (``BOUNDARIES``: every journaled call
passes them), one of the journal's own (``JOURNAL_POINTS``, inside the group commit) or
one of a shared worker's claims (``CLUSTER_POINTS``) or one of a typed input's
(``PTY_POINTS``).

- ``A0_CRASH_AT=<point>@<n>``: the n-th time the point is reached in this process, not the
  first.
- ``A0_CRASH_MATCH=<call name>`` (a tool name, or ``model`` for model calls) narrows a loop
  boundary to one call; empty or unset matches every call. Journal points have no call.
- With a state folder (the loop passes the journal's folder) "first time" holds across
  restarts: before dying the process appends ``<A0_CRASH_AT>:<A0_CRASH_MATCH>`` to the file
  ``failpoints-fired`` there, fsynced, and a process that finds its key there goes on.
- ``A0_CRASH_MODE=freeze`` stops the process dead at the point instead of killing it: the
  calling thread blocks until something outside kills the process (a test's
  ``docker kill -s KILL``, which can then kill a whole container at an exact point). A
  frozen process kills itself after ``A0_CRASH_FREEZE_SECONDS`` (default 600).

Tests that run the loop in-process use ``raise_instead()``: a firing point raises
``SimulatedCrash`` (a BaseException, so no ``except Exception`` swallows it) instead of
killing the test runner.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from durability.synced import write_synced

CRASH_AT_ENV = "A0_CRASH_AT"
CRASH_MATCH_ENV = "A0_CRASH_MATCH"
CRASH_MODE_ENV = "A0_CRASH_MODE"  # "kill" (default) or "freeze"
FREEZE_SECONDS_ENV = "A0_CRASH_FREEZE_SECONDS"
FIRED_FILE = "failpoints-fired"

#: The loop's boundaries around every journaled call (python/durable/seams.py).
BOUNDARIES = ("before_intent", "after_intent", "after_effect", "after_result", "after_checkpoint")

#: Points inside the journal's group commit (durability/store/_group_commit.py).
JOURNAL_POINTS = (
    "journal.batch_before_commit",  # a batch's writes are done, COMMIT not yet issued
    "journal.batch_after_commit",  # COMMIT returned, no caller acknowledged yet
)

#: Inside the one transaction of a call's result and its memory writes
#: (durability/journal/_atomic.py): the writes are done, the result not yet written.
ATOMIC_POINTS = ("journal.commit_result_with.writes_applied",)

#: Points of a shared worker's claims (durability/cluster.py). With ``A0_CRASH_MODE=freeze``
#: the heartbeat thread stops where it would learn that a claim was lost, so the worker's
#: next write for the run is what finds out (the multi-host tests use this).
CLUSTER_POINTS = (
    "cluster.renewal_lost",  # a renewal found a claim taken over, before it is forgotten
    "cluster.liveness_lost",  # the liveness lock's session ended, before it is taken again
)

#: Around the handover of a typed input to its terminal (python/tools/input.py): after the
#: intent, before the handover file exists; and after the relay's delivery marker is on disk.
PTY_POINTS = ("pty.before_handover", "pty.after_delivery")


class SimulatedCrash(BaseException):
    """Raised at a failpoint in raise mode: the in-process stand-in for SIGKILL."""

    def __init__(self, point: str, name: str) -> None:
        super().__init__(f"simulated crash at {point} for {name}")
        self.boundary = point
        self.name = name


class _State:
    """The process's failpoint state: raise mode and hit counts (only for ``@<n>``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.raise_mode = False
        self.hits: dict[str, int] = {}


_state = _State()


@contextlib.contextmanager
def raise_instead() -> Iterator[None]:
    """Within this block a firing failpoint raises SimulatedCrash instead of SIGKILL (and
    ``@<n>`` counts hits from zero, so in-process tests never see each other's)."""
    with _state.lock:
        previous, _state.raise_mode = _state.raise_mode, True
        _state.hits.clear()
    try:
        yield
    finally:
        with _state.lock:
            _state.raise_mode = previous


def _already_fired(path: Path, key: str) -> bool:
    try:
        return key in path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return False


def _mark_fired(path: Path, key: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_synced(path, (key + "\n").encode("utf-8"), append=True)


def _nth(count: str) -> int:
    return int(count) if count.isdigit() and int(count) > 0 else 1


def _aimed_at(point: str, name: str) -> tuple[str, str] | None:
    """(``A0_CRASH_AT``, ``A0_CRASH_MATCH``) when they name this point for ``name``."""
    wanted = os.environ.get(CRASH_AT_ENV)
    if not wanted or wanted.partition("@")[0] != point:
        return None
    match = os.environ.get(CRASH_MATCH_ENV, "")
    if match and name and match != name:
        return None
    return wanted, match


def armed(point: str, name: str = "") -> bool:
    """True when ``A0_CRASH_AT`` (and ``A0_CRASH_MATCH``) name this point for ``name``: a
    caller whose writes at this point are deferred commits them first, so the point still
    means what it says (e.g. ``after_result``: the result is on disk)."""
    return _aimed_at(point, name) is not None


def failpoint(point: str, name: str = "", state_dir: Path | None = None) -> None:
    """Crash here if ``A0_CRASH_AT`` names ``point`` (and ``A0_CRASH_MATCH`` the call
    ``name``, when the point has one); see the module docstring."""
    aimed = _aimed_at(point, name)
    if aimed is None:
        return
    wanted, match = aimed
    _target, at, count = wanted.partition("@")
    key = f"{wanted}:{match}"
    fired = Path(state_dir) / FIRED_FILE if state_dir is not None else None
    with _state.lock:
        if fired is not None and _already_fired(fired, key):
            return
        if at:
            _state.hits[key] = _state.hits.get(key, 0) + 1
            if _state.hits[key] != _nth(count):
                return
        if fired is not None:
            _mark_fired(fired, key)
        if _state.raise_mode:
            raise SimulatedCrash(point, name)
    if os.environ.get(CRASH_MODE_ENV, "kill") == "freeze":
        _freeze()
    os.kill(os.getpid(), signal.SIGKILL)


def _freeze() -> None:
    """Block this thread until the process is killed from outside (bounded, see module doc)."""
    try:
        limit = float(os.environ.get(FREEZE_SECONDS_ENV) or 600)
    except ValueError:
        limit = 600.0
    deadline = time.monotonic() + limit
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 1.0))
