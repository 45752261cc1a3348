"""Vectors as the tables store them (float32, little-endian) and how a score is read.

The score of a memory is upstream's relevance: ``(1 + cosine) / 2``, in [0, 1], so a
threshold written for Agent Zero (0.7 means cosine 0.4 for unit vectors) means the same
here. Cosine, not the raw dot product, so vectors a provider does not normalise rank
correctly too.
"""

from __future__ import annotations

import functools
import math
import struct
import sys
from array import array
from collections.abc import Sequence

from durability.errors import InvalidArgument

MAX_DIM = 16_384


def encode(vector: Sequence[float], field: str = "vector") -> bytes:
    """``vector`` as stored: float32 little-endian bytes. Refuses an empty, non-finite or
    zero vector (it has no direction to compare)."""
    if isinstance(vector, str | bytes) or not isinstance(vector, Sequence | array):
        raise InvalidArgument(f"{field} must be a list of numbers", field=field)
    if not 0 < len(vector) <= MAX_DIM:
        raise InvalidArgument(f"{field} must have 1 to {MAX_DIM} values", field=field)
    invalid = InvalidArgument(f"{field} must hold finite numbers, not all zero", field=field)
    packer, magnitude = _layout(len(vector))
    try:
        data = packer.pack(*vector)  # numbers, converted in C (an embedder's list of floats)
        total = sum(vector)
    except OverflowError:  # beyond float32
        raise invalid from None
    except (TypeError, ValueError, struct.error):
        try:  # anything float() takes, one by one
            values = [float(v) for v in vector]
            data = packer.pack(*values)
        except OverflowError:
            raise invalid from None
        except (TypeError, ValueError, struct.error):
            raise InvalidArgument(f"{field} must be a list of numbers", field=field) from None
        total = sum(values)
    # every value is within float32's range here, so their float64 sum cannot overflow: it
    # is finite exactly when every value is (an inf or a NaN makes it inf or NaN)
    if not math.isfinite(total) or not int.from_bytes(data, "little") & magnitude:
        raise invalid
    return data


@functools.lru_cache(maxsize=64)
def _layout(dim: int) -> tuple[struct.Struct, int]:
    """The packer of ``dim`` float32 values (little-endian), and the mask of every bit
    but the signs: the bytes read as one integer are zero under it when all values are
    +0 or -0."""
    return struct.Struct(f"<{dim}f"), int.from_bytes(b"\xff\xff\xff\x7f" * dim, "little")


def decode(data: bytes) -> list[float]:
    values = array("f")
    values.frombytes(data)
    if sys.byteorder != "little":  # pragma: no cover
        values.byteswap()
    return values.tolist()


def min_cosine(threshold: float) -> float:
    """The cosine a relevance ``threshold`` asks for."""
    return 2.0 * threshold - 1.0


def relevance(cosine: float) -> float:
    return min(1.0, max(0.0, (1.0 + cosine) / 2.0))
