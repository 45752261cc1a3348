"""When a task's slots are: cron fields read on the wall clock of the task's timezone.

A slot is an instant (seconds since the epoch, UTC). The cron expression (five fields:
minute, hour, day of month, month, day of week; parsed by croniter, which also handles
ranges, steps, lists and names, and the usual "day of month OR day of week" rule) picks
wall-clock times in the task's timezone (an IANA name from zoneinfo; tzdata is pinned so
every install knows every zone). Each wall time becomes one instant:

- a wall time that happens twice (the clock goes back in autumn) fires once, at its first
  occurrence;
- a wall time that does not exist (the clock jumps forward in spring) fires at the moment
  of the jump; several such slots in one gap are one slot (they share that instant).

So slots never repeat and always move forward. ``latest_slot(now)`` and ``next_slot(t)``
answer the scheduler's two questions: which slot is due, and when to wake up.

Planned times (``planned`` tasks) are ISO 8601 date-times; one without an offset is read on
the task's timezone's wall clock with the same two rules.

croniter (and dateutil under it, ~12 ms) is imported by the first function that reads a
cron expression, not with this module: a server whose journal holds no cron task never
needs it, and one that does reads it after recovery has started the resumed runs.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from durability.errors import TaskInvalid

CRON_FIELDS = ("minute", "hour", "day", "month", "weekday")
UTC = dt.UTC
#: No zone shifts its clock by more than this (the largest real change is two hours): the
#: window around an instant in which the wall-clock mapping may not be a plain shift.
_DST_MARGIN = dt.timedelta(hours=3)
MAX_FIELD_LENGTH = 100
MAX_PLAN_ITEMS = 1000


def invalid(message: str, field: str) -> TaskInvalid:
    return TaskInvalid(message, field=field)


def zone(name: object) -> ZoneInfo:
    """The timezone ``name`` (an IANA name such as ``Europe/Berlin`` or ``UTC``)."""
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        raise invalid("timezone must be an IANA name such as Europe/Berlin or UTC", "timezone")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise invalid(f"unknown timezone: {name.strip()[:64]}", "timezone") from None


def cron_fields(schedule: object) -> dict[str, str]:
    """``{minute, hour, day, month, weekday}`` from that object (missing fields are ``*``) or
    from a five-field cron string; every field checked."""
    if isinstance(schedule, str):
        parts = schedule.split()
        if len(parts) != 5:
            raise invalid(
                "a cron expression has five fields: minute hour day month weekday", "schedule"
            )
        schedule = dict(zip(CRON_FIELDS, parts, strict=True))
    if not isinstance(schedule, Mapping):
        raise invalid("schedule must be an object {minute, hour, day, month, weekday}", "schedule")
    unknown = sorted(set(schedule) - set(CRON_FIELDS) - {"timezone"})
    if unknown:
        raise invalid(f"unknown schedule field: {str(unknown[0])[:40]}", f"schedule.{unknown[0]}")
    fields = {}
    for name in CRON_FIELDS:
        value = schedule.get(name, "*")
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_FIELD_LENGTH:
            raise invalid(
                f"schedule.{name} must be a cron field such as * or 5", f"schedule.{name}"
            )
        if len(value.split()) != 1:
            raise invalid(f"schedule.{name} must be one cron field", f"schedule.{name}")
        fields[name] = value.strip()
    expression = cron_expression(fields)
    from croniter import croniter

    for name in CRON_FIELDS:  # name the field at fault: check each with the others at *
        alone = " ".join(fields[n] if n == name else "*" for n in CRON_FIELDS)
        if not croniter.is_valid(alone):
            raise invalid(
                f"schedule.{name} is not a valid cron field: {fields[name]}", f"schedule.{name}"
            )
    if not croniter.is_valid(expression):
        raise invalid(f"not a valid cron expression: {expression}", "schedule")
    return fields


def cron_expression(fields: Mapping[str, str]) -> str:
    return " ".join(fields[name] for name in CRON_FIELDS)


def to_instant(wall: dt.datetime, tz: ZoneInfo) -> float:
    """The instant of a naive wall-clock time in ``tz`` (the two rules of the module doc)."""
    first = wall.replace(tzinfo=tz, fold=0)
    instant = first.timestamp()
    if dt.datetime.fromtimestamp(instant, tz).replace(tzinfo=None) == wall:
        return instant  # it exists (when it happens twice, fold=0 is the first occurrence)
    # A gap: find the jump, the first instant whose wall time is past ``wall``. Before the
    # jump the wall time is below the gap; from the jump on it is above.
    low = int(wall.replace(tzinfo=tz, fold=1).timestamp()) - 1
    high = int(instant) + 1
    while high - low > 1:
        middle = (low + high) // 2
        if dt.datetime.fromtimestamp(middle, tz).replace(tzinfo=None) > wall:
            high = middle
        else:
            low = middle
    return float(high)


def _wall(instant: float, tz: ZoneInfo) -> dt.datetime:
    """The wall time at the whole second at or before ``instant`` (never rounded up:
    ``fromtimestamp`` rounds to the microsecond, which could step into the next slot)."""
    return dt.datetime.fromtimestamp(math.floor(instant), tz).replace(tzinfo=None)


def _steady(instant: float, tz: ZoneInfo) -> bool:
    """True when the zone's offset is the same all around ``instant`` (no change near)."""
    margin = _DST_MARGIN.total_seconds()
    offsets = {
        dt.datetime.fromtimestamp(instant + delta, tz).utcoffset()
        for delta in (-margin, 0.0, margin)
    }
    return len(offsets) == 1


def next_slot(expression: str, tz: ZoneInfo, after: float) -> float | None:
    """The first slot strictly after ``after``; None when the expression never matches."""
    from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

    steady = _steady(after, tz)
    start = _wall(after, tz) - (dt.timedelta(0) if steady else _DST_MARGIN)
    try:
        walls = croniter(expression, start)
        for _ in range(100_000):
            instant = to_instant(walls.get_next(dt.datetime), tz)
            if instant > after:
                return instant
    except (CroniterBadDateError, CroniterBadCronError, CroniterError, OverflowError):
        return None
    return None


def latest_slot(expression: str, tz: ZoneInfo, at_or_before: float) -> float | None:
    """The last slot at or before ``at_or_before``; None when there is none."""
    from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

    steady = _steady(at_or_before, tz)
    wall = _wall(at_or_before, tz) + dt.timedelta(seconds=1)
    start = wall + (dt.timedelta(0) if steady else _DST_MARGIN)
    try:
        walls = croniter(expression, start)
        for _ in range(100_000):
            instant = to_instant(walls.get_prev(dt.datetime), tz)
            if instant <= at_or_before:
                return instant
    except (CroniterBadDateError, CroniterBadCronError, CroniterError, OverflowError, ValueError):
        return None
    return None


def parse_instant(text: object, tz: ZoneInfo, field: str) -> float:
    """An ISO 8601 date-time; without an offset it is a wall time in ``tz``."""
    if not isinstance(text, str) or not text.strip() or len(text) > 64:
        raise invalid(f"{field} must be an ISO 8601 date-time", field)
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise invalid(f"{field} is not an ISO 8601 date-time: {text.strip()[:64]}", field) from None
    if value.tzinfo is None:
        return to_instant(value, tz)
    return value.timestamp()


def plan_instants(items: object, tz: ZoneInfo) -> list[float]:
    """The planned times as sorted, distinct instants."""
    if not isinstance(items, list | tuple):
        raise invalid("plan must be a list of ISO 8601 date-times", "plan")
    if len(items) > MAX_PLAN_ITEMS:
        raise invalid(f"a plan holds at most {MAX_PLAN_ITEMS} times", "plan")
    return sorted({parse_instant(item, tz, f"plan[{i}]") for i, item in enumerate(items)})


def latest_planned(instants: Iterable[float], at_or_before: float) -> float | None:
    due = [t for t in instants if t <= at_or_before]
    return max(due) if due else None


def next_planned(instants: Iterable[float], after: float) -> float | None:
    later = [t for t in instants if t > after]
    return min(later) if later else None


def iso(instant: float | None, tz: ZoneInfo | None = None) -> str | None:
    """ISO 8601 text of an instant (UTC unless a zone is given), whole seconds when exact."""
    if instant is None:
        return None
    value = dt.datetime.fromtimestamp(instant, tz or UTC)
    spec = "seconds" if float(instant).is_integer() else "milliseconds"
    return value.isoformat(timespec=spec)
