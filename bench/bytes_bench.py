"""A full turn through the HTTP API of a real server: start-up, idle memory, turn latency
and the bytes each turn writes to disk (issue #24, goal 7).

One run_ui.py (scripted model of tests/support/model_server.py, one-step turns: the model
answers with the ``response`` tool) is timed from process start to ``/api/health`` and its
idle resident memory read; then ``--turns`` new-chat turns (``/api/api_message`` without a
chat) and as many same-chat turns (one chat, growing) are sent one at a time. For each
turn:

- latency: the request until its answer,
- bytes written: the server process's ``write_bytes`` in ``/proc/<pid>/io`` (what it
  dirtied in the page cache for the disk, counted in 4 KiB pages) from before the request
  until the process is quiet again (no CPU and no bytes for 0.3 s: a deferred write lands
  after the answer),
- what the turn added to the journal's tables (blob bytes, checkpoint bodies, calls),
  read from a read-only connection.

Then the breakdown: the same turns again with ``strace`` attached to every thread of the
server, counting the bytes of each write call by file: the WAL (``journal.sqlite-wal``),
the database file (what WAL checkpoints copy back), anything else; and the fsyncs (one
per commit on the WAL). ``strace`` slows the server, so its latencies are not reported.

    .venv/bin/python bench/bytes_bench.py [--turns N] [--repeat N] [--no-strace]
        [--dir PATH] [--source] [--json] [--smoke]

Each set (``--repeat``) starts a new server on a new journal. Bytes per turn are the mean
of a set's turns (a WAL checkpoint lands in one turn of many and belongs to all of them;
the median turn is in the JSON too), latency the median; the table shows the median of the
sets. Prints a table, then one JSON document (the last line of output).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common
from _server_process import TOKEN, ServerProcess, use_bytecode, warm_up

_common.use_repo()

import httpx  # noqa: E402

from tests.support.model_server import ScriptedModel  # noqa: E402

GOAL_NEW_KIB = 100
GOAL_SAME_KIB = 120
QUIET_S = 0.3
WRITE_CALL = re.compile(
    r"^\d+\s+(?P<call>pwrite64|write|pwritev2?|writev)\((?P<fd>\d+)<(?P<path>[^>]*)>.*\)\s+="
    r"\s+(?P<n>\d+)"
)
SYNC_CALL = re.compile(r"^\d+\s+(?P<call>fsync|fdatasync)\((?P<fd>\d+)<(?P<path>[^>]*)>")


def responder(body: dict[str, Any]) -> dict[str, Any]:
    """Every turn is one step: the model answers with the response tool."""
    return {
        "thoughts": ["answer"],
        "headline": "answer",
        "tool_name": "response",
        "tool_args": {"text": "the answer: " + _common.MESSAGE},
    }


def journal_path(usr: Path) -> Path:
    return usr / "durability" / "journal.sqlite"


def write_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise RuntimeError("no write_bytes in /proc/<pid>/io")


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wait_quiet(pid: int, deadline: float) -> int:
    """write_bytes once the process used no CPU and wrote nothing for QUIET_S."""
    previous = (_cpu_ticks(pid), write_bytes(pid))
    while time.monotonic() < deadline:
        time.sleep(QUIET_S)  # the quiet window being observed, not a synchronisation
        now = (_cpu_ticks(pid), write_bytes(pid))
        if now == previous:
            break
        previous = now
    return previous[1]


def table_sizes(path: Path) -> dict[str, int]:
    """What the journal's tables hold (bytes of payload and rows), read-only."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        blobs = conn.execute("SELECT count(*), total(length(data)) FROM blobs").fetchone()
        checkpoints = conn.execute(
            "SELECT count(*), total(length(body)) FROM checkpoints"
        ).fetchone()
        calls = conn.execute(
            "SELECT count(*), total(length(args) + ifnull(length(result), 0)) FROM calls"
        ).fetchone()
        events = conn.execute("SELECT count(*), total(length(payload)) FROM events").fetchone()
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    finally:
        conn.close()
    return {
        "blob_rows": int(blobs[0]),
        "blob_bytes": int(blobs[1]),
        "checkpoint_rows": int(checkpoints[0]),
        "checkpoint_bytes": int(checkpoints[1]),
        "call_rows": int(calls[0]),
        "call_bytes": int(calls[1]),
        "event_rows": int(events[0]),
        "event_bytes": int(events[1]),
        "db_pages": int(pages),
    }


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


class Turns:
    """Sends turns to one server and measures each."""

    def __init__(self, server: ServerProcess) -> None:
        assert server.process is not None
        self.server = server
        self.pid = server.process.pid
        self.client = httpx.Client(base_url=server.url, timeout=120)
        self.chat = ""

    def close(self) -> None:
        self.client.close()

    def turn(self, index: int, same_chat: bool) -> dict[str, Any]:
        path = journal_path(self.server.usr)
        tables_before = table_sizes(path)
        before = wait_quiet(self.pid, time.monotonic() + 10)
        body: dict[str, Any] = {"message": f"question {index}: {_common.MESSAGE}"}
        if same_chat and self.chat:
            body["context_id"] = self.chat
        start = time.perf_counter()
        response = self.client.post("/api/api_message", json=body, headers={"X-API-KEY": TOKEN})
        latency = time.perf_counter() - start
        if response.status_code != 200 or response.json().get("status") != "completed":
            raise RuntimeError(f"turn failed: {response.status_code} {response.text[:500]}")
        if same_chat and not self.chat:
            self.chat = response.json()["context_id"]
        after = wait_quiet(self.pid, time.monotonic() + 10)
        tables = _delta(table_sizes(path), tables_before)
        return {"latency_s": latency, "write_bytes": after - before, "tables": tables}


def traced(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """strace on every thread of ``pid`` (and threads started later), write calls by file."""
    tasks = sorted(os.listdir(f"/proc/{pid}/task"))
    command = ["strace", "-f", "-qq", "-y", "-s", "0", "-o", str(out)]
    command += ["-e", "trace=write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync"]
    for task in tasks:
        command += ["-p", task]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def attached(trace: Path, deadline: float) -> None:
    """strace prints nothing on attach with -qq: wait until the file exists."""
    while not trace.exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # polling for strace's output file
    time.sleep(0.2)  # strace attaches thread by thread after opening its output


def breakdown(lines: list[str], journal: Path) -> dict[str, int]:
    """Bytes of write calls and fsyncs by file: WAL, database file, other."""
    wal, db = f"{journal}-wal", str(journal)
    out = {"wal_bytes": 0, "db_bytes": 0, "other_bytes": 0, "wal_syncs": 0, "other_syncs": 0}
    out["wal_writes"] = 0
    for line in lines:
        match = WRITE_CALL.match(line)
        if match:
            n, path = int(match["n"]), match["path"]
            if path == wal:
                out["wal_bytes"] += n
                out["wal_writes"] += 1
            elif path == db:
                out["db_bytes"] += n
            elif not path.startswith(("socket:", "pipe:", "anon_inode:", "/dev/")):
                out["other_bytes"] += n
            continue
        match = SYNC_CALL.match(line)
        if match:
            out["wal_syncs" if match["path"] == wal else "other_syncs"] += 1
    return out


def traced_turns(turns: Turns, folder: Path, count: int, same_chat: bool) -> dict[str, Any]:
    trace = folder / f"strace-{'same' if same_chat else 'new'}.txt"
    trace.unlink(missing_ok=True)
    wait_quiet(turns.pid, time.monotonic() + 10)
    tracer = traced(turns.pid, trace)
    try:
        attached(trace, time.monotonic() + 10)
        rows = [turns.turn(1000 + i, same_chat) for i in range(count)]
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(30)
    split = breakdown(
        trace.read_text(errors="replace").splitlines(), journal_path(turns.server.usr)
    )
    trace.unlink(missing_ok=True)
    per_turn = {k: v / count for k, v in split.items()}
    per_turn["write_bytes"] = statistics.fmean(r["write_bytes"] for r in rows)
    return per_turn


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    tables = {k: statistics.median(r["tables"][k] for r in rows) for k in rows[0]["tables"]}
    return {
        "turns": len(rows),
        "latency_ms": statistics.median(r["latency_s"] for r in rows) * 1000,
        # the mean: a WAL checkpoint lands in one turn of many, and belongs to all of them
        "write_kib": statistics.fmean(r["write_bytes"] for r in rows) / 1024,
        "write_kib_median": statistics.median(r["write_bytes"] for r in rows) / 1024,
        "write_kib_range": [
            min(r["write_bytes"] for r in rows) / 1024,
            max(r["write_bytes"] for r in rows) / 1024,
        ],
        "calls_per_turn": tables["call_rows"],
        "tables": tables,
    }


def one_set(folder: Path, model: ScriptedModel, turns: int, strace: bool) -> dict[str, Any]:
    usr = folder / "usr"
    server = ServerProcess(usr, model)
    start = server.start()
    try:
        health = server.wait_healthy(deadline=start + 60)
        rss = server.idle_rss_kib(deadline=time.monotonic() + 20)
        client = Turns(server)
        try:
            client.turn(0, same_chat=False)  # the first turn's imports are no steady turn
            new = [client.turn(1 + i, same_chat=False) for i in range(turns)]
            client.turn(100, same_chat=True)  # the chat the same-chat turns continue
            same = [client.turn(101 + i, same_chat=True) for i in range(turns)]
            result: dict[str, Any] = {
                "to_health_s": health - start,
                "idle_rss_mib": rss / 1024,
                "new_chat": _summary(new),
                "same_chat": _summary(same),
            }
            if strace and shutil.which("strace"):
                result["new_chat"]["traced"] = traced_turns(client, folder, turns, False)
                result["same_chat"]["traced"] = traced_turns(client, folder, turns, True)
            result["busy_rss_mib"] = server.idle_rss_kib(deadline=time.monotonic() + 20) / 1024
        finally:
            client.close()
    finally:
        server.stop()
    return result


def _median_of(sets: list[dict[str, Any]], *keys: str) -> float | None:
    values = []
    for one in sets:
        value: Any = one
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            values.append(value)
    return statistics.median(values) if values else None


def summarize(sets: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "to_health_s": _median_of(sets, "to_health_s"),
        "idle_rss_mib": _median_of(sets, "idle_rss_mib"),
        "busy_rss_mib": _median_of(sets, "busy_rss_mib"),
    }
    for kind in ("new_chat", "same_chat"):
        row: dict[str, Any] = {
            key: _median_of(sets, kind, key)
            for key in ("latency_ms", "write_kib", "calls_per_turn")
        }
        calls = row["calls_per_turn"] or 1
        row["write_kib_per_call"] = row["write_kib"] / calls if row["write_kib"] else None
        row["tables"] = {
            key: _median_of(sets, kind, "tables", key) for key in sets[0][kind]["tables"]
        }
        if "traced" in sets[0][kind]:
            row["traced"] = {
                key: _median_of(sets, kind, "traced", key) for key in sets[0][kind]["traced"]
            }
        out[kind] = row
    new, same = out["new_chat"]["write_kib"], out["same_chat"]["write_kib"]
    out["goals_kib"] = {"new_chat": GOAL_NEW_KIB, "same_chat": GOAL_SAME_KIB}
    out["meets_goal"] = new <= GOAL_NEW_KIB and same <= GOAL_SAME_KIB
    return out


def table(result: dict[str, Any]) -> str:
    s = result["summary"]
    lines = [
        f"start-up to /api/health {s['to_health_s']:.3f} s, idle RSS "
        f"{s['idle_rss_mib']:.1f} MiB (after the turns {s['busy_rss_mib']:.1f} MiB)"
    ]
    rows = [("turn (median of sets)", "latency ms", "KiB written", "calls", "KiB per call")]
    for kind in ("new_chat", "same_chat"):
        r = s[kind]
        rows.append(
            (
                kind.replace("_", "-"),
                f"{r['latency_ms']:.1f}",
                f"{r['write_kib']:.1f}",
                f"{r['calls_per_turn']:.0f}",
                f"{r['write_kib_per_call']:.1f}",
            )
        )
    lines.append(_common.render(rows))
    rows = [
        (
            "per turn",
            "blobs KiB (rows)",
            "checkpoint bodies KiB",
            "calls KiB",
            "WAL calls KiB (writes, fsyncs)",
            "db file KiB (checkpoint)",
            "other files KiB",
            "write_bytes traced KiB",
        )
    ]
    for kind in ("new_chat", "same_chat"):
        t, tr = s[kind]["tables"], s[kind].get("traced")
        traced_cols = (
            (
                f"{tr['wal_bytes'] / 1024:.1f} ({tr['wal_writes']:.1f}, {tr['wal_syncs']:.1f})",
                f"{tr['db_bytes'] / 1024:.1f}",
                f"{tr['other_bytes'] / 1024:.1f}",
                f"{tr['write_bytes'] / 1024:.1f}",
            )
            if tr
            else ("-", "-", "-", "-")
        )
        rows.append(
            (
                kind.replace("_", "-"),
                f"{t['blob_bytes'] / 1024:.1f} ({t['blob_rows']:.0f})",
                f"{t['checkpoint_bytes'] / 1024:.1f}",
                f"{t['call_bytes'] / 1024:.1f}",
                *traced_cols,
            )
        )
    lines.append(_common.render(rows))
    verdict = "meets" if s["meets_goal"] else "MISSES"
    lines.append(
        f"goal: <= {GOAL_NEW_KIB} KiB per new-chat turn, <= {GOAL_SAME_KIB} KiB per "
        f"same-chat turn: {verdict}"
    )
    lines.append(
        f"{result['sets']} sets of {result['turns']} turns each; load average "
        f"{result['environment']['load_average']}; {result['seconds']:.1f}s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=8, help="turns of each kind per set")
    parser.add_argument("--repeat", type=int, default=3, help="sets (a new server each)")
    parser.add_argument("--no-strace", action="store_true", help="skip the breakdown by file")
    parser.add_argument("--dir", type=Path, help="folder for the usr dirs (a temp dir)")
    parser.add_argument("--source", action="store_true", help="do not compile bytecode first")
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    parser.add_argument("--smoke", action="store_true", help="one set of 2 turns each")
    args = parser.parse_args(argv)
    if args.smoke:
        args.turns, args.repeat = 2, 1
    if args.turns < 1 or args.repeat < 1:
        parser.error("--turns and --repeat must be at least 1")
    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="bytes-bench-", dir=args.dir))
    result: dict[str, Any] = {
        "bench": "bytes",
        "environment": _common.environment(),
        "turns": args.turns,
        "sets": args.repeat,
        "bytecode": not args.source,
    }
    try:
        with ScriptedModel() as model:
            model.respond_with(responder)
            if not args.source:
                use_bytecode(folder / "pycache")
                warm_up(folder / "warm-up" / "usr", model)
            sets = [
                one_set(folder / f"set-{n}", model, args.turns, not args.no_strace)
                for n in range(args.repeat)
            ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result["runs"] = sets
    result["summary"] = summarize(sets)
    return _common.report(result, started, table, args.json)


if __name__ == "__main__":
    os.umask(0o077)
    raise SystemExit(main())
