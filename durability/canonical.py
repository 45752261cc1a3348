"""Canonical JSON and SHA-256 digests: the one encoding every digest in the journal uses."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from durability.errors import NotSerializable

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# One encoder for every call (json.dumps would build a new one per call for these options).
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept as is; NaN/Infinity and non-JSON types refused."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise NotSerializable(
            f"value is not JSON-serialisable: {type(exc).__name__}", reason=str(exc)[:200]
        ) from None
    except RecursionError:
        raise NotSerializable("value is nested too deeply", reason="too_deep") from None


def storable_json(value: Any) -> str:
    """``canonical_json`` that also refuses text that is not valid Unicode (a database
    cannot store a lone surrogate)."""
    text = canonical_json(value)
    digest_text(text)
    return text


def digest_bytes(data: bytes) -> str:
    """Lowercase hex SHA-256 of raw bytes."""
    return hashlib.sha256(data).hexdigest()


def digest_text(text: str) -> str:
    """SHA-256 of the UTF-8 text; a string that is not valid Unicode (a lone surrogate)
    cannot be stored: NotSerializable."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise NotSerializable("text is not valid Unicode", reason="lone_surrogate") from None
    return digest_bytes(data)


def digest(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``."""
    return digest_text(canonical_json(value))


def fingerprint(kind: str, name: str, masked_args: Any, policy: str) -> str:
    """Identity of a call: SHA-256 of canonical JSON of kind, name, masked args and policy."""
    return digest({"kind": kind, "name": name, "args": masked_args, "policy": policy})


def fingerprint_from_json(kind: str, name: str, masked_args_json: str, policy: str) -> str:
    """``fingerprint`` with the arguments already in canonical JSON (the same digest)."""
    text = (
        f'{{"args":{masked_args_json},"kind":{_ENCODER.encode(kind)},'
        f'"name":{_ENCODER.encode(name)},"policy":{_ENCODER.encode(policy)}}}'
    )
    return digest_text(text)


def is_digest(value: object) -> bool:
    """True for a lowercase 64-character hex SHA-256."""
    return isinstance(value, str) and bool(_HEX64.match(value))


# reading back (durability/integrity.py checks what is read)
@dataclass(frozen=True)
class Undecodable:
    """Stands in for a stored JSON value that could not be read back."""

    undecodable: str  # why, e.g. "JSONDecodeError: Unterminated string ... (char 27)"
    reason: str = "undecodable"  # or blob_missing: a spilled value's blob is gone

    def __str__(self) -> str:
        return f"<{self.reason}: {self.undecodable}>"


def load_json(text: str | bytes | None) -> Any:
    """Decode stored JSON text; damage gives an :class:`Undecodable` instead of an error."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError) as exc:  # UnicodeDecodeError is a ValueError
        return Undecodable(f"{type(exc).__name__}: {str(exc)[:120]}")
