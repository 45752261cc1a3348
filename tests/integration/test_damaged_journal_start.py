"""A damaged journal is never served (DESIGN.md: the integrity check on open), also now that
run_ui.py begins the check at process start on a thread of its own (issue #24,
durability/store/sqlite_check.py): the server refuses to start, with the same error as before."""

from __future__ import annotations

import pytest

from durability import Journal
from durability.paths import journal_path
from tests.support.damaged_journal import damage_journal
from tests.support.ui_server import UiServer

pytestmark = pytest.mark.integration


def _damaged_journal(usr) -> None:
    damage_journal(journal_path(usr))


def _fails_its_check(path) -> str:
    """The error opening ``path`` gives, as ``code: message``."""
    from durability import CorruptDatabase

    try:
        Journal.open_sqlite(path).close()
    except CorruptDatabase as exc:
        return f"{exc.code}: {exc.message}"
    raise AssertionError("the damaged journal opened")


def test_a_damaged_journal_stops_the_server_before_it_serves(tmp_path):
    usr = tmp_path / "usr"
    _damaged_journal(usr)
    expected = _fails_its_check(journal_path(usr))
    server = UiServer(usr)
    with pytest.raises(RuntimeError, match="exited with"):
        server.start(timeout=60)
    output = server.output()
    assert expected == "corrupt_database: the journal database failed its quick check"
    assert f"CorruptDatabase: {expected.split(': ', 1)[1]}" in output, output[-3000:]
    assert "Application startup failed" in output, output[-3000:]
    assert "/api/health" not in output  # never answered a request
