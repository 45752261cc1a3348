"""Canonical JSON and digests: stable bytes for equal values."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durability import NotSerializable, canonical_json, digest
from durability.canonical import is_digest

pytestmark = pytest.mark.unit

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_json_round_trips_and_is_stable(value):
    text = canonical_json(value)
    assert json.loads(text) == value
    assert canonical_json(json.loads(text)) == text
    assert digest(value) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_key_order_and_spacing_do_not_matter():
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert canonical_json({"é": "ü"}) == '{"é":"ü"}'
    assert digest({"b": 1, "a": 2}) == digest({"a": 2, "b": 1})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1j}, object(), b"bytes"])
def test_non_json_values_are_refused(value):
    with pytest.raises(NotSerializable) as info:
        canonical_json(value)
    assert info.value.code == "not_serializable"


def test_is_digest():
    assert is_digest("a" * 64)
    assert not is_digest("A" * 64)
    assert not is_digest("a" * 63)
    assert not is_digest(None)
