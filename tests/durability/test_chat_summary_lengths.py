"""A chat's summary reads its log length from the newest checkpoint body, in either format."""

from __future__ import annotations

import pytest

from durability.journal._chats import _length


@pytest.mark.parametrize(
    ("body", "entry", "expected"),
    [
        ({"v": 1}, {"head": "h", "length": 7}, 7),
        ({"v": 2}, {"base": "h", "keep": 5, "add": ["a", "b"]}, 7),
        ({"v": 2}, {"base": None, "keep": 0, "add": ["a"]}, 1),
        ({"v": 2}, {"of": "log", "keep": 4}, 4),
    ],
)
def test_a_history_entry_s_length_in_either_format(body, entry, expected):
    assert _length(body, entry) == expected


def test_a_malformed_entry_is_refused_not_counted_as_empty():
    with pytest.raises(KeyError):
        _length({"v": 2}, {"base": "h", "add": []})
