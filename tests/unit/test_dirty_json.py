"""The tolerant JSON reader: property tests and the dirt models actually write."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from python.helpers.dirty_json import json_parse_dirty, parse_with_status

pytestmark = pytest.mark.unit

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=25,
)


@given(st.text())
@settings(max_examples=300, database=None)
def test_never_raises_on_arbitrary_text(text):
    _value, completed = parse_with_status(text)
    assert isinstance(completed, bool)
    json_parse_dirty(text)


@given(st.text(alphabet="{}[]\"'`:,/*\\ntrue-0.5e ", max_size=60))
@settings(max_examples=300, database=None)
def test_never_raises_on_json_shaped_noise(text):
    parse_with_status(text)
    json_parse_dirty(text)


@given(json_values, st.booleans(), st.sampled_from([None, 2]))
@settings(database=None)
def test_round_trips_valid_json(value, ascii_only, indent):
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert parse_with_status(text) == (value, True)


@given(st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=4))
@settings(max_examples=50, deadline=None, database=None)
def test_truncated_object_is_a_partial_prefix(value):
    text = json.dumps(value)
    for cut in range(1, len(text), max(1, len(text) // 60)):
        partial, completed = parse_with_status(text[:cut])
        assert completed is False or cut == len(text)
        assert partial is None or isinstance(partial, dict)


def test_deep_nesting_does_not_crash():
    assert parse_with_status("[" * 5000)[1] is False
    assert parse_with_status("{" * 5000 + "}" * 5000)[1] is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{'a': 'b'}", {"a": "b"}),
        ("{a: 1, b_c: true}", {"a": 1, "b_c": True}),
        ('{"a": [1, 2, ], }', {"a": [1, 2]}),
        ('{"a": 1 // one\n, /* two */ "b": 2}', {"a": 1, "b": 2}),
        ('Sure, here it is: {"a": 1} hope that helps', {"a": 1}),
        ('{"code": """line "1"\nline 2"""}', {"code": 'line "1"\nline 2'}),
        ("{\"code\": '''it's'''}", {"code": "it's"}),
        ('{"code": `echo "hi"`}', {"code": 'echo "hi"'}),
        ('{{"a": 1}}', {"a": 1}),
        ('{"a": undefined, "b": None, "c": True}', {"a": None, "b": None, "c": True}),
        ('{"a": "bad \\uZZ escape"}', {"a": "bad \\uZZ escape"}),
        ('{"a": "\\u00e9\\n\\t\\/"}', {"a": "é\n\t/"}),
        ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),
        ("{a: hello world, b: 2}", {"a": "hello world", "b": 2}),
        ("[1, 'two', {three: 3}]", [1, "two", {"three": 3}]),
        ('```json\n{"a": 1}\n```', {"a": 1}),
    ],
)
def test_accepts_dirty_json(text, expected):
    assert parse_with_status(text) == (expected, True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"thoughts": ["a", "b"], "tool_na', {"thoughts": ["a", "b"]}),
        ('{"tool_name": "resp', {"tool_name": "resp"}),
        ('{"tool_args": {"text": "hel', {"tool_args": {"text": "hel"}}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": tr', {"a": True}),
        ('{"a":', {}),
        ("{", {}),
        ('{"a": "x" /* unterminated', {"a": "x"}),
    ],
)
def test_truncated_input_returns_partial(text, expected):
    assert parse_with_status(text) == (expected, False)


@pytest.mark.parametrize("text", ["", "   ", "no json here", "// just a comment"])
def test_nothing_parses_gives_none(text):
    assert parse_with_status(text) == (None, False)


def test_json_parse_dirty_slices_first_brace_to_last():
    reply = 'Thinking... {"tool_name": "response", "tool_args": {"text": "}"}} trailing }'
    assert json_parse_dirty(reply) == {"tool_name": "response", "tool_args": {"text": "}"}}
    assert json_parse_dirty('{"tool_name": "resp') == {"tool_name": "resp"}
    assert json_parse_dirty("[1, 2]") is None
    assert json_parse_dirty("nothing") is None
    assert json_parse_dirty(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text", ['None of this is JSON: {"a": 1}', '2 options: {"a": 1}', 'True, here: {"a": 1}']
)
def test_prose_that_starts_like_a_value(text):
    assert parse_with_status(text) == ({"a": 1}, True)


def test_parse_stops_after_root_value():
    assert parse_with_status('{"a": 1}\n{"b": 2}') == ({"a": 1}, True)
