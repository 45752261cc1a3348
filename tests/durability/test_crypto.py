"""Fernet encryption of shared bytes and keyed content addresses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durability import ConfigurationError, ResourceUndecryptable
from durability.crypto import ResourceCipher, generate_key

pytestmark = pytest.mark.unit

KEY = generate_key()


@given(st.binary(max_size=4096))
def test_round_trip_and_no_plaintext_in_the_token(data):
    cipher = ResourceCipher(KEY)
    token = cipher.encrypt(data)
    assert cipher.decrypt(token) == data
    if len(data) >= 8:
        assert data not in token


def test_tokens_differ_but_addresses_are_stable_and_keyed():
    a, b = ResourceCipher(KEY), ResourceCipher(generate_key())
    assert a.encrypt(b"same") != a.encrypt(b"same")  # a fresh IV per token
    assert a.address(b"same") == ResourceCipher(KEY).address(b"same")
    assert a.address(b"same") != b.address(b"same")  # says nothing without the key
    assert len(a.address(b"")) == 64


def test_a_wrong_key_or_damaged_token_is_a_typed_error():
    token = ResourceCipher(KEY).encrypt(b"secret")
    for cipher, data in [(ResourceCipher(generate_key()), token), (ResourceCipher(KEY), b"junk")]:
        with pytest.raises(ResourceUndecryptable) as info:
            cipher.decrypt(data)
        assert info.value.code == "resource_undecryptable"


def test_rotation_decrypts_and_matches_under_every_key():
    new = generate_key()
    old_cipher = ResourceCipher(KEY)
    token, address = old_cipher.encrypt(b"x"), old_cipher.address(b"x")
    rotated = ResourceCipher(f"{new}, {KEY}")
    assert rotated.decrypt(token) == b"x"
    assert rotated.matches(b"x", address) and rotated.address(b"x") != address
    with pytest.raises(ResourceUndecryptable):  # new tokens use the new key
        ResourceCipher(KEY).decrypt(rotated.encrypt(b"y"))


@pytest.mark.parametrize(
    "keys",
    ["", " , ", "short", "a" * 44, f"{KEY},nope"],
    ids=["empty", "only-commas", "short", "wrong-length", "second-key-bad"],
)
def test_bad_keys_are_refused_without_showing_them(keys):
    with pytest.raises(ConfigurationError) as info:
        ResourceCipher(keys)
    assert info.value.setting == "A0_DURABILITY_RESOURCE_KEY"
    assert KEY not in str(info.value.to_dict())
    assert KEY not in repr(ResourceCipher(KEY))
