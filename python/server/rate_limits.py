"""Failed logins and failed API keys, limited per client address with a token bucket.

Each client address has a bucket of ``burst`` tokens that refills at ``per_minute`` tokens a
minute. A failure takes a token; a success takes none. While a client's bucket holds less
than one token, every attempt of that client is refused with ``429 too_many_requests`` and
a ``Retry-After`` header, the right password or key too: that is what stops online
guessing. Other addresses have buckets of their own. The address is the peer's, or the
one a trusted proxy names (FORWARDED_ALLOW_IPS, docs/security.md).

The table holds at most ``max_clients`` buckets; full buckets (nothing to remember) are
dropped first, then the oldest.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from python.server.errors import error_response

LOGIN_BURST, LOGIN_PER_MINUTE = 10, 10.0
API_KEY_BURST, API_KEY_PER_MINUTE = 20, 20.0
MAX_CLIENTS = 10_000


class FailureLimit:
    """One token bucket per client address (not thread-safe: used on the event loop)."""

    def __init__(
        self,
        burst: int,
        per_minute: float,
        *,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = float(burst)
        self.rate = per_minute / 60.0
        self.max_clients = max_clients
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)

    def _tokens(self, client: str, now: float) -> float:
        tokens, at = self._buckets.get(client, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    def retry_after(self, client: str) -> int:
        """Seconds until ``client`` may try again; 0 when it may now."""
        if client not in self._buckets:
            return 0
        tokens = self._tokens(client, self.clock())
        return 0 if tokens >= 1.0 else max(1, math.ceil((1.0 - tokens) / self.rate))

    def take(self, client: str) -> int:
        """Take a token for an attempt: 0 when taken, else the seconds to wait (nothing
        taken). Taken before the attempt, so parallel attempts cannot pass the limit;
        ``give_back`` returns it when the attempt succeeded."""
        wait = self.retry_after(client)
        if wait:
            return wait
        now = self.clock()
        tokens = self._tokens(client, now) - 1.0
        self._buckets.pop(client, None)
        self._buckets[client] = (tokens, now)  # the most recent last
        if len(self._buckets) > self.max_clients:
            self._prune(now)
        return 0

    def give_back(self, client: str) -> None:
        """The attempt succeeded: it costs nothing."""
        if client in self._buckets:
            now = self.clock()
            self._buckets[client] = (min(self.burst, self._tokens(client, now) + 1.0), now)

    def _prune(self, now: float) -> None:
        for client in [c for c in self._buckets if self._tokens(c, now) >= self.burst]:
            del self._buckets[client]
        while len(self._buckets) > self.max_clients:
            del self._buckets[next(iter(self._buckets))]


def client_of(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


def too_many(retry_after: int, what: str) -> Response:
    response = error_response(
        "too_many_requests",
        f"Too many failed {what} from this address; try again in {retry_after} s.",
        {"retry_after": retry_after},
    )
    response.headers["Retry-After"] = str(retry_after)
    return response


class ApiKeyLimit:
    """ASGI middleware: a request that tries an API key (``attempt(scope)``) takes a token
    of its client's bucket, or is refused while it is empty; any answer but 401 gives the
    token back."""

    def __init__(self, app: ASGIApp, *, limit: FailureLimit, attempt: Callable[[Scope], bool]):
        self.app = app
        self.limit = limit
        self.attempt = attempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.attempt(scope):
            await self.app(scope, receive, send)
            return
        client = client_of(scope)
        wait = self.limit.take(client)
        if wait:
            await too_many(wait, "API keys")(scope, receive, send)
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] != 401:
                self.limit.give_back(client)
            await send(message)

        await self.app(scope, receive, watch)
