"""Suite-wide fixtures. Feature fixtures live next to their tests or in tests/support/."""

from __future__ import annotations

import pytest
from hypothesis import settings

# Hypothesis keeps no example database in the working tree.
settings.register_profile("repo", database=None)
settings.load_profile("repo")


@pytest.fixture(autouse=True)
def _private_usr_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Keep every in-process test's user data out of the working tree."""
    usr = tmp_path_factory.mktemp("usr")
    monkeypatch.setenv("A0_USR_DIR", str(usr))
    return usr


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL per pytest process (each xdist worker has its own), or the server
    A0_TEST_POSTGRES_DSN names. Missing in CI (CI=true) is a failure, elsewhere a skip."""
    import os

    from tests.support.postgres import PostgresUnavailable, server_for_session

    try:
        manager = server_for_session()
        server = manager.__enter__()
    except PostgresUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required in CI: {exc}")
        pytest.skip(f"PostgreSQL is not available: {exc}")
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture
def pg_namespace(postgres_server):
    """A schema of the test's own; dropped afterwards."""
    namespace = postgres_server.new_namespace()
    yield namespace
    postgres_server.drop_namespace(namespace)


@pytest.fixture
async def chats(_private_usr_dir):
    """The chats of a test over a temporary SQLite journal: every AgentContext a test
    builds gets its durable session from here (the loop never runs without a journal).
    ``chats.create(config=...)`` makes a chat; the journal is closed afterwards."""
    from durability import Journal, paths
    from python.durable import DurableChats
    from python.helpers import secrets

    masker = secrets.masker_for(_private_usr_dir)  # as the server's journal (startup.py)
    journal = Journal.open_sqlite(paths.journal_path(_private_usr_dir), masker=masker)
    host = DurableChats(journal)
    yield host
    await host.close()
