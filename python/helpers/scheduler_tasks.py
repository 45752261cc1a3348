"""What a scheduled task is: its definition (validated), its slots and how it is shown.

Three kinds, as upstream: ``scheduled`` (cron fields), ``planned`` (a list of date-times)
and ``adhoc`` (runs only when asked). The definition the journal stores is normalised:

    {"name", "kind", "prompt", "system_prompt", "attachments": [...],
     "schedule": {minute, hour, day, month, weekday} | None, "plan": [ISO UTC, ...] | None,
     "timezone", "context_id", "dedicated_context", "enabled"}

Input accepts upstream's shapes too: ``type`` for ``kind``, ``schedule`` as an object (with
an optional ``timezone``) or a five-field string, ``plan`` as a list or ``{"todo": [...]}``,
``state: "disabled"`` for ``enabled: false``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from durability.errors import TaskInvalid
from durability.status import RunStatus
from python.helpers import scheduler_time as stime
from python.helpers.inputs import get_int, get_list

KINDS = ("scheduled", "planned", "adhoc")
MAX_NAME = 200
MAX_TEXT = 32 * 1024
MAX_ATTACHMENTS = 20
MAX_ATTACHMENT_PATH = 4096
MAX_CONTEXT_ID = 200
DEFAULT_TIMEZONE = "UTC"
#: Fields a definition may hold (anything else in an input is refused as unknown).
FIELDS = (
    "name",
    "kind",
    "prompt",
    "system_prompt",
    "attachments",
    "schedule",
    "plan",
    "timezone",
    "context_id",
    "dedicated_context",
    "enabled",
)
#: Extra input spellings (upstream's, and the UI's convenience fields).
ALIASES = ("type", "state", "uuid", "task_id", "id", "expected_revision", "revision", "token")
#: Changing one of these moves the handled-slots mark to now: slots of the old schedule,
#: or slots that passed while the task was disabled, never fire late.
SCHEDULE_FIELDS = ("kind", "schedule", "plan", "timezone", "enabled")


def _text(data: Mapping[str, Any], key: str, *, required: bool, limit: int) -> str:
    value = data.get(key)
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise TaskInvalid(f"{key} must be text", field=key)
    if required and not value.strip():
        raise TaskInvalid(f"{key} is required", field=key)
    if len(value) > limit:
        raise TaskInvalid(f"{key} is longer than {limit} characters", field=key)
    return value


def _bool(data: Mapping[str, Any], key: str, default: bool) -> bool:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise TaskInvalid(f"{key} must be true or false", field=key)


def _attachments(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_ATTACHMENTS:
        raise TaskInvalid(
            f"attachments must be a list of at most {MAX_ATTACHMENTS} paths", field="attachments"
        )
    for item in value:
        if not isinstance(item, str) or not item.strip() or len(item) > MAX_ATTACHMENT_PATH:
            raise TaskInvalid("each attachment must be a path", field="attachments")
    return [item.strip() for item in value]


def _plan_items(value: Any) -> Any:
    if isinstance(value, Mapping):  # upstream's {"todo": [...], "in_progress": ..., "done": ...}
        return value.get("todo", [])
    return value


def _kind(data: Mapping[str, Any]) -> str:
    kind = data.get("kind", data.get("type"))
    if kind is None:
        if data.get("schedule") not in (None, "", {}):
            return "scheduled"
        if data.get("plan") not in (None, "", [], {}):
            return "planned"
        return "adhoc"
    if not isinstance(kind, str) or kind.strip().lower() not in KINDS:
        raise TaskInvalid(f"kind must be one of {', '.join(KINDS)}", field="kind")
    return kind.strip().lower()


def _enabled(data: Mapping[str, Any], default: bool) -> bool:
    state = data.get("state")
    if "enabled" not in data and isinstance(state, str):
        if state.strip().lower() == TaskState.DISABLED:
            return False
        if state.strip().lower() in (TaskState.IDLE, "enabled"):
            return True
    return _bool(data, "enabled", default)


def normalise(
    data: Mapping[str, Any],
    *,
    default_timezone: str = DEFAULT_TIMEZONE,
    default_context: str | None = None,
    task_id: str,
) -> dict[str, Any]:
    """A complete, valid definition from an input (TaskInvalid naming the field at fault).

    ``default_context`` is the chat a task without ``dedicated_context`` runs in (the
    creating agent's chat); without one, or with ``dedicated_context: true``, the task gets
    a chat of its own whose id is the task id."""
    if not isinstance(data, Mapping):
        raise TaskInvalid("a task is an object", field="task")
    unknown = sorted(str(k) for k in set(data) - set(FIELDS) - set(ALIASES))
    if unknown:
        raise TaskInvalid(f"unknown task field: {unknown[0][:40]}", field=unknown[0][:40])
    kind = _kind(data)
    schedule_in = data.get("schedule")
    timezone = data.get("timezone")
    if timezone in (None, "") and isinstance(schedule_in, Mapping):
        timezone = schedule_in.get("timezone")
    tz_name = timezone if timezone not in (None, "") else default_timezone
    tz = stime.zone(tz_name)
    schedule = None
    plan = None
    if kind == "scheduled":
        if schedule_in in (None, "", {}):
            raise TaskInvalid("a scheduled task needs schedule (cron fields)", field="schedule")
        schedule = stime.cron_fields(schedule_in)
    elif kind == "planned":
        instants = stime.plan_instants(_plan_items(data.get("plan")), tz)
        if not instants:
            raise TaskInvalid("a planned task needs plan: one or more date-times", field="plan")
        plan = [stime.iso(t) for t in instants]
    dedicated = _bool(data, "dedicated_context", default_context is None)
    context_id = data.get("context_id")
    if context_id in (None, ""):
        context_id = task_id if dedicated or default_context is None else default_context
    if not isinstance(context_id, str) or len(context_id) > MAX_CONTEXT_ID:
        raise TaskInvalid("context_id must be a chat id", field="context_id")
    return {
        "name": _text(data, "name", required=True, limit=MAX_NAME).strip(),
        "kind": kind,
        "prompt": _text(data, "prompt", required=True, limit=MAX_TEXT),
        "system_prompt": _text(data, "system_prompt", required=False, limit=MAX_TEXT),
        "attachments": _attachments(data.get("attachments")),
        "schedule": schedule,
        "plan": plan,
        "timezone": tz.key,
        "context_id": context_id,
        "dedicated_context": context_id == task_id,
        "enabled": _enabled(data, True),
    }


def merge(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """An update's input: the stored definition with the given fields replaced."""
    merged = dict(current)
    for key, value in changes.items():
        if key in ("uuid", "task_id", "id", "expected_revision", "revision", "token"):
            continue
        if key == "type":
            merged["kind"] = value
        elif key == "state":
            merged["enabled"] = _enabled({"state": value}, bool(current.get("enabled", True)))
        else:
            merged[key] = value
    if "kind" in changes or "type" in changes:  # a new kind drops the other kind's fields
        kind = merged.get("kind")
        if kind != "scheduled" and "schedule" not in changes:
            merged["schedule"] = None
        if kind != "planned" and "plan" not in changes:
            merged["plan"] = None
    if "timezone" not in changes and isinstance(changes.get("schedule"), Mapping):
        timezone = changes["schedule"].get("timezone")
        if timezone:
            merged["timezone"] = timezone
    return merged


def schedule_changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    return any(before.get(key) != after.get(key) for key in SCHEDULE_FIELDS)


@dataclass(frozen=True)
class Slots:
    """A task's slots: ``latest(now)`` is due when it is past ``done_until``."""

    kind: str
    tz: ZoneInfo
    expression: str | None
    plan: tuple[float, ...]

    @classmethod
    def of(cls, definition: Mapping[str, Any]) -> Slots:
        tz = stime.zone(definition.get("timezone") or DEFAULT_TIMEZONE)
        kind = str(definition.get("kind"))
        expression = None
        plan: tuple[float, ...] = ()
        if kind == "scheduled":
            expression = stime.cron_expression(stime.cron_fields(definition.get("schedule")))
        elif kind == "planned":
            plan = tuple(stime.plan_instants(definition.get("plan") or [], tz))
        return cls(kind, tz, expression, plan)

    def latest(self, at_or_before: float) -> float | None:
        if self.expression is not None:
            return stime.latest_slot(self.expression, self.tz, at_or_before)
        return stime.latest_planned(self.plan, at_or_before)

    def next(self, after: float) -> float | None:
        if self.expression is not None:
            return stime.next_slot(self.expression, self.tz, after)
        return stime.next_planned(self.plan, after)

    def due(self, now: float, done_until: float) -> float | None:
        """The one slot to fire now: the latest slot at or before ``now`` that is past
        ``done_until`` (earlier missed slots are passed over: a slot fires once, and only
        the latest of those missed)."""
        latest = self.latest(now)
        return latest if latest is not None and latest > done_until else None


class TaskState(StrEnum):
    """A task's ``state`` as the API and the tool show it (docs/scheduler.md, "The state
    machine")."""

    DISABLED = "disabled"
    RUNNING = "running"  # its latest firing's run is active
    HELD = "held"  # its latest firing's run waits for a person's decision
    IDLE = "idle"


#: The task's state, from its latest firing's run (never a stored flag that could stick).
RUN_STATE: dict[str, TaskState] = {
    RunStatus.ACTIVE: TaskState.RUNNING,
    RunStatus.NEEDS_ATTENTION: TaskState.HELD,
}


def state_of(enabled: bool, run_status: str | None) -> TaskState:
    """The task's state: its run's, else idle or disabled."""
    if run_status in RUN_STATE:
        return RUN_STATE[run_status]
    return TaskState.IDLE if enabled else TaskState.DISABLED


def view(task: Any, run_status: str | None, now: float) -> dict[str, Any]:
    """A task as the API and the tool show it (upstream's field names plus this fork's)."""
    definition = task.definition if isinstance(task.definition, Mapping) else {}
    base: dict[str, Any] = {
        "uuid": task.id,
        "id": task.id,
        "revision": task.revision,
        "damage": task.damage,
        "created_at": stime.iso(task.created_at),
        "created_by": task.created_by,
        "updated_at": stime.iso(task.updated_at),
        "updated_by": task.updated_by,
        "last_run": stime.iso(task.last_fired_at),
        "last_slot": stime.iso(task.last_slot),
        "last_run_id": task.last_run_id,
        "last_input_id": task.last_input_id,
        "last_status": run_status,
        "last_skip": _skip_view(task.last_skip),
        "done_until": stime.iso(task.done_until),
    }
    if task.damage is not None:
        return {**base, "name": f"(damaged task {task.id})", "state": "damaged", "type": None}
    enabled = bool(definition.get("enabled", True))
    next_run = None
    due = False
    if enabled and definition.get("kind") != "adhoc":
        try:
            slots = Slots.of(definition)
            due = slots.due(now, task.done_until) is not None
            next_run = slots.next(max(now, task.done_until))
        except TaskInvalid:
            pass  # shown without a next run; the scheduler never fires it
    schedule = definition.get("schedule")
    plan = definition.get("plan")
    return {
        **base,
        "name": definition.get("name"),
        "type": definition.get("kind"),
        "kind": definition.get("kind"),
        "state": state_of(enabled, run_status),
        "enabled": enabled,
        "prompt": definition.get("prompt"),
        "system_prompt": definition.get("system_prompt"),
        "attachments": definition.get("attachments") or [],
        "timezone": definition.get("timezone"),
        "schedule": {**schedule, "timezone": definition.get("timezone")} if schedule else None,
        "plan": _plan_view(plan, task.done_until) if plan is not None else None,
        "context_id": definition.get("context_id"),
        "dedicated_context": bool(definition.get("dedicated_context")),
        "next_run": stime.iso(next_run),
        "due": due,
    }


def _skip_view(skip: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not skip:
        return None
    slot, at = skip.get("slot"), skip.get("at")
    return {
        "slot": stime.iso(slot) if isinstance(slot, int | float) else None,
        "at": stime.iso(at) if isinstance(at, int | float) else None,
        "reason": skip.get("reason"),
        "detail": skip.get("detail"),
    }


def _plan_view(plan: list[str], done_until: float) -> dict[str, Any]:
    """Upstream's plan shape: times still to come (``todo``) and those handled (``done``)."""
    todo: list[str] = []
    done: list[str] = []
    for text in plan:
        instant = stime.parse_instant(text, stime.zone("UTC"), "plan")
        (done if instant <= done_until else todo).append(text)
    return {"todo": todo, "in_progress": None, "done": done, "times": list(plan)}


def find_by_name(views: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Tasks whose name is ``name`` (case-insensitive), else whose name contains it."""
    wanted = name.strip().lower()
    exact = [v for v in views if str(v.get("name") or "").lower() == wanted]
    return exact or [v for v in views if wanted and wanted in str(v.get("name") or "").lower()]


@dataclass(frozen=True)
class Filters:
    """Upstream's list filters: ``state[]``, ``type[]``, ``next_run_within`` and
    ``next_run_after`` (minutes from now). ``error`` matches tasks whose last run failed."""

    states: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    within: int | None = None
    after: int | None = None

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Filters:
        """The filters of a request or tool call (bad_request for a wrong type)."""

        def minutes(key: str) -> int | None:
            return None if data.get(key) in (None, "") else get_int(data, key, minimum=0)

        states = tuple(s for s in get_list(data, "state") if isinstance(s, str))
        kinds = tuple(k for k in get_list(data, "type") if isinstance(k, str))
        return cls(states, kinds, minutes("next_run_within"), minutes("next_run_after"))


def matches(view: Mapping[str, Any], filters: Filters, now: float) -> bool:
    if filters.states:
        failed = view.get("last_status") == RunStatus.FAILED
        if view.get("state") not in filters.states and not ("error" in filters.states and failed):
            return False
    if filters.kinds and view.get("type") not in filters.kinds:
        return False
    if filters.within is None and filters.after is None:
        return True
    next_run = view.get("next_run")
    if not next_run:
        return False
    instant = stime.parse_instant(next_run, stime.zone("UTC"), "next_run")
    if filters.within is not None and instant > now + 60 * filters.within:
        return False
    return filters.after is None or instant >= now + 60 * filters.after
