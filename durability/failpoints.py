"""Failpoints at the agent loop's durable boundaries, for crash tests. Off unless set.

``A0_CRASH_AT=<boundary>`` and ``A0_CRASH_MATCH=<call name>`` (a tool name, or ``model``
for model calls; empty or unset matches every call) make the process SIGKILL itself the
first time that boundary is reached for a matching call. "First time" holds across
restarts: before dying, the process appends ``<boundary>:<match>`` to the file
``failpoints-fired`` in the state folder the caller passes (by convention the journal's
folder), so the restarted process goes on.

``A0_CRASH_MODE=freeze`` stops the process dead at the boundary instead of killing it: the
calling thread (the server's event loop) blocks, so nothing more happens, until something
outside kills the process (a test's ``docker kill -s KILL``, which can then kill a whole
container at an exact point). A frozen process kills itself after
``A0_CRASH_FREEZE_SECONDS`` (default 600) so a forgotten one never lingers.

Tests that run the loop in-process use ``raise_instead()``: the boundary then raises
``SimulatedCrash`` (a BaseException, so no ``except Exception`` swallows it) instead of
killing the test runner. The journal's own crash points stay in durability/faults.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

CRASH_AT_ENV = "A0_CRASH_AT"
CRASH_MATCH_ENV = "A0_CRASH_MATCH"
CRASH_MODE_ENV = "A0_CRASH_MODE"  # "kill" (default) or "freeze"
FREEZE_SECONDS_ENV = "A0_CRASH_FREEZE_SECONDS"
FIRED_FILE = "failpoints-fired"

BOUNDARIES = ("before_intent", "after_intent", "after_effect", "after_result", "after_checkpoint")


class SimulatedCrash(BaseException):
    """Raised at a failpoint in raise mode: the in-process stand-in for SIGKILL."""

    def __init__(self, boundary: str, name: str) -> None:
        super().__init__(f"simulated crash at {boundary} for {name}")
        self.boundary = boundary
        self.name = name


_lock = threading.Lock()
_raise_mode = False


@contextlib.contextmanager
def raise_instead() -> Iterator[None]:
    """Within this block a firing failpoint raises SimulatedCrash instead of SIGKILL."""
    global _raise_mode
    with _lock:
        previous, _raise_mode = _raise_mode, True
    try:
        yield
    finally:
        with _lock:
            _raise_mode = previous


def _already_fired(path: Path, key: str) -> bool:
    try:
        return key in path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return False


def _mark_fired(path: Path, key: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (key + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def failpoint(boundary: str, name: str, state_dir: Path | None) -> None:
    """Crash here if A0_CRASH_AT names ``boundary`` and A0_CRASH_MATCH matches ``name``."""
    wanted = os.environ.get(CRASH_AT_ENV)
    if not wanted or wanted != boundary:
        return
    match = os.environ.get(CRASH_MATCH_ENV, "")
    if match and match != name:
        return
    key = f"{boundary}:{match}"
    fired = Path(state_dir) / FIRED_FILE if state_dir is not None else None
    with _lock:
        if fired is not None:
            if _already_fired(fired, key):
                return
            _mark_fired(fired, key)
        if _raise_mode:
            raise SimulatedCrash(boundary, name)
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
