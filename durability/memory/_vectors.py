"""Vectors as the tables store them (float32, little-endian) and how a score is read.

The score of a memory is upstream's relevance: ``(1 + cosine) / 2``, in [0, 1], so a
threshold written for Agent Zero (0.7 means cosine 0.4 for unit vectors) means the same
here. Cosine, not the raw dot product, so vectors a provider does not normalise rank
correctly too.
"""

from __future__ import annotations

import math
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
    try:
        values = array("f", vector)  # plain numbers, converted in C
    except (TypeError, ValueError, OverflowError):
        try:  # anything float() takes, one by one
            values = array("f", (float(v) for v in vector))
        except (TypeError, ValueError, OverflowError):
            raise InvalidArgument(f"{field} must be a list of numbers", field=field) from None
    # the float64 sum of float32 values cannot overflow (16,384 x 3.4e38), so it is finite
    # exactly when every value is (an inf or a NaN makes it inf or NaN)
    if not math.isfinite(sum(values)) or not any(values):
        raise InvalidArgument(f"{field} must hold finite numbers, not all zero", field=field)
    if sys.byteorder != "little":  # pragma: no cover - every platform we ship on is little
        values.byteswap()
    return values.tobytes()


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
