"""A process that journals as fast as it can and prints an ack line after each call returns.

Two modes (the crash test kills the journaling process with SIGKILL at random moments):

  python _crash_child.py --once DB SEED   one life in this process
  python _crash_child.py --serve DB       fork server: imports the journal once; for each
                                          "life SEED" line on stdin, forks a fresh child
                                          that opens the journal and journals until killed,
                                          then prints "reaped PID STATUS" when it is gone.

Every line goes to fd 1 with one os.write (atomic on a pipe), so a kill never leaves half
a line. Ack lines are JSON: {"op": ..., ...} with everything needed to check the row.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from durability.journal import Journal
from durability.records import CheckpointData


def say(line: str) -> None:
    data = (line + "\n").encode("utf-8")
    if len(data) > 4000:  # PIPE_BUF keeps shorter writes atomic
        raise ValueError("ack line too long")
    os.write(1, data)


def ack(**fields: object) -> None:
    say(json.dumps(fields, sort_keys=True, separators=(",", ":")))


class Life:
    def __init__(self, db: str, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.journal = Journal.open_sqlite(db)
        self.runs: dict[str, dict] = {}  # run id -> {"seq", "open": call id | None, "history"}
        self.counter = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.seed}-{self.counter}"

    def admit(self) -> None:
        context_id, input_id = self.name("chat"), self.name("input")
        content = {"text": f"hello {input_id}", "n": self.counter}
        content_digest = hashlib.sha256(json.dumps(content).encode()).hexdigest()
        admission = self.journal.admit(context_id, input_id, content_digest, message=content)
        run_id = admission.run.id
        self.runs[run_id] = {"seq": 0, "open": None, "history": []}
        ack(
            op="admit",
            run_id=run_id,
            context_id=context_id,
            input_id=input_id,
            digest=content_digest,
        )

    def intent(self, run_id: str) -> None:
        run = self.runs[run_id]
        seq = run["seq"]
        kind = self.rng.choice(["tool", "model"])
        args = {"n": seq, "pad": "x" * self.rng.randrange(0, 300)}
        call = self.journal.record_intent(
            run_id, agent_no=0, seq=seq, kind=kind, name="noop", args=args, policy="never"
        )
        run["open"] = call.id
        ack(op="intent", call_id=call.id, run_id=run_id, seq=seq, kind=kind, args=args)

    def result(self, run_id: str, with_checkpoint: bool) -> None:
        run = self.runs[run_id]
        call_id, seq = run["open"], run["seq"]
        result = {"ok": seq, "out": "y" * self.rng.randrange(0, 300)}
        checkpoint = None
        if with_checkpoint:
            run["history"].append({"role": "assistant", "content": f"step {seq} of {run_id}"})
            checkpoint = CheckpointData(
                state={"seq": seq}, histories={"0": list(run["history"])}, seq=seq
            )
        self.journal.commit_result(call_id, result, checkpoint=checkpoint)
        run["open"], run["seq"] = None, seq + 1
        ack(op="result", call_id=call_id, result=result)
        if checkpoint is not None:
            self.acked_checkpoint(run_id)

    def checkpoint(self, run_id: str) -> None:
        run = self.runs[run_id]
        run["history"].append({"role": "user", "content": f"note {self.counter} {run_id}"})
        self.counter += 1
        ref = self.journal.write_checkpoint(
            run_id,
            CheckpointData(
                state={"seq": run["seq"], "c": self.counter},
                histories={"0": list(run["history"])},
                seq=None,
            ),
        )
        ack(
            op="checkpoint",
            id=ref.id,
            run_id=run_id,
            digest=ref.digest,
            length=len(run["history"]),
            last=run["history"][-1],
        )

    def acked_checkpoint(self, run_id: str) -> None:
        row = self.journal.latest_checkpoint(run_id)
        assert row is not None
        history = self.runs[run_id]["history"]
        ack(
            op="checkpoint",
            id=row.id,
            run_id=run_id,
            digest=row.digest,
            length=len(history),
            last=history[-1],
        )

    def end(self, run_id: str) -> None:
        status = self.rng.choice(["completed", "stopped", "failed"])
        self.journal.set_run_status(run_id, status)
        del self.runs[run_id]
        ack(op="end", run_id=run_id, status=status)

    def step(self) -> None:
        if len(self.runs) < 2 or self.rng.random() < 0.05:
            self.admit()
            return
        run_id = self.rng.choice(sorted(self.runs))
        run = self.runs[run_id]
        roll = self.rng.random()
        if run["open"] is not None:
            self.result(run_id, with_checkpoint=roll < 0.7)
        elif roll < 0.6:
            self.intent(run_id)
        elif roll < 0.8:
            self.checkpoint(run_id)
        else:
            self.end(run_id)

    def forever(self) -> None:
        say("opened")
        while True:
            self.step()


def once(db: str, seed: int) -> None:
    say(f"pid {os.getpid()}")
    Life(db, seed).forever()


def serve(db: str) -> None:
    say("ready")
    for line in sys.stdin:
        command = line.split()
        if command[:1] != ["life"]:
            say(f"unknown {line.strip()}")
            continue
        pid = os.fork()
        if pid == 0:
            try:
                once(db, int(command[1]))
            finally:
                os._exit(3)
        _, status = os.waitpid(pid, 0)
        say(f"reaped {pid} {status}")


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        once(sys.argv[2], int(sys.argv[3]))
