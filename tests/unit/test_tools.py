"""Tool logic that needs no model: text_editor edits, wait durations, lookups."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from python.tools.text_editor import EditError, apply_edits, read_lines
from python.tools.wait import wait_seconds

pytestmark = pytest.mark.unit

TEXT = "one\ntwo\nthree\nfour\n"


def test_patch_replaces_deletes_and_inserts():
    edits = [
        {"line_from": 1, "line_to": 1, "content": "ONE"},
        {"line_from": 3, "line_to": 3, "content": ""},
        {"line_from": 4, "line_to": 3, "content": "three-and-a-half"},
    ]
    assert apply_edits(TEXT, edits) == "ONE\ntwo\nthree-and-a-half\nfour\n"


@pytest.mark.parametrize(
    "edits",
    [
        [{"line_from": 0, "line_to": 1, "content": "x"}],
        [{"line_from": 2, "line_to": 9, "content": "x"}],
        [{"line_from": 1, "line_to": 2, "content": "a"}, {"line_from": 2, "line_to": 3}],
        [{"line_from": "two"}],
        ["not an object"],
    ],
)
def test_bad_patches_are_refused_with_a_reason(edits):
    with pytest.raises(EditError):
        apply_edits(TEXT, edits)


def test_read_lines_numbers_lines(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text(TEXT)
    out = read_lines(path, 2, 3)
    assert "    2| two" in out and "    3| three" in out and "one" not in out
    assert "[lines 2-3 of 4]" in out


def test_wait_seconds_from_units_and_until():
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert wait_seconds({"seconds": 5, "minutes": 1}, now) == 65
    assert wait_seconds({"until": "2026-01-01T12:00:30Z"}, now) == 30
    assert wait_seconds({"until": "2025-01-01T00:00:00"}, now) == 0
    with pytest.raises(ValueError):
        wait_seconds({"until": "tomorrow"}, now)
    with pytest.raises(ValueError):
        wait_seconds({"seconds": "a while"}, now)
