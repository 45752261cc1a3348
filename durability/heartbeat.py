"""A shared worker's heartbeat: a daemon thread that renews its claims (durability/cluster.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from durability.errors import DurabilityError

logger = logging.getLogger("a0.durability.cluster")  # the claims' log: one place to read


class Renewed(Protocol):
    @property
    def lost(self) -> list[str]: ...


class Renewing(Protocol):
    """What a heartbeat renews (``durability.cluster.Cluster``)."""

    @property
    def worker_id(self) -> str: ...

    def renew(self) -> Renewed: ...


class Heartbeat:
    """A daemon thread renewing the worker's claims every ``interval`` seconds. A failed
    renewal (database unreachable) is logged; the claims' ``live_until`` then passes and
    the worker stops starting effects until a renewal succeeds again."""

    def __init__(
        self, cluster: Renewing, interval: float, on_lost: Callable[[list[str]], None] | None
    ) -> None:
        self.cluster = cluster
        self.interval = interval
        self.on_lost = on_lost
        self.beats = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"heartbeat:{cluster.worker_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                renewal = self.cluster.renew()
            except DurabilityError as exc:
                self.failures += 1
                logger.warning("heartbeat failed (%s): claims are not renewed", exc.code)
                continue
            self.beats += 1
            if renewal.lost and self.on_lost is not None:
                self.on_lost(renewal.lost)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=max(5.0, self.interval * 2))
