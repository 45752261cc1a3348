"""``python -m durability``: the journal's operator commands (see docs/operations.md)."""

from durability.cli import main

raise SystemExit(main())
