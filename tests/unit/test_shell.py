"""Shell sessions: real bash processes, exit codes, state, input and time-outs."""

from __future__ import annotations

import asyncio
import os

import pytest

from python.helpers.shell import ShellError, ShellSession, ShellSessions, Timeouts

pytestmark = pytest.mark.unit

FAST = Timeouts(first_output=10, between_output=10, total=20)


@pytest.fixture
async def session(tmp_path):
    s = ShellSession(tmp_path)
    await s.start()
    yield s
    await s.close()


async def test_output_and_exit_code(session):
    r = await session.run("echo hello; echo err >&2", FAST)
    assert r.output == "hello\nerr\n"
    assert r.exit_code == 0 and not r.running and r.timed_out is None
    r = await session.run("false", FAST)
    assert r.exit_code == 1
    r = await session.run("(exit 42)", FAST)
    assert r.exit_code == 42


async def test_state_persists_between_commands(session, tmp_path):
    (tmp_path / "sub").mkdir()
    await session.run("cd sub; export GREETING=hi", FAST)
    r = await session.run('pwd; echo "$GREETING"', FAST)
    assert r.output.splitlines() == [str(tmp_path / "sub"), "hi"]


async def test_workdir_is_the_cwd(session, tmp_path):
    r = await session.run("echo hello > out.txt", FAST)
    assert r.exit_code == 0
    assert (tmp_path / "out.txt").read_text() == "hello\n"


async def test_syntax_error_does_not_hang(session):
    r = await session.run("if then fi 'unclosed", FAST)
    assert r.exit_code is not None and r.exit_code != 0
    assert (await session.run("echo still alive", FAST)).output == "still alive\n"


async def test_output_without_trailing_newline(session):
    r = await session.run("printf abc", FAST)
    assert r.output == "abc" and r.exit_code == 0


async def test_first_output_timeout_then_read_more(session):
    r = await session.run("sleep 1; echo late", Timeouts(0.2, 5, 10))
    assert r.running and r.timed_out == "first_output" and r.exit_code is None
    with pytest.raises(ShellError):
        await session.run("echo busy", FAST)
    r = await session.read_more(FAST)
    assert r.output == "late\n" and r.exit_code == 0 and not r.running


async def test_between_output_timeout(session):
    r = await session.run("echo one; sleep 2; echo two", Timeouts(5, 0.3, 10))
    assert r.timed_out == "between_output" and r.output == "one\n"
    r = await session.read_more(FAST)
    assert r.output == "two\n" and r.exit_code == 0


async def test_total_timeout(session):
    cmd = "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.2; done"
    r = await session.run(cmd, Timeouts(5, 5, 0.5))
    assert r.timed_out == "total" and r.running
    assert r.output.startswith("1\n")
    r = await session.read_more(FAST)
    assert r.exit_code == 0 and r.output.endswith("10\n")


async def test_input_reaches_a_waiting_command(session):
    r = await session.run('read -r name; echo "hi $name"', Timeouts(0.3, 5, 10))
    assert r.running
    await session.send_input("bob")
    r = await session.read_more(FAST)
    assert r.output == "hi bob\n" and r.exit_code == 0


async def test_exit_ends_the_session_and_next_run_restarts(session):
    r = await session.run("exit 3", FAST)
    assert r.session_ended and r.exit_code == 3
    r = await session.run("echo back", FAST)
    assert r.output == "back\n" and r.exit_code == 0


async def test_on_poll_sees_progress(session):
    seen: list[str] = []

    async def on_poll(text: str) -> None:
        seen.append(text)

    r = await session.run("echo a; sleep 0.3; echo b", FAST, on_poll)
    assert r.output == "a\nb\n"
    assert any("a\n" in s for s in seen)


async def test_secrets_are_not_in_the_child_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("API_KEY_OPENAI", "sk-very-secret")
    monkeypatch.setenv("A0_DURABILITY_POSTGRES_DSN", "postgresql://u:dsn-secret@db/a0")
    monkeypatch.setenv("A0_DURABILITY_RESOURCE_KEY", "fernet-key-secret")
    monkeypatch.setenv("PGPASSWORD", "pg-secret")
    monkeypatch.setenv("A0_USR_DIR", str(tmp_path))
    s = ShellSession(tmp_path)
    await s.start()
    try:
        r = await s.run("env", FAST)
        for secret in ("sk-very-secret", "dsn-secret", "fernet-key-secret", "pg-secret"):
            assert secret not in r.output
        assert f"A0_USR_DIR={tmp_path}" in r.output  # the rest is inherited
    finally:
        await s.close()


async def test_close_kills_background_children(tmp_path):
    s = ShellSession(tmp_path)
    await s.start()
    r = await s.run("sleep 30 & echo $!", FAST)
    child = int(r.output.strip())
    private = s.dir
    await s.close()
    assert not private.exists()
    with pytest.raises(ProcessLookupError):
        for _ in range(200):  # reaped asynchronously by init; wait with a deadline
            os.kill(child, 0)
            await asyncio.sleep(0.01)


async def test_sessions_manager(tmp_path):
    sessions = ShellSessions(tmp_path)
    a = await sessions.get(0)
    assert await sessions.get(0) is a
    b = await sessions.get(1)
    assert b is not a
    await sessions.reset(0)
    assert 0 not in sessions.sessions
    await sessions.close_all()
    assert not sessions.sessions
