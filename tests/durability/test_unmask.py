"""Masker.unmask: tools get real values back from `§§secret(NAME)` placeholders."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durability.masking import Masker

pytestmark = pytest.mark.unit

SECRETS = {"API_KEY_OPENAI": "sk-live-abcdef123456", "AUTH_PASSWORD": "hunter2-long"}


def test_unmask_restores_known_names_and_keeps_unknown_ones():
    masker = Masker(SECRETS)
    text = "curl -H 'Bearer §§secret(API_KEY_OPENAI)' §§secret(NOT_A_SECRET)"
    assert masker.unmask(text) == "curl -H 'Bearer sk-live-abcdef123456' §§secret(NOT_A_SECRET)"
    assert masker.unmask({"a": ["§§secret(AUTH_PASSWORD)", 3]}) == {"a": ["hunter2-long", 3]}


@given(st.lists(st.sampled_from(["x", " ", "sk-live-abcdef123456", "hunter2-long", "§", "("])))
def test_unmask_inverts_mask(parts):
    masker = Masker(SECRETS)
    text = "".join(parts)
    if "§§secret(" in text:  # a literal placeholder in the input is not a round trip
        return
    assert masker.unmask(masker.mask(text)) == text
