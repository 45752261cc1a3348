"""What a server imports before it serves (issue #24, goal 5): numpy (~0.05-0.1 s) only once
a memory search needs it, never for the app, the journal or its vector extension."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import run_ui
    from durability import Journal
    from durability.memory import Memories
    from python.helpers import settings
    from python.server import auth
    from python.server.runtime import Runtime

    usr = Path(sys.argv[1])
    login = auth.AuthConfig.load(usr, bind_host="127.0.0.1")
    run_ui.build_app(Runtime(usr, settings.load(usr), login))
    journal = Journal.open_sqlite(usr / "journal.sqlite")
    try:
        store = journal.store
        assert store.memory_search_backend == "sqlite-vec", store.memory_search_problem
        print("numpy before a search:", "numpy" in sys.modules)
        memories = Memories(journal)
        saved = memories.save("default", "main", "a b", {}, [1.0, 0.0], model="m")
        found = memories.search("default", [1.0, 0.0], model="m")
        print("found:", [m.id for m, _ in found] == [saved])
        print("numpy after a search:", "numpy" in sys.modules)
    finally:
        journal.close()
    """
)


def test_the_app_and_the_journal_open_without_numpy(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "A0_USR_DIR": str(tmp_path), "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "numpy before a search: False" in lines
    assert "found: True" in lines
    assert "numpy after a search: True" in lines  # the matrix ranks: numpy came on first use
