"""Journal storage: the interface (base.py) and one module per engine."""

from durability.store.base import Store, StoreTx

__all__ = ["Store", "StoreTx"]
