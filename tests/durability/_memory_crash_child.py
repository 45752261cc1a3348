"""Commits a call's result together with a memory save; run with A0_CRASH_AT set to the
point inside that transaction, it SIGKILLs itself there (tests/durability/conformance/
test_memory.py).

    python _memory_crash_child.py sqlite PATH CALL_ID MEMORY_ID
    python _memory_crash_child.py postgres DSN CALL_ID MEMORY_ID NAMESPACE
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from durability.journal import Journal
from durability.memory import Memories


def main(argv: list[str]) -> int:
    engine, target, call_id, memory_id = argv[:4]
    if engine == "sqlite":
        journal = Journal.open_sqlite(target)
    else:
        journal = Journal.open_postgres(target, namespace=argv[4], pool_size=2)
    memories = Memories(journal)
    _, write = memories.save_write(
        "default", "main", "saved once", {}, [1.0, 0.0, 0.0], model="t/e", memory_id=memory_id
    )
    journal.commit_result_with(call_id, {"message": f"saved {memory_id}"}, [write])
    journal.close()
    print("COMMITTED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
