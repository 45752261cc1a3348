"""Per-model rate limits over a sliding 60-second window: requests, input and output tokens.

Waiting is asynchronous (``await``), never blocking the event loop. A limit of 0 means none.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

WINDOW_SECONDS = 60.0


def approx_tokens(text: str) -> int:
    """A cheap token estimate: about four characters per token."""
    return (len(text) + 3) // 4 if text else 0


@dataclass
class _Entry:
    at: float
    requests: int = 0
    input: int = 0
    output: int = 0


class RateLimiter:
    """Admits a request once the last 60 s leave room for it under every configured limit."""

    def __init__(
        self,
        requests: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        *,
        window: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.requests = requests
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.window = window
        self._clock = clock
        self._sleep = sleep
        self._entries: deque[_Entry] = deque()
        self._lock = asyncio.Lock()

    def set_limits(self, requests: int, input_tokens: int, output_tokens: int) -> None:
        self.requests, self.input_tokens, self.output_tokens = (
            requests,
            input_tokens,
            output_tokens,
        )

    def usage(self) -> tuple[int, int, int]:
        """Requests, input tokens and output tokens inside the current window."""
        self._expire(self._clock())
        return (
            sum(e.requests for e in self._entries),
            sum(e.input for e in self._entries),
            sum(e.output for e in self._entries),
        )

    def _expire(self, now: float) -> None:
        while self._entries and self._entries[0].at <= now - self.window:
            self._entries.popleft()

    def wait_time(self, input_tokens: int = 0) -> float:
        """Seconds until a request with ``input_tokens`` fits (0 when it fits now).

        When the window is empty the request is admitted even if it alone exceeds a limit,
        so an oversized request waits for a clear window instead of forever.
        """
        now = self._clock()
        self._expire(now)
        if not self._entries:
            return 0.0
        used_requests, used_input, used_output = self.usage()
        over = (
            (self.requests > 0 and used_requests + 1 > self.requests)
            or (self.input_tokens > 0 and used_input + input_tokens > self.input_tokens)
            or (self.output_tokens > 0 and used_output >= self.output_tokens)
        )
        if not over:
            return 0.0
        return max(0.0, self._entries[0].at + self.window - now)

    async def acquire(self, input_tokens: int = 0) -> float:
        """Wait until the request fits, then count it; returns the seconds waited."""
        waited = 0.0
        async with self._lock:
            while (delay := self.wait_time(input_tokens)) > 0:
                await self._sleep(delay)
                waited += delay
            self._entries.append(_Entry(self._clock(), 1, input_tokens, 0))
        return waited

    def add_output(self, output_tokens: int) -> None:
        """Count the tokens a finished request produced."""
        if output_tokens > 0:
            self._entries.append(_Entry(self._clock(), 0, 0, output_tokens))
