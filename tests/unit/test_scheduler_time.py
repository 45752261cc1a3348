"""Cron slots on a timezone's wall clock: DST gaps and repeats, steps, plans, bad fields."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from durability.errors import TaskInvalid
from python.helpers import scheduler_time as st_time

pytestmark = pytest.mark.unit

BERLIN = st_time.zone("Europe/Berlin")
NEW_YORK = st_time.zone("America/New_York")
UTC = dt.UTC


def at(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def utc(instant: float | None) -> str | None:
    return st_time.iso(instant)


def slots(expression, tz, start, count):
    found, t = [], at(start)
    for _ in range(count):
        t = st_time.next_slot(expression, tz, t)
        found.append(utc(t))
    return found


def test_every_minute_and_exact_boundaries():
    t = at("2030-01-01T12:00:00+00:00")
    assert utc(st_time.latest_slot("* * * * *", st_time.zone("UTC"), t)) == utc(t)
    assert utc(st_time.next_slot("* * * * *", st_time.zone("UTC"), t)) == (
        "2030-01-01T12:01:00+00:00"
    )
    assert utc(st_time.latest_slot("* * * * *", st_time.zone("UTC"), t - 0.001)) == (
        "2030-01-01T11:59:00+00:00"
    )


def test_a_wall_time_that_happens_twice_fires_once_at_its_first_occurrence():
    # Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    daily = slots("30 2 * * *", BERLIN, "2026-10-23T12:00:00+00:00", 3)
    assert daily == [
        "2026-10-24T00:30:00+00:00",
        "2026-10-25T00:30:00+00:00",  # 02:30 CEST, the first 02:30
        "2026-10-26T01:30:00+00:00",  # the next day, 02:30 CET
    ]
    halves = slots("*/30 * * * *", BERLIN, "2026-10-24T23:10:00+00:00", 5)
    assert halves == [
        "2026-10-24T23:30:00+00:00",  # 01:30 CEST
        "2026-10-25T00:00:00+00:00",  # 02:00 CEST
        "2026-10-25T00:30:00+00:00",  # 02:30 CEST
        "2026-10-25T02:00:00+00:00",  # 03:00 CET: the repeated hour fires nothing again
        "2026-10-25T02:30:00+00:00",
    ]


def test_a_wall_time_that_does_not_exist_fires_at_the_jump_once():
    # Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC); 02:xx does not exist.
    daily = slots("30 2 * * *", BERLIN, "2026-03-27T12:00:00+00:00", 3)
    assert daily == [
        "2026-03-28T01:30:00+00:00",
        "2026-03-29T01:00:00+00:00",  # at the jump (03:00 CEST)
        "2026-03-30T00:30:00+00:00",
    ]
    quarter = slots("*/15 * * * *", BERLIN, "2026-03-29T00:40:00+00:00", 4)
    assert quarter == [
        "2026-03-29T00:45:00+00:00",  # 01:45 CET
        "2026-03-29T01:00:00+00:00",  # 02:00, 02:15, 02:30, 02:45 and 03:00 CEST: one slot
        "2026-03-29T01:15:00+00:00",  # 03:15 CEST
        "2026-03-29T01:30:00+00:00",
    ]


def test_latest_slot_around_the_changes():
    assert utc(st_time.latest_slot("30 2 * * *", BERLIN, at("2026-10-25T01:45:00+00:00"))) == (
        "2026-10-25T00:30:00+00:00"
    )  # the second 02:45 CET: the day's slot was the first 02:30
    assert utc(st_time.latest_slot("30 2 * * *", BERLIN, at("2026-03-29T01:00:00+00:00"))) == (
        "2026-03-29T01:00:00+00:00"
    )
    assert utc(st_time.latest_slot("0 9 * * 1-5", NEW_YORK, at("2030-01-05T12:00:00+00:00"))) == (
        "2030-01-04T14:00:00+00:00"
    )  # Saturday: Friday 09:00 EST


EXPRESSIONS = ["* * * * *", "*/7 * * * *", "30 2 * * *", "0 */3 * * 1-5", "15 1,2,3 1 * *"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]


@settings(max_examples=150, deadline=None)
@given(
    expression=st.sampled_from(EXPRESSIONS),
    zone=st.sampled_from(ZONES),
    t=st.floats(
        min_value=at("2026-01-01T00:00:00+00:00"), max_value=at("2027-12-31T00:00:00+00:00")
    ),
)
@example(expression="* * * * *", zone="UTC", t=1830211199.9999998)  # rounds up to a slot
def test_the_latest_and_the_next_slot_bracket_every_instant(expression, zone, t):
    tz = st_time.zone(zone)
    latest = st_time.latest_slot(expression, tz, t)
    following = st_time.next_slot(expression, tz, t)
    assert latest is not None and following is not None
    assert latest <= t < following
    assert st_time.next_slot(expression, tz, latest) == following  # nothing in between
    assert st_time.latest_slot(expression, tz, following) == following


def test_cron_fields_from_an_object_or_a_string():
    assert st_time.cron_fields({"minute": "*/5", "hour": 7}) == {
        "minute": "*/5",
        "hour": "7",
        "day": "*",
        "month": "*",
        "weekday": "*",
    }
    assert st_time.cron_fields("0 7 * * mon-fri")["weekday"] == "mon-fri"


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"minute": "61"}, "schedule.minute"),
        ({"hour": "25"}, "schedule.hour"),
        ({"weekday": "funday"}, "schedule.weekday"),
        ({"minute": "1 2"}, "schedule.minute"),
        ({"minute": ""}, "schedule.minute"),
        ({"second": "1"}, "schedule.second"),
        ("* * * *", "schedule"),
        ("* * * * * *", "schedule"),
        (["* * * * *"], "schedule"),
    ],
)
def test_bad_cron_fields_name_the_field(schedule, field):
    with pytest.raises(TaskInvalid) as info:
        st_time.cron_fields(schedule)
    assert info.value.field == field
    assert info.value.code == "task_invalid"


def test_unknown_timezones_are_refused():
    for name in ("Mars/Olympus", "", "../../etc/passwd", 5):
        with pytest.raises(TaskInvalid) as info:
            st_time.zone(name)
        assert info.value.field == "timezone"


def test_planned_times_with_and_without_an_offset():
    instants = st_time.plan_instants(
        ["2030-06-01T09:00:00", "2030-06-01T07:00:00Z", "2030-06-01T09:00:00+02:00"], BERLIN
    )
    assert [utc(t) for t in instants] == ["2030-06-01T07:00:00+00:00"]  # all the same instant
    assert st_time.latest_planned(instants, instants[0]) == instants[0]
    assert st_time.next_planned(instants, instants[0]) is None
    with pytest.raises(TaskInvalid) as info:
        st_time.plan_instants(["2030-06-01T09:00:00", "tomorrow"], BERLIN)
    assert info.value.field == "plan[1]"


def test_an_expression_that_never_matches_has_no_slot():
    assert (
        st_time.next_slot("0 0 30 2 *", st_time.zone("UTC"), at("2030-01-01T00:00:00+00:00"))
        is None
    )


@pytest.mark.parametrize("change", ["2026-03-29T01:00:00+00:00", "2026-10-25T01:00:00+00:00"])
@pytest.mark.parametrize("expression", ["*/7 * * * *", "30 2 * * *", "0,30 1-3 * * *"])
def test_the_bracket_holds_minute_by_minute_across_a_change(change, expression):
    start = at(change) - 4 * 3600
    for minute in range(0, 8 * 60, 3):
        t = start + minute * 60 + 17
        latest = st_time.latest_slot(expression, BERLIN, t)
        following = st_time.next_slot(expression, BERLIN, t)
        assert latest is not None and following is not None
        assert latest <= t < following, (utc(t), utc(latest), utc(following))
        assert st_time.next_slot(expression, BERLIN, latest) == following
