"""Shell receipts with real bash: what a receipt proves, and what it refuses to prove."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from durability.adapters.shell import (
    ReceiptError,
    ReceiptExists,
    ShellReceipts,
    call_args_digest,
    completed_result_text,
)
from python.helpers.shell import ShellError, ShellSession, ShellSessions, Timeouts
from python.tools.code_execution_tool import CodeExecution

pytestmark = pytest.mark.unit

FAST = Timeouts(first_output=10, between_output=10, total=20)
ARGS = {"runtime": "terminal", "code": "echo hello"}
DIGEST = call_args_digest(ARGS)
OTHER_DIGEST = call_args_digest({"runtime": "terminal", "code": "echo bye"})


@pytest.fixture
def receipts(tmp_path: Path) -> ShellReceipts:
    return ShellReceipts(tmp_path / "receipts")


@pytest.fixture
async def session(tmp_path: Path):
    work = tmp_path / "work"
    s = ShellSession(work)
    await s.start()
    yield s
    await s.close()


async def wait_for(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def completed_call(session, receipts, call_id="call-a", command="echo out; echo err >&2"):
    r = await session.run(command, FAST, receipt=(receipts, call_id, DIGEST))
    assert not r.running
    return r


# -- verdicts -------------------------------------------------------------------


async def test_completed_receipt_proves_output_and_exit_code(session, receipts):
    r = await completed_call(session, receipts, command="echo out; echo err >&2; (exit 3)")
    assert r.output == "out\nerr\n" and r.exit_code == 3
    verdict = receipts.inspect("call-a", DIGEST)
    assert verdict.status == "completed"
    assert verdict.exit_code == 3 and verdict.output == "out\nerr\n"
    start = json.loads(receipts.start_path("call-a").read_text())
    end = json.loads(receipts.exit_path("call-a").read_text())
    assert start["call_id"] == end["call_id"] == "call-a"
    assert start["args_digest"] == end["args_digest"] == DIGEST
    assert start["shell_pid"] == session.shell_pid
    assert end["output_file"] == "call-a.out" and end["exit_code"] == 3
    assert end["finished_at"] >= start["started_at"]


async def test_receipt_files_are_private(session, receipts):
    await completed_call(session, receipts)
    assert stat.S_IMODE(receipts.folder.stat().st_mode) == 0o700
    names = sorted(p.name for p in receipts.folder.iterdir())
    assert names == ["call-a.exit", "call-a.out", "call-a.start"]  # no temporary files left
    for path in receipts.folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name


async def test_shell_state_persists_through_receipts(session, receipts, tmp_path):
    (tmp_path / "work" / "sub").mkdir(parents=True)
    await session.run("cd sub; export GREETING=hi", FAST, receipt=(receipts, "c1", DIGEST))
    r = await session.run('pwd; echo "$GREETING"', FAST, receipt=(receipts, "c2", DIGEST))
    assert r.output.splitlines() == [str(tmp_path / "work" / "sub"), "hi"]
    r = await session.run("echo plain $?", FAST)  # no receipt: the plain path still works
    assert r.output == "plain 0\n"
    r = await session.run("set | grep -c '^__a0' || true", FAST)
    assert r.output == "0\n"  # the wrapper leaves no variables behind


async def test_never_started_without_a_start_marker(receipts):
    verdict = receipts.inspect("never-ran", DIGEST)
    assert verdict.status == "never_started"
    assert receipts.classify({"id": "never-ran", "args": ARGS}) == "not_started"
    assert receipts.explain({"id": "never-ran", "args": ARGS}) == {"classification": "not_started"}


async def test_unknown_when_the_shell_dies_between_start_and_exit(session, receipts):
    r = await session.run("sleep 30", Timeouts(0.2, 5, 10), receipt=(receipts, "slow", DIGEST))
    assert r.running
    await wait_for(receipts.start_path("slow").exists, what="the start marker")
    os.killpg(session.shell_pid, signal.SIGKILL)
    await asyncio.wait_for(session.proc.wait(), 10)
    verdict = receipts.inspect("slow", DIGEST)
    assert verdict.status == "unknown"
    assert verdict.detail["shell_pid"] == session.shell_pid
    assert receipts.classify({"id": "slow", "args": ARGS}) == "unknown"
    assert receipts.explain({"id": "slow", "args": ARGS})["detail"]["shell_pid"] > 0


async def test_classify_completed_carries_output_and_result_text(session, receipts):
    await completed_call(session, receipts, command="echo hello")
    call = SimpleNamespace(id="call-a", args=ARGS)  # the shape of durability.records.Call
    outcome, recorded = receipts.classify(call)
    assert outcome == "completed"
    assert recorded == {"message": "hello\n\n[exit code 0]", "output": "hello\n", "exit_code": 0}
    got = receipts.explain(call)
    assert got["classification"] == "completed"
    assert got["exit_code"] == 0 and got["output"] == "hello\n"
    assert got["message"] == completed_result_text("hello\n", 0) == recorded["message"]


# -- rejections -----------------------------------------------------------------


async def test_wrong_args_digest_is_rejected(session, receipts):
    await completed_call(session, receipts)
    verdict = receipts.inspect("call-a", OTHER_DIGEST)
    assert (verdict.status, verdict.reason) == ("rejected", "wrong_args_digest")
    other_args = {"runtime": "terminal", "code": "echo bye"}
    got = receipts.classify({"id": "call-a", "args": other_args})
    assert got == "rejected:wrong_args_digest"
    assert receipts.explain({"id": "call-a", "args": other_args})["reason"] == "wrong_args_digest"


async def test_a_receipt_copied_to_another_call_is_rejected(session, receipts):
    await completed_call(session, receipts)
    for suffix in (".start", ".exit", ".out"):
        shutil.copy(receipts.folder / f"call-a{suffix}", receipts.folder / f"call-b{suffix}")
    verdict = receipts.inspect("call-b", DIGEST)
    assert (verdict.status, verdict.reason) == ("rejected", "wrong_call_id")


async def test_wrong_call_id_in_the_exit_marker_is_rejected(session, receipts):
    await completed_call(session, receipts)
    end = json.loads(receipts.exit_path("call-a").read_text())
    receipts.exit_path("call-a").write_text(json.dumps({**end, "call_id": "call-z"}))
    verdict = receipts.inspect("call-a", DIGEST)
    assert (verdict.status, verdict.reason) == ("rejected", "wrong_call_id")
    assert verdict.detail == {"marker": "exit"}


@pytest.mark.parametrize(
    "marker, text",
    [
        ("exit", "{not json"),
        ("exit", "[]"),
        ("exit", '{"call_id": "call-a"}'),
        ("exit", "\xff\xfe"),
        ("start", ""),
        ("start", '{"call_id": "call-a", "args_digest": 5, "started_at": 1, "shell_pid": 1}'),
    ],
)
async def test_malformed_markers_are_rejected(session, receipts, marker, text):
    await completed_call(session, receipts)
    path = receipts.exit_path("call-a") if marker == "exit" else receipts.start_path("call-a")
    path.write_text(text, encoding="latin-1")
    verdict = receipts.inspect("call-a", DIGEST)
    assert (verdict.status, verdict.reason) == ("rejected", "malformed_receipt")


@pytest.mark.parametrize(
    "change",
    [
        {"exit_code": True},
        {"output_sha256": "abc"},
        {"output_file": "../elsewhere.out"},
        {"output_bytes": -1},
    ],
)
async def test_exit_marker_fields_are_checked(session, receipts, change):
    await completed_call(session, receipts)
    end = json.loads(receipts.exit_path("call-a").read_text())
    receipts.exit_path("call-a").write_text(json.dumps({**end, **change}))
    assert receipts.inspect("call-a", DIGEST).reason == "malformed_receipt"


async def test_changed_output_is_rejected(session, receipts):
    await completed_call(session, receipts, command="echo abcdef")
    out = receipts.output_path("call-a")
    out.write_text("abcdeX\n")
    assert receipts.inspect("call-a", DIGEST).reason == "output_digest_mismatch"
    out.write_text("abc")  # truncated
    assert receipts.inspect("call-a", DIGEST).reason == "output_digest_mismatch"


async def test_missing_output_file_is_rejected(session, receipts):
    await completed_call(session, receipts)
    receipts.output_path("call-a").unlink()
    verdict = receipts.inspect("call-a", DIGEST)
    assert (verdict.status, verdict.reason) == ("rejected", "missing_output")


async def test_exit_without_start_is_rejected(session, receipts):
    await completed_call(session, receipts)
    receipts.start_path("call-a").unlink()
    assert receipts.inspect("call-a", DIGEST).reason == "exit_without_start"


@pytest.mark.parametrize("call_id", ["../etc/passwd", "", "a b", "x" * 200, None])
async def test_invalid_call_ids_are_rejected_not_raised(receipts, call_id):
    verdict = receipts.inspect(call_id, DIGEST)
    assert (verdict.status, verdict.reason) == ("rejected", "invalid_call_id")
    assert receipts.classify({"id": call_id, "args": ARGS}) == "rejected:invalid_call_id"


async def test_args_without_a_canonical_digest_are_rejected(receipts):
    got = receipts.classify({"id": "call-a", "args": {"x": float("nan")}})
    assert got == "rejected:malformed_args"


# -- writing --------------------------------------------------------------------


async def test_wrap_refuses_bad_identities_with_a_code(receipts, tmp_path):
    script = tmp_path / "cmd.sh"
    with pytest.raises(ReceiptError) as err:
        receipts.wrap("../x", DIGEST, script)
    assert err.value.code == "invalid_receipt"
    with pytest.raises(ReceiptError):
        receipts.wrap("ok", "not-a-digest", script)


async def test_an_existing_receipt_is_never_overwritten(session, receipts):
    await completed_call(session, receipts)
    before = receipts.exit_path("call-a").read_bytes()
    with pytest.raises(ReceiptExists) as err:
        receipts.wrap("call-a", DIGEST, Path("/nonexistent"))
    assert err.value.code == "receipt_exists"
    with pytest.raises(ShellError, match="receipt_exists"):
        await session.run("echo again", FAST, receipt=(receipts, "call-a", DIGEST))
    assert receipts.exit_path("call-a").read_bytes() == before
    assert (await session.run("echo fine", FAST)).output == "fine\n"


async def test_no_command_runs_when_the_start_marker_cannot_be_written(session, receipts):
    # A directory where the temporary start marker goes: the write fails (even as root).
    (receipts.folder / "blocked.start.tmp").mkdir()
    r = await session.run("touch ran", FAST, receipt=(receipts, "blocked", DIGEST))
    assert r.exit_code == 125 and "start marker could not be written" in r.output
    assert not (session.cwd / "ran").exists()
    assert receipts.inspect("blocked", DIGEST).status == "never_started"


async def test_progress_is_streamed_from_the_output_file(session, receipts, tmp_path):
    flag = tmp_path / "flag"
    seen: list[str] = []

    async def on_poll(text: str) -> None:
        seen.append(text)
        if "first" in text:
            flag.touch()

    command = f"echo first; while [ ! -e {flag} ]; do sleep 0.02; done; echo second"
    r = await session.run(command, FAST, on_poll, receipt=(receipts, "stream", DIGEST))
    assert r.output == "first\nsecond\n" and r.exit_code == 0
    assert any(s == "first\n" for s in seen)
    assert receipts.inspect("stream", DIGEST).output == "first\nsecond\n"


async def test_read_more_and_input_work_with_receipts(session, receipts):
    r = await session.run(
        'echo ask; read -r name; echo "hi $name"',
        Timeouts(0.3, 0.3, 10),
        receipt=(receipts, "ask", DIGEST),
    )
    assert r.running and r.output == "ask\n"
    assert receipts.inspect("ask", DIGEST).status == "unknown"
    await session.send_input("bob")
    r = await session.read_more(FAST)
    assert r.output == "hi bob\n" and r.exit_code == 0
    verdict = receipts.inspect("ask", DIGEST)
    assert verdict.status == "completed" and verdict.output == "ask\nhi bob\n"


async def test_output_after_exit_from_a_background_job_keeps_the_receipt_valid(
    session, receipts, tmp_path
):
    go, done = tmp_path / "go", tmp_path / "done"
    command = f"(while [ ! -e {go} ]; do sleep 0.02; done; echo late; touch {done}) & echo now"
    r = await session.run(command, FAST, receipt=(receipts, "bg", DIGEST))
    assert r.output == "now\n" and r.exit_code == 0
    go.touch()
    await wait_for(done.exists, what="the background job")
    assert receipts.output_path("bg").read_text() == "now\nlate\n"
    verdict = receipts.inspect("bg", DIGEST)
    assert verdict.status == "completed" and verdict.output == "now\n"


async def test_discard_removes_one_calls_files(session, receipts):
    await completed_call(session, receipts, call_id="keep")
    await completed_call(session, receipts, call_id="drop")
    receipts.discard("drop")
    receipts.discard("../keep")  # invalid ids are ignored
    assert sorted(p.name for p in receipts.folder.iterdir()) == [
        "keep.exit",
        "keep.out",
        "keep.start",
    ]


# -- the tool -------------------------------------------------------------------


def make_tool(tmp_path: Path, receipts: ShellReceipts | None, args: dict) -> CodeExecution:
    async def handle_intervention() -> None:
        return None

    session = SimpleNamespace(receipts=receipts)  # the chat's durable session
    context = SimpleNamespace(shells=ShellSessions(tmp_path / "work"), session=session)
    agent = SimpleNamespace(
        context=context,
        config=SimpleNamespace(settings={}),
        mask=lambda text: text,
        handle_intervention=handle_intervention,
    )
    return CodeExecution(agent, "code_execution_tool", None, args, "")


async def test_code_execution_tool_writes_a_receipt_for_a_journaled_call(tmp_path, receipts):
    args = {"runtime": "terminal", "code": "echo from-tool"}
    tool = make_tool(tmp_path, receipts, args)
    tool.call_identity = ("tool-call-1", call_args_digest(args))
    try:
        response = await tool.execute(**args)
    finally:
        await tool.agent.context.shells.close_all()
    assert response.message == "from-tool\n\n[exit code 0]"
    outcome, got = receipts.classify({"id": "tool-call-1", "args": args})
    assert outcome == "completed"
    assert got["message"] == response.message  # recovery can reuse the exact tool result
    again = CodeExecution.receipt_response(got["output"], got["exit_code"])
    assert again.message == response.message and again.break_loop is False


async def test_code_execution_tool_without_receipts_or_identity_writes_none(tmp_path, receipts):
    args = {"runtime": "python", "code": "print(6 * 7)"}
    for tool in (make_tool(tmp_path, receipts, args), make_tool(tmp_path, None, args)):
        if tool.agent.context.session.receipts is None:
            tool.call_identity = ("ignored", DIGEST)  # no receipts folder: plain run
        try:
            response = await tool.execute(**args)
        finally:
            await tool.agent.context.shells.close_all()
        assert response.message == "42\n\n[exit code 0]"
    assert list(receipts.folder.iterdir()) == []


async def test_code_execution_tool_never_reruns_a_call_that_has_a_receipt(tmp_path, receipts):
    args = {"runtime": "terminal", "code": "echo once >> count.txt"}
    responses = []
    for _ in range(2):
        tool = make_tool(tmp_path, receipts, args)
        tool.call_identity = ("same-call", call_args_digest(args))
        try:
            responses.append(await tool.execute(**args))
        finally:
            await tool.agent.context.shells.close_all()
    assert responses[0].message == "(no output)\n[exit code 0]"
    assert "receipt_exists" in responses[1].message and "nothing was run" in responses[1].message
    assert (tmp_path / "work" / "count.txt").read_text() == "once\n"


def test_a_start_only_receipt_is_unknown_never_not_started(receipts):
    """Text typed into a running program (allow_running) is marked started from Python:
    a crash then holds the call instead of typing the text again."""
    receipts.mark_started("typed-1", DIGEST)
    call = SimpleNamespace(id="typed-1", args=ARGS)
    assert receipts.classify(call) == "unknown"
    assert stat.S_IMODE(receipts.start_path("typed-1").stat().st_mode) == 0o600
    with pytest.raises(ReceiptExists):
        receipts.mark_started("typed-1", DIGEST)
    assert receipts.classify(SimpleNamespace(id="typed-1", args={"other": 1})).startswith(
        "rejected:wrong_args_digest"
    )
    with pytest.raises(ReceiptError):
        receipts.mark_started("../escape", DIGEST)
