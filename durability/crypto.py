"""Fernet encryption of the bytes shared workers store in the journal (resources).

``ResourceCipher(keys)`` takes one Fernet key, or several separated by commas: the first
encrypts, every one decrypts (rotate by putting a new key first and keeping the old one
until nothing encrypted under it is needed). ``address(data)`` is the content address of
plain bytes: HMAC-SHA256 under a key derived from the first Fernet key, so equal files
are stored once and the address tells nothing to a reader without the key.

The ``cryptography`` package comes with requirements-postgres.txt; it is imported only
when a cipher is built.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Any

from durability.errors import ConfigurationError, ResourceUndecryptable

KEY_SETTING = "A0_DURABILITY_RESOURCE_KEY"
_ADDRESS_CONTEXT = b"agent-zero resource address v1"


def _fernet() -> Any:
    try:
        from cryptography import fernet
    except ImportError:
        raise ConfigurationError(
            "shared resources need the cryptography package (pip install -r"
            " requirements-postgres.txt)",
            setting=KEY_SETTING,
        ) from None
    return fernet


def _key_bytes(key: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(key.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raw = b""
    if len(raw) != 32:
        raise ConfigurationError(
            f"{KEY_SETTING} must hold Fernet keys: 32 bytes in url-safe base64 (44 characters),"
            " several separated by commas",
            setting=KEY_SETTING,
        )
    return raw


def generate_key() -> str:
    """A new random Fernet key (url-safe base64 text)."""
    return str(_fernet().Fernet.generate_key().decode("ascii"))


class ResourceCipher:
    __slots__ = ("_address_keys", "_multi")

    def __init__(self, keys: str) -> None:
        parts = [k.strip() for k in str(keys).split(",") if k.strip()]
        if not parts:
            raise ConfigurationError(f"{KEY_SETTING} is empty", setting=KEY_SETTING)
        raws = [_key_bytes(k) for k in parts]
        fernet = _fernet()
        self._multi = fernet.MultiFernet([fernet.Fernet(k) for k in parts])
        self._address_keys = [hmac.new(r, _ADDRESS_CONTEXT, hashlib.sha256).digest() for r in raws]

    def __repr__(self) -> str:
        return "ResourceCipher(<keys hidden>)"

    def encrypt(self, data: bytes) -> bytes:
        return bytes(self._multi.encrypt(bytes(data)))

    def decrypt(self, token: bytes) -> bytes:
        try:
            return bytes(self._multi.decrypt(bytes(token)))
        except Exception:  # InvalidToken, or bytes that are no token at all
            raise ResourceUndecryptable(
                "stored resource bytes cannot be decrypted with the configured key"
            ) from None

    def address(self, data: bytes) -> str:
        """The keyed content address of plain bytes (64 hex characters), under the first key."""
        return hmac.new(self._address_keys[0], bytes(data), hashlib.sha256).hexdigest()

    def matches(self, data: bytes, address: str) -> bool:
        """True when ``address`` is the address of ``data`` under any of the keys."""
        return any(
            hmac.compare_digest(hmac.new(k, bytes(data), hashlib.sha256).hexdigest(), address)
            for k in self._address_keys
        )
