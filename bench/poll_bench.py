"""The UI with a long chat: ``/api/poll`` of a chat of 2,000 log items (issue #24, goal 6).

A journal is seeded with one finished chat whose log holds ``--items`` items (agent 0 with
200 history messages) and ``--chats`` small chats beside it (the chat list every poll
returns); a real run_ui.py (scripted model) serves it. Through one keep-alive HTTP client
with a UI session (CSRF token):

- the first poll of the chat (``log_from`` 0: the whole log, as a page load asks for it),
- ``--polls`` polls with nothing new (``log_from`` = the version the last answer gave, as
  the UI polls while it shows the chat): latency median and p95, items and bytes sent,
- one turn in that chat (``/api/api_message``), then one poll from the version before it:
  the items it sends (only the new ones) against the log's length.

Goal: the no-news poll answers in at most 20 ms (median) and a poll sends only new items.

    .venv/bin/python bench/poll_bench.py [--items N] [--chats N] [--polls N] [--repeat N]
        [--dir PATH] [--source] [--json] [--smoke]

Each set (``--repeat``) starts a new server; the table shows the median of the sets.
Prints a table, then one JSON document (the last line of output).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common
from _journal_seed import seed_journal, seed_long_chat
from _server_process import TOKEN, ServerProcess, use_bytecode, warm_up

_common.use_repo()

import httpx  # noqa: E402

from tests.support.model_server import ScriptedModel  # noqa: E402

GOAL_MS = 20.0
LONG_CHAT = "long-chat"


def responder(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "thoughts": ["answer"],
        "headline": "answer",
        "tool_name": "response",
        "tool_args": {"text": "the answer: " + _common.MESSAGE},
    }


def journal_path(usr: Path) -> Path:
    return usr / "durability" / "journal.sqlite"


def _poll(client: httpx.Client, log_from: int) -> tuple[float, dict[str, Any], int]:
    start = time.perf_counter()
    response = client.post("/api/poll", json={"context": LONG_CHAT, "log_from": log_from})
    elapsed = time.perf_counter() - start
    if response.status_code != 200:
        raise RuntimeError(f"poll failed: {response.status_code} {response.text[:500]}")
    return elapsed, response.json(), len(response.content)


def one_set(usr: Path, model: ScriptedModel, polls: int) -> dict[str, Any]:
    server = ServerProcess(usr, model)
    start = server.start()
    try:
        health = server.wait_healthy(deadline=start + 120)
        # every chat is listed once the server answers: the idle ones from their summaries
        # (issue #24, round 3; before it, they were rebuilt in the background first)
        rebuilt = health
        with httpx.Client(base_url=server.url, timeout=60) as client:
            token = client.get("/api/csrf_token")
            token.raise_for_status()
            client.headers["X-CSRF-Token"] = token.json()["token"]
            first_s, _, first_bytes = _poll(client, 0)  # rebuilds the chat if not yet
            again_s, full, full_bytes = _poll(client, 0)  # the whole log, chat in memory
            version = int(full["log_version"])
            times, sent, sizes = [], 0, []
            for _ in range(polls):
                elapsed, body, size = _poll(client, version)
                times.append(elapsed)
                sent += len(body["logs"])
                sizes.append(size)
                version = int(body["log_version"])
            before = version
            turn = client.post(
                "/api/api_message",
                json={"message": "one more question", "context_id": LONG_CHAT},
                headers={"X-API-KEY": TOKEN},
                timeout=120,
            )
            if turn.status_code != 200 or turn.json().get("status") != "completed":
                raise RuntimeError(f"turn failed: {turn.status_code} {turn.text[:500]}")
            _, after, after_bytes = _poll(client, before)
            _, whole, _ = _poll(client, 0)
    finally:
        server.stop()
    ordered = sorted(times)
    return {
        "to_health_s": health - start,
        "to_all_chats_s": rebuilt - start,
        "log_items": len(full["logs"]),
        "first_poll_ms": first_s * 1000,
        "full_poll_ms": again_s * 1000,
        "full_poll_bytes": full_bytes,
        "first_poll_bytes": first_bytes,
        "chats_listed": len(full["contexts"]),
        "idle_poll_ms": {
            "median": statistics.median(ordered) * 1000,
            "p95": _common.percentile(ordered, 0.95) * 1000,
            "count": len(ordered),
        },
        "idle_poll_items_sent": sent,
        "idle_poll_bytes_median": statistics.median(sizes) if sizes else 0,
        "after_turn": {
            "items_sent": len(after["logs"]),
            "bytes": after_bytes,
            "log_items": len(whole["logs"]),
            "new_items": len(whole["logs"]) - len(full["logs"]),
        },
    }


def summarize(sets: list[dict[str, Any]]) -> dict[str, Any]:
    def med(get: Any) -> float:
        return float(statistics.median(get(s) for s in sets))

    idle = med(lambda s: s["idle_poll_ms"]["median"])
    only_new = all(
        s["idle_poll_items_sent"] == 0
        and s["after_turn"]["items_sent"] <= s["after_turn"]["new_items"] + 1
        for s in sets
    )
    return {
        "idle_poll_ms_median": idle,
        "idle_poll_ms_p95": med(lambda s: s["idle_poll_ms"]["p95"]),
        "idle_poll_bytes": med(lambda s: s["idle_poll_bytes_median"]),
        "full_poll_ms": med(lambda s: s["full_poll_ms"]),
        "full_poll_bytes": med(lambda s: s["full_poll_bytes"]),
        "first_poll_ms": med(lambda s: s["first_poll_ms"]),
        "after_turn_items_sent": med(lambda s: s["after_turn"]["items_sent"]),
        "after_turn_bytes": med(lambda s: s["after_turn"]["bytes"]),
        "log_items": med(lambda s: s["log_items"]),
        "only_new_items_sent": only_new,
        "goal_ms": GOAL_MS,
        "meets_goal": idle <= GOAL_MS and only_new,
    }


def table(result: dict[str, Any]) -> str:
    s = result["summary"]
    rows = [
        ("poll of the long chat (median of sets)", "ms", "items sent", "bytes"),
        ("first poll after start (rebuild + whole log)", f"{s['first_poll_ms']:.1f}", "", ""),
        (
            "whole log (log_from 0)",
            f"{s['full_poll_ms']:.1f}",
            f"{s['log_items']:.0f}",
            f"{s['full_poll_bytes']:.0f}",
        ),
        (
            "nothing new: median / p95",
            f"{s['idle_poll_ms_median']:.1f} / {s['idle_poll_ms_p95']:.1f}",
            "0" if s["only_new_items_sent"] else "some",
            f"{s['idle_poll_bytes']:.0f}",
        ),
        (
            "after one turn (from the version before it)",
            "",
            f"{s['after_turn_items_sent']:.0f}",
            f"{s['after_turn_bytes']:.0f}",
        ),
    ]
    verdict = "meets" if s["meets_goal"] else "MISSES"
    return "\n".join(
        [
            _common.render(rows),
            f"goal: no-news poll <= {GOAL_MS} ms median, only new items sent: {verdict}",
            f"{result['sets']} sets, {result['polls']} polls each, {result['chats']} other chats;"
            f" load average {result['environment']['load_average']}; {result['seconds']:.1f}s",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000, help="log items of the long chat")
    parser.add_argument("--chats", type=int, default=20, help="other (small) chats")
    parser.add_argument("--polls", type=int, default=200, help="no-news polls per set")
    parser.add_argument("--repeat", type=int, default=3, help="sets (a new server each)")
    parser.add_argument("--dir", type=Path, help="folder for the usr dirs (a temp dir)")
    parser.add_argument("--source", action="store_true", help="do not compile bytecode first")
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    parser.add_argument("--smoke", action="store_true", help="200 items, 20 polls, one set")
    args = parser.parse_args(argv)
    if args.smoke:
        args.items, args.chats, args.polls, args.repeat = 200, 2, 20, 1
    if min(args.items, args.polls, args.repeat) < 1 or args.chats < 0:
        parser.error("--items, --polls and --repeat must be at least 1")
    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="poll-bench-", dir=args.dir))
    result: dict[str, Any] = {
        "bench": "poll",
        "environment": _common.environment(),
        "items": args.items,
        "chats": args.chats,
        "polls": args.polls,
        "sets": args.repeat,
        "bytecode": not args.source,
    }
    try:
        seed = journal_path(folder / "seed" / "usr")
        result["seed_seconds"] = seed_journal(
            seed, args.chats, 4, extra=lambda j: seed_long_chat(j, LONG_CHAT, args.items)
        )
        with ScriptedModel() as model:
            model.respond_with(responder)
            if not args.source:
                use_bytecode(folder / "pycache")
                warm_up(folder / "warm-up" / "usr", model)
            sets = []
            for n in range(args.repeat):
                usr = folder / f"set-{n}" / "usr"
                journal_path(usr).parent.mkdir(parents=True, mode=0o700)
                shutil.copyfile(seed, journal_path(usr))
                sets.append(one_set(usr, model, args.polls))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result["runs"] = sets
    result["summary"] = summarize(sets)
    return _common.report(result, started, table, args.json)


if __name__ == "__main__":
    os.umask(0o077)
    raise SystemExit(main())
