"""A bare shared worker for the multi-host tests: a journal with a worker id, driven by
JSON lines on stdin, answering JSON lines on stdout. It runs inside a network namespace
and reaches PostgreSQL over its veth link (tests/support/netns.py).

    python -m tests.multihost._claimer WORKER_ID SCHEMA LEASE_SECONDS   (DSN in A0_TEST_DSN)

Commands (one JSON object a line):
- ``{"op": "arm", "mode": "claim"|"sweep", "run_id": ...}`` answers ``{"armed": true}``,
  then waits for the line ``go`` and claims the run (or sweeps for one), answering
  ``{"won": [[run_id, token], ...]}``: two armed workers given ``go`` at once race.
- ``{"op": "status", "run_id": ..., "status": ...}``: a fenced write; answers ``{"ok": true}``
  or ``{"error": code, "reason": ...}``.
- ``{"op": "live", "run_id": ...}``: ``{"live": bool}``, whether this worker may start an
  effect for the run (its own clock, no database).
- ``{"op": "sweep_loop", "interval": s, "limit": n}``: sweeps until the line ``stop``,
  answering ``{"claimed": [...]}`` for each sweep that won runs, ``{"failed": code}`` for
  each sweep that failed, then ``{"stopped": true, "sweeps": n, "failures": n}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from durability import DurabilityError, Journal


def say(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def sweep_loop(journal: Journal, interval: float, limit: int) -> None:
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.readline()  # "stop" (or end of input)
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    sweeps = failures = 0
    while not stop.is_set():
        try:
            won = journal.cluster.sweep(limit=limit)
        except DurabilityError as exc:
            failures += 1
            say({"failed": exc.code})
        else:
            sweeps += 1
            if won:
                say({"claimed": [[c.run_id, c.token] for c in won]})
        stop.wait(interval)
    say({"stopped": True, "sweeps": sweeps, "failures": failures})


def main() -> int:
    worker_id, schema, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])
    journal = Journal.open_postgres(
        os.environ["A0_TEST_DSN"],
        namespace=schema,
        worker_id=worker_id,
        lease_seconds=lease,
        pool_size=2,
        connect_timeout=2,
    )
    cluster = journal.cluster
    assert cluster is not None
    say({"ready": worker_id})
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "arm":
            say({"armed": True})
            if sys.stdin.readline().strip() != "go":
                return 2
            if command["mode"] == "sweep":
                claims = cluster.sweep(limit=1)
            else:
                one = cluster.claim(command["run_id"])
                claims = [] if one is None else [one]
            say({"won": [[c.run_id, c.token] for c in claims]})
        elif op == "status":
            try:
                journal.set_run_status(command["run_id"], command["status"])
            except DurabilityError as exc:
                say({"error": exc.code, "reason": exc.fields.get("reason")})
            else:
                say({"ok": True})
        elif op == "live":
            say({"live": cluster.is_live(command["run_id"])})
        elif op == "sweep_loop":
            sweep_loop(journal, float(command["interval"]), int(command["limit"]))
        elif op == "quit":
            break
    journal.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
