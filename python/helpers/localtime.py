"""The user's local time for prompts (``agent.system.datetime.md``).

The time zone is ``DEFAULT_USER_TIMEZONE`` (an IANA name such as ``Europe/Berlin``) from the
process environment or usr/.env, as upstream keeps it; without it (or with a name zoneinfo
does not know) the server's own local time is used. The text is ``YYYY-MM-DD HH:MM:SS``
without an offset, as upstream writes it.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

TIMEZONE_VARIABLE = "DEFAULT_USER_TIMEZONE"
FORMAT = "%Y-%m-%d %H:%M:%S"


def user_timezone() -> ZoneInfo | None:
    from python.helpers import settings

    name = settings.env_value(TIMEZONE_VARIABLE).strip()
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def now_text(now: datetime | None = None) -> str:
    """The current local time as prompts show it."""
    zone = user_timezone()
    moment = now or datetime.now().astimezone()
    if zone is not None:
        moment = moment.astimezone(zone)
    return moment.strftime(FORMAT)
