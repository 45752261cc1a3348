"""Web UI sessions in the journal's database: hashed ids, expiry, revocation (every engine)."""

from __future__ import annotations

import asyncio

import pytest

from durability import web_sessions
from durability.web_sessions import WebSessions

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def run(coro):
    return asyncio.run(coro)


def test_a_session_is_found_by_its_id_and_only_its_digest_is_stored(journal, backend):
    sessions = WebSessions(journal, "gen-1")
    made = run(sessions.create(authenticated=True))
    again = run(sessions.find(made.session_id))
    assert again is not None and again.authenticated and again.csrf_token == made.csrf_token
    other = run(sessions.create(authenticated=True))
    assert other.session_id != made.session_id and other.csrf_token != made.csrf_token
    assert run(sessions.find(made.session_id + "x")) is None
    row = journal.store.read(
        lambda tx: tx.web_sessions.get(web_sessions.id_digest(made.session_id))
    )
    assert row is not None and made.session_id not in (row.id_digest, row.csrf_token)


def test_revoke_and_a_new_generation_end_sessions(journal):
    sessions = WebSessions(journal, "gen-1")
    kept = run(sessions.create(authenticated=True))
    gone = run(sessions.create(authenticated=False))
    assert run(sessions.revoke(gone.session_id)) is True
    assert run(sessions.find(gone.session_id)) is None
    assert run(sessions.revoke(gone.session_id)) is False
    other = run(WebSessions(journal, "gen-0").create(authenticated=True))
    newer = WebSessions(journal, "gen-2")
    assert run(newer.find(kept.session_id)) is None  # made under other credentials
    assert run(sessions.revoke_generation()) == 1  # gen-1's sessions only
    assert run(sessions.find(kept.session_id)) is None
    assert run(WebSessions(journal, "gen-0").find(other.session_id)) is not None


def test_sessions_expire_when_idle_and_at_their_maximum_age(journal):
    clock = Clock()
    sessions = WebSessions(journal, "g", clock=clock)
    idle = run(sessions.create(authenticated=True))
    used = run(sessions.create(authenticated=True))
    for _ in range(8):  # used every 23 hours: the idle limit moves, the maximum age does not
        clock.now += 23 * 3600
        if clock.now - idle.created_at < web_sessions.MAX_AGE_SECONDS:
            assert run(sessions.find(used.session_id)) is not None
    assert run(sessions.find(idle.session_id)) is None
    assert run(sessions.find(used.session_id)) is None


def test_the_table_is_bounded(journal, monkeypatch):
    monkeypatch.setattr(web_sessions, "MAX_SESSIONS", 3)
    clock = Clock()
    sessions = WebSessions(journal, "g", clock=clock)
    made = []
    for _ in range(5):
        clock.now += 1
        made.append(run(sessions.create(authenticated=False)))
    found = [run(sessions.find(s.session_id)) is not None for s in made]
    assert found == [False, False, True, True, True]
