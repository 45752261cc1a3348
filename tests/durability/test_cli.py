"""`python -m durability ...` as a real subprocess against a real journal file."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from durability import Journal
from tests.durability._ops_support import DAY, Clock, count, journaled_run

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@dataclass
class Setup:
    usr: Path
    db: Path
    done: str  # a completed run, finished long ago
    held: str  # a run held for a decision

    def cli(self, *args: str, cwd: Path | None = None, usr: Path | None = None) -> Result:
        env = {k: v for k, v in os.environ.items() if k != "A0_USR_DIR"}
        env["A0_USR_DIR"] = str(usr or self.usr)
        env["PYTHONPATH"] = str(REPO)
        proc = subprocess.run(
            [sys.executable, "-m", "durability", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd or self.usr,
            timeout=60,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    usr = tmp_path / "usr"
    db = usr / "durability" / "journal.sqlite"
    clock = Clock(1_700_000_000.0)
    with Journal.open_sqlite(db, clock=clock) as journal:
        done, _ = journaled_run(journal, "chat-1", "in-1")
        clock.now += 100 * DAY
        held, _ = journaled_run(journal, "chat-2", "in-2", status=None)
        call = journal.record_intent(
            held, agent_no=0, seq=3, kind="tool", name="pay", args={"amount": 5}, policy="never"
        )
        assert call.state == "open"
        journal.mark_needs_attention(held, "uncertain_effect")
    return Setup(usr, db, done, held)


def test_list_text_json_and_status(setup: Setup) -> None:
    text = setup.cli("list")
    assert text.code == 0
    assert setup.done in text.out and setup.held in text.out and "needs_attention" in text.out
    rows = setup.cli("list", "--json").json()
    assert {r["id"] for r in rows} == {setup.done, setup.held}
    held = setup.cli("--json", "list", "--status", "needs_attention").json()
    assert [r["id"] for r in held] == [setup.held]
    assert setup.cli("list", "--status", "bogus").code == 2


def test_show_names_calls_and_state(setup: Setup) -> None:
    shown = setup.cli("show", setup.held)
    assert shown.code == 0
    assert "uncertain_effect" in shown.out and "pay" in shown.out and "open" in shown.out
    data = setup.cli("show", setup.held, "--json").json()
    assert data["run"]["status"] == "needs_attention"
    assert [c["state"] for c in data["calls"]] == ["completed"] * 3 + ["open"]
    assert len(data["checkpoints"]) == 3
    missing = setup.cli("show", "no-such-run")
    assert missing.code == 1
    assert missing.err.startswith("error: run_not_found: ")


def test_decide_applies_once_and_refuses_stale_versions(setup: Setup) -> None:
    version = setup.cli("show", setup.held, "--json").json()["run"]["version"]
    no_note = setup.cli(
        "decide", setup.held, "confirmed_completed", "--expected-version", str(version)
    )
    assert no_note.code == 1 and no_note.err.startswith("error: note_required: ")
    stale = setup.cli("decide", setup.held, "resume", "--expected-version", str(version - 1))
    assert stale.code == 1 and stale.err.startswith("error: stale_version: ")
    assert f"current_version={version}" in stale.err and "status=needs_attention" in stale.err
    options = ["--expected-version", str(version), "--actor", "ops-test"]
    done = setup.cli("decide", setup.held, "stop", *options, "--note", "checked the bank", "--json")
    assert done.code == 0, done.err
    assert done.json()["run"]["status"] == "stopped"
    assert done.json()["decision"]["actor"] == "ops-test"
    again = setup.cli("decide", setup.held, "stop", "--expected-version", str(version))
    assert again.code == 0 and "already applied" in again.out
    assert setup.cli("decide", setup.held, "explode", "--expected-version", "1").code == 2
    assert setup.cli("decide", setup.held, "stop").code == 2  # --expected-version is required


def test_decide_retry_model_call_grants_the_attempts_asked_for(setup: Setup) -> None:
    """retry_model_call goes through the one decide, like the five (#18)."""
    with Journal.open_sqlite(setup.db) as journal:
        run, _ = journaled_run(journal, "chat-3", "in-3", status=None)
        call = journal.record_intent(
            run, agent_no=0, seq=3, kind="model", name="model", args={"m": 1}, policy="hold"
        )
        journal.commit_result(call.id, {"error": "model_error", "status": 500}, failed=True)
        held = journal.mark_needs_attention(run, "model_failed", {"call_id": call.id})
    options = ["--expected-version", str(held.version), "--attempts", "3", "--json"]
    done = setup.cli("decide", run, "retry_model_call", *options)
    assert done.code == 0, done.err
    assert done.json()["decision"]["decision"] == "retry_model_call"
    assert done.json()["run"]["status"] == "active"
    with Journal.open_sqlite(setup.db) as journal:
        assert [(g.attempts, g.remaining) for g in journal.list_retry_grants(run)] == [(3, 2)]
        assert journal.get_call(call.id).state == "superseded"


def test_export_is_json_lines_run_first(setup: Setup) -> None:
    result = setup.cli("export", setup.done)
    assert result.code == 0
    records = [json.loads(line) for line in result.out.splitlines()]
    types = [r["type"] for r in records]
    assert types[0] == "run" and records[0]["id"] == setup.done
    events = [r for r in records if r["type"] == "event"]
    assert types == ["run"] + ["call"] * 3 + ["checkpoint"] * 3 + ["event"] * len(events)
    assert events[0]["event_type"] == "input"
    assert events[0]["payload"]["input_id"] == "in-1"
    assert [r["seq"] for r in records if r["type"] == "call"] == [0, 1, 2]
    assert all(len(r["digest"]) == 64 for r in records if r["type"] == "checkpoint")
    assert all(r["run_id"] == setup.done for r in records if r["type"] != "run")


def test_verify_sound_then_flipped_checkpoint_bytes(setup: Setup) -> None:
    ok = setup.cli("verify")
    assert ok.code == 0 and ok.out.startswith("ok: ") and "6 checkpoints" in ok.out
    conn = sqlite3.connect(setup.db)
    cp_id, body = conn.execute(
        "SELECT id, body FROM checkpoints ORDER BY id LIMIT 1 OFFSET 4"
    ).fetchone()
    conn.close()
    data = bytearray(setup.db.read_bytes())
    at = data.find(body.encode())
    assert at > 0 and data.find(body.encode(), at + 1) == -1
    step = body.index('"step":') + len('"step":')
    data[at + step] = ord("7")  # one digit inside the stored payload
    setup.db.write_bytes(bytes(data))
    bad = setup.cli("verify")
    assert bad.code == 1
    assert f"checkpoint {cp_id} " in bad.out and "digest_mismatch" in bad.out
    report = setup.cli("verify", "--json").json()
    assert report["ok"] is False
    assert [p["code"] for p in report["problems"]] == ["checkpoint"]


def test_verify_truncated_and_garbled_files(setup: Setup) -> None:
    data = setup.db.read_bytes()
    setup.db.write_bytes(data[: len(data) // 3])
    truncated = setup.cli("verify")
    assert truncated.code == 1 and truncated.out.startswith("FAILED")
    assert "integrity" in truncated.out or "unreadable" in truncated.out
    setup.db.write_bytes(b"\x00garbage" * 1000)
    garbled = setup.cli("verify")
    assert garbled.code == 1 and "not_sqlite" in garbled.out
    # the other commands refuse the damaged file with a clean message too
    listed = setup.cli("list")
    assert listed.code == 1 and listed.err.startswith("error: ")


def test_backup_restore_round_trip(setup: Setup, tmp_path: Path) -> None:
    made = setup.cli("backup", "--json")
    assert made.code == 0, made.err
    backup = Path(made.json()["backup"])
    assert backup.parent == setup.db.parent / "backups"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    elsewhere = setup.cli("backup", "--dest", str(tmp_path / "b"))
    assert elsewhere.code == 0 and str(tmp_path / "b") in elsewhere.out
    assert setup.cli("retention", "--runs", "0", "--days", "0").code == 0
    assert count(setup.db, "runs") == 1
    restored = setup.cli("restore", str(backup))
    assert restored.code == 0, restored.err
    assert "journal.sqlite.bak" in restored.out
    assert count(setup.db, "runs") == 2
    assert count(setup.db.with_name("journal.sqlite.bak"), "runs") == 1
    missing = setup.cli("restore", str(tmp_path / "nothing.sqlite"))
    assert missing.code == 1 and missing.err.startswith("error: backup_invalid: ")


def test_retention_keeps_open_runs(setup: Setup) -> None:
    dry = setup.cli("retention", "--runs", "0", "--days", "30", "--dry-run")
    assert dry.code == 0 and setup.done in dry.out
    assert count(setup.db, "runs") == 2
    kept = setup.cli("retention", "--json").json()  # defaults: 100 runs or 30 days
    assert kept["run_ids"] == [] and kept["keep_runs"] == 100 and kept["keep_days"] == 30
    gone = setup.cli("retention", "--runs", "0", "--days", "30", "--json").json()
    assert gone["run_ids"] == [setup.done] and gone["runs_removed"] == 1
    assert [r["id"] for r in setup.cli("list", "--json").json()] == [setup.held]
    assert setup.cli("retention", "--days", "-3").code == 2


def test_db_option_default_and_missing_journal(setup: Setup, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    via_option = setup.cli("--db", str(setup.db), "list", "--json", usr=other)
    assert len(via_option.json()) == 2
    cwd_default = tmp_path / "cwd"
    (cwd_default / "usr" / "durability").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "A0_USR_DIR"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-m", "durability", "list"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd_default,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: journal_not_found: no journal at usr/durability/")
    missing = setup.cli("list", usr=other)
    assert missing.code == 1 and "journal_not_found" in missing.err
    assert not (other / "durability").exists()  # nothing is created by looking
    assert setup.cli().code == 2
    assert setup.cli("frobnicate").code == 2


def test_every_command_and_option_is_documented() -> None:
    import argparse
    import re

    from durability.cli import build_parser

    doc = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### (\w+)$", doc, re.MULTILINE))
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) - headings == set(), "undocumented commands"
    options = {
        opt
        for p in [parser, *sub.choices.values()]
        for action in p._actions
        for opt in action.option_strings
        if opt.startswith("--") and opt != "--help"
    }
    missing = {opt for opt in options if f"`{opt}" not in doc}
    assert not missing, f"undocumented options: {sorted(missing)}"


def test_verify_lists_every_damaged_record_with_its_ids(setup: Setup) -> None:
    with Journal.open_sqlite(setup.db) as journal:
        plan = {"title": "t", "items": [{"id": "a", "text": "one", "done": False}]}
        journal.replace_document("chat-1", "plan", plan, expected_revision=0, actor="alice")
        calls = journal.list_calls(setup.done)
        event = journal.list_events(run_id=setup.done)[0]
    clean = setup.cli("verify", "--json").json()
    assert clean["ok"] is True, clean["problems"]
    assert clean["checked"]["calls"] == 7 and clean["checked"]["documents"] == 1
    assert clean["checked"]["events"] >= 2 and clean["checked"]["blobs"] > 0

    conn = sqlite3.connect(setup.db)
    with conn:
        conn.execute("UPDATE calls SET result = '{\"ok\":99}' WHERE id = ?", (calls[0].id,))
        conn.execute("UPDATE calls SET args = '{\"i\":' WHERE id = ?", (calls[1].id,))
        conn.execute("UPDATE events SET payload = '{}' WHERE id = ?", (event.id,))
        conn.execute('UPDATE documents SET body = \'{"title":"x","items":[]}\'')
    conn.close()
    bad = setup.cli("verify")
    assert bad.code == 1 and bad.out.startswith("FAILED: ") and "4 problem(s)" in bad.out
    lines = bad.out.splitlines()
    assert any(f"call {calls[0].id}" in x and "call_result" in x and "seq 0" in x for x in lines)
    assert any(f"call {calls[1].id}" in x and "undecodable" in x for x in lines)
    assert any(f"event {event.id} (input; run {setup.done})" in x for x in lines)
    assert any("document plan of chat chat-1 (revision 1)" in x for x in lines)

    report = setup.cli("verify", "--json")
    assert report.code == 1
    problems = {p["code"]: p for p in report.json()["problems"]}
    assert set(problems) == {"call_result", "call_args", "event", "document"}
    assert problems["call_result"]["ids"]["call_id"] == calls[0].id
    assert problems["call_result"]["ids"]["run_id"] == setup.done
    assert (problems["call_args"]["ids"]["agent_no"], problems["call_args"]["ids"]["seq"]) == (0, 1)
    assert problems["event"]["ids"]["event_id"] == event.id
    assert problems["document"]["ids"] == {"context_id": "chat-1", "kind": "plan", "revision": 1}


def test_export_shows_damaged_records_as_stored(setup: Setup) -> None:
    with Journal.open_sqlite(setup.db) as journal:
        call = journal.list_calls(setup.done)[0]
        event = journal.list_events(run_id=setup.done)[0]
    conn = sqlite3.connect(setup.db)
    with conn:
        conn.execute("UPDATE calls SET result = '{\"ok\":' WHERE id = ?", (call.id,))
        conn.execute("UPDATE events SET payload = '{}' WHERE id = ?", (event.id,))
    conn.close()
    result = setup.cli("export", setup.done)
    assert result.code == 0, result.err
    records = [json.loads(line) for line in result.out.splitlines()]
    (bad_call,) = [r for r in records if r.get("damaged") and r["type"] == "call"]
    assert bad_call["id"] == call.id and bad_call["damaged"][0]["reason"] == "undecodable"
    (bad_event,) = [r for r in records if r.get("damaged") and r["type"] == "event"]
    assert bad_event["id"] == event.id and bad_event["payload"] == {}
