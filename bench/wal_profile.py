"""Which pages a same-chat turn writes to the WAL, by table and commit (issue #24, goal 7).

One run_ui.py (the scripted model of bench/bytes_bench.py: one-step turns) gets
``--warm`` turns in one chat; then each of ``--turns`` more is profiled: the WAL's frames
before and after the turn are read back from the file (a frame header names its page and
marks a commit), and each new frame's page is mapped to the table or index that owns it
with SQLite's ``dbstat``. Prints, per profiled turn (``--detail``) or for all of them: the
frames (one page each) per commit and per table, the distinct pages (what a WAL checkpoint
copies back into the file), and ``write_bytes`` as bytes_bench.py measures it.

    .venv/bin/python bench/wal_profile.py [--warm N] [--turns N] [--detail] [--smoke]

A turn whose WAL was restarted meanwhile (a checkpoint reset it) is left out and counted.
Prints a table, then one JSON document (the last line of output).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sqlite3
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common
import bytes_bench
from _server_process import ServerProcess

_common.use_repo()

from tests.support.model_server import ScriptedModel  # noqa: E402

WAL_HEADER = 32
FRAME_HEADER = 24


def wal_frames(wal: Path) -> tuple[bytes, list[tuple[int, bool]]]:
    """The WAL's salt and its valid frames as (page number, ends a commit)."""
    data = wal.read_bytes() if wal.exists() else b""
    if len(data) < WAL_HEADER:
        return b"", []
    page_size = struct.unpack(">I", data[8:12])[0]
    salt = data[16:24]
    frames, pos = [], WAL_HEADER
    while pos + FRAME_HEADER + page_size <= len(data) and data[pos + 8 : pos + 16] == salt:
        page, commit = struct.unpack(">II", data[pos : pos + 8])
        frames.append((page, commit != 0))
        pos += FRAME_HEADER + page_size
    return salt, frames


def page_owners(db: Path) -> dict[int, str]:
    """Page number -> the table or index owning it (page 1 is ``sqlite_schema``'s)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return {int(p): str(n) for n, p in conn.execute("SELECT name, pageno FROM dbstat")}
    finally:
        conn.close()


def profile_turn(turns: bytes_bench.Turns, db: Path, index: int) -> dict[str, Any] | None:
    wal = Path(f"{db}-wal")
    bytes_bench.wait_quiet(turns.pid, time.monotonic() + 10)
    salt, before = wal_frames(wal)
    row = turns.turn(index, same_chat=True)
    salt_after, after = wal_frames(wal)
    if salt_after != salt or len(after) < len(before):
        return None  # the WAL was reset during the turn
    owners = page_owners(db)
    commits: list[collections.Counter[str]] = []
    current: collections.Counter[str] = collections.Counter()
    pages = set()
    for page, commit in after[len(before) :]:
        current[owners.get(page, "(free or new)")] += 1
        pages.add(page)
        if commit:
            commits.append(current)
            current = collections.Counter()
    return {
        "frames": len(after) - len(before),
        "distinct_pages": len(pages),
        "commits": [dict(c.most_common()) for c in commits],
        "write_kib": row["write_bytes"] / 1024,
        "blob_rows": row["tables"]["blob_rows"],
        "checkpoint_bytes": row["tables"]["checkpoint_bytes"],
    }


def run(warm: int, count: int, folder: Path) -> dict[str, Any]:
    with ScriptedModel() as model:
        model.respond_with(bytes_bench.responder)
        server = ServerProcess(folder / "usr", model)
        start = server.start()
        try:
            server.wait_healthy(deadline=start + 60)
            turns = bytes_bench.Turns(server)
            try:
                for i in range(warm):
                    turns.turn(i, same_chat=True)
                db = bytes_bench.journal_path(server.usr)
                profiled = [profile_turn(turns, db, 1000 + i) for i in range(count)]
            finally:
                turns.close()
        finally:
            server.stop()
    kept = [p for p in profiled if p is not None]
    tables: collections.Counter[str] = collections.Counter()
    for p in kept:
        for commit in p["commits"]:
            tables.update(commit)
    n = max(1, len(kept))
    return {
        "bench": "wal_profile",
        "environment": _common.environment(),
        "warm_turns": warm,
        "turns": len(kept),
        "skipped_wal_reset": len(profiled) - len(kept),
        "frames_per_turn": sum(p["frames"] for p in kept) / n,
        "commits_per_turn": sum(len(p["commits"]) for p in kept) / n,
        "distinct_pages_per_turn": sum(p["distinct_pages"] for p in kept) / n,
        "write_kib_per_turn": sum(p["write_kib"] for p in kept) / n,
        "blob_rows_per_turn": sum(p["blob_rows"] for p in kept) / n,
        "checkpoint_bytes_per_turn": sum(p["checkpoint_bytes"] for p in kept) / n,
        "frames_per_turn_by_table": {k: v / n for k, v in tables.most_common()},
        "profiles": kept,
    }


def table(result: dict[str, Any], detail: bool) -> str:
    lines = [
        f"{result['turns']} same-chat turns after {result['warm_turns']} "
        f"(skipped, WAL reset: {result['skipped_wal_reset']}); per turn: "
        f"{result['frames_per_turn']:.1f} frames in {result['commits_per_turn']:.1f} commits, "
        f"{result['distinct_pages_per_turn']:.1f} distinct pages, "
        f"write_bytes {result['write_kib_per_turn']:.1f} KiB, "
        f"{result['blob_rows_per_turn']:.1f} blob rows, "
        f"checkpoint bodies {result['checkpoint_bytes_per_turn'] / 1024:.1f} KiB"
    ]
    rows = [("table or index", "frames per turn")]
    rows += [(k, f"{v:.1f}") for k, v in result["frames_per_turn_by_table"].items()]
    lines.append(_common.render(rows))
    if detail:
        for i, p in enumerate(result["profiles"]):
            lines.append(f"turn {i}: {p['frames']} frames, {p['write_kib']:.0f} KiB")
            lines += [f"  commit {c}: {commit}" for c, commit in enumerate(p["commits"])]
    lines.append(f"load average {result['environment']['load_average']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=30, help="turns before profiling")
    parser.add_argument("--turns", type=int, default=10, help="turns profiled")
    parser.add_argument("--detail", action="store_true", help="each turn's commits")
    parser.add_argument("--dir", type=Path, help="folder for the usr dir (a temp dir)")
    parser.add_argument("--smoke", action="store_true", help="2 warm turns, 2 profiled")
    args = parser.parse_args()
    if args.smoke:
        args.warm, args.turns = 2, 2
    folder = Path(tempfile.mkdtemp(prefix="wal-profile-", dir=args.dir))
    try:
        result = run(args.warm, args.turns, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(table(result, args.detail))
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
