"""Journal storage: the interface (base.py) and one module per engine.

``Store`` and ``StoreTx`` are imported on first use (PEP 562), so that a module of the
store (sqlite_check.py) can be imported without loading the interface and its tables."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durability.store.base import Store, StoreTx

__all__ = ["Store", "StoreTx"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'durability.store' has no attribute {name!r}")
    value = getattr(importlib.import_module("durability.store.base"), name)
    globals()[name] = value
    return value
