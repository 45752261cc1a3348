"""wait: pause the agent for some seconds or until a time, honouring interventions."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from python.helpers.tool import Response, Tool

MAX_WAIT = 366 * 24 * 3600  # a year: longer waits are refused as a likely mistake
STEP = 1.0  # interventions are checked at least this often


def wait_seconds(args: dict[str, Any], now: datetime) -> float:
    """Seconds to wait from `seconds`/`minutes`/`hours`/`days` (added up) or an ISO `until`."""
    until = args.get("until")
    if until:
        try:
            target = datetime.fromisoformat(str(until).replace("Z", "+00:00"))
        except ValueError as e:
            raise ValueError(f"'until' is not an ISO date-time: {until!r}") from e
        if target.tzinfo is None:
            target = target.replace(tzinfo=UTC)
        return max((target - now).total_seconds(), 0.0)
    total = 0.0
    units = (("seconds", 1), ("minutes", 60), ("hours", 3600), ("days", 86400), ("duration", 1))
    for key, factor in units:
        if key in args and args[key] not in (None, ""):
            try:
                total += float(args[key]) * factor
            except (TypeError, ValueError) as e:
                raise ValueError(f"'{key}' must be a number, got {args[key]!r}") from e
    return max(total, 0.0)


class Wait(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        try:
            seconds = wait_seconds(self.args, datetime.now(UTC))
        except ValueError as e:
            return Response(str(e), break_loop=False)
        if seconds > MAX_WAIT:
            return Response(f"A wait of {seconds:g} seconds is longer than a year: refused.", False)
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while (left := end - loop.time()) > 0:
            self.set_progress(f"Waiting, {left:.0f} s left.")
            await self.agent.handle_intervention()
            await asyncio.sleep(min(left, STEP))
        self.set_progress("")
        return Response(f"Waited {seconds:g} seconds.", break_loop=False)
