"""Parsing the model's reply into a tool request, and the stream cut-off point."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from python.helpers.tool_request import first_object_end, parse_tool_request, partial_object

pytestmark = pytest.mark.unit


def test_parses_name_method_and_args():
    text = json.dumps(
        {
            "thoughts": ["a"],
            "headline": "h",
            "tool_name": "text_editor:read",
            "tool_args": {"path": "x"},
        }
    )
    r = parse_tool_request(text)
    assert r is not None
    assert (r.name, r.method, r.args, r.headline) == ("text_editor", "read", {"path": "x"}, "h")


def test_fallback_keys_and_dirty_json():
    r = parse_tool_request("Sure! {tool: 'response', args: {text: 'hi',},} trailing")
    assert r is not None and r.name == "response" and r.args == {"text": "hi"}


@pytest.mark.parametrize(
    "text",
    ["no json here", "{}", '{"tool_name": 5}', '{"tool_name": "  "}', "[1, 2]", ""],
)
def test_unusable_replies_give_none(text):
    assert parse_tool_request(text) is None


def test_missing_args_become_empty_dict():
    r = parse_tool_request('{"tool_name": "response", "tool_args": "oops"}')
    assert r is not None and r.args == {}


def test_first_object_end_stops_after_the_root_object():
    obj = '{"a": "}{ not a brace", "b": {"c": 1}}'
    text = obj + ' and then {"second": 2}'
    assert first_object_end(text) == len(obj)
    assert first_object_end('{"a": "unfinished') is None
    assert first_object_end("prefix " + obj) == len("prefix " + obj)


def test_partial_object_while_streaming():
    assert partial_object('{"thoughts": ["one", "tw') == {"thoughts": ["one", "tw"]}
    assert partial_object("nothing") is None


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=4), st.text(max_size=30))
def test_first_object_end_finds_any_serialised_object(obj, tail):
    text = json.dumps(obj)
    end = first_object_end(text + tail)
    assert end == len(text)
