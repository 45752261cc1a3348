"""A chat's summary reads its log length from the newest checkpoint body, in either format
(durability/store/checkpoint_entries.py)."""

from __future__ import annotations

import pytest

from durability.store.checkpoint_entries import entry_length


@pytest.mark.parametrize(
    ("body", "entry", "expected"),
    [
        ({"v": 1}, {"head": "h", "length": 7}, 7),
        ({"v": 2}, {"base": "h", "keep": 5, "add": ["a", "b"]}, 7),
        ({"v": 2}, {"base": None, "keep": 0, "add": ["a"]}, 1),
        (
            {"v": 2, "histories": {"log": {"base": None, "keep": 0, "add": []}}},
            {"of": "log", "keep": 4},
            4,
        ),
    ],
)
def test_a_history_entry_s_length_in_either_format(body, entry, expected):
    assert entry_length(body, entry) == expected


def test_a_malformed_entry_is_refused_not_counted_as_empty():
    with pytest.raises(KeyError):
        entry_length({"v": 2}, {"base": "h", "add": []})
