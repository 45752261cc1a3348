"""The three systems bench/peers.py compares, each behind the same three measurements.

Run by peers.py in a child process per system (``peers.py --worker NAME``), so that one
framework's background threads never run while another is measured. Each system:

- ``single(steps)``: one run of ``steps`` durable steps; each step's output is one
  ~200-byte message and the run carries a constant 20-message context;
- ``concurrent(runs, steps)``: ``runs`` runs at once (threads), the same steps;
- ``growing(steps)``: one run whose history grows by that message every step; the stored
  bytes are read (read-only, from a separate connection) after 10 % and 55 % of the steps
  and at the end, so bytes per step can be compared between the two halves.

A step's latency is what the framework pays per step: ours, ``record_intent`` +
``commit_result`` with a checkpoint; DBOS, the call of a ``@DBOS.step``; LangGraph, the
time from one node entry to the next (the node, its writes and its checkpoint).
In ``single`` and ``growing`` a floor commit is taken right before each step, outside its
timing (LangGraph: inside the node, subtracted), so the floor and the steps share the
disk's weather. Commits per step are counted on a separate short stretch with an SQLite
trace callback (ours: the group-commit writer's transaction count), so counting costs
nothing measured.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import _common

DIGEST = hashlib.sha256(b"peers").hexdigest()
CONTEXT = [{"role": "user", "content": f"{i}:{_common.MESSAGE}"} for i in range(20)]
COUNT_STEPS = 20  # steps of the separate stretch whose commits are counted


def message(seq: int) -> dict[str, str]:
    return {"role": "assistant", "content": f"{seq}:{_common.MESSAGE}"}


def _marks(steps: int) -> tuple[int, int]:
    """Where bytes are read: after the warm-up and at the middle of the measured steps."""
    warmup = max(steps // 10, 1)
    return warmup, warmup + (steps - warmup) // 2


def quadratic_growth(steps: int) -> float:
    """The growth (bytes per step, 2nd half over 1st) of a store that writes the whole
    history every step: a step's bytes follow the history's length, so each half costs
    its mean length."""
    first, middle = _marks(steps)
    context = len(CONTEXT)
    return (context + (middle + steps) / 2) / (context + (first + middle) / 2)


class _Bytes:
    """Stored bytes of a database at the marks of a growing run."""

    def __init__(self, path: Path, steps: int) -> None:
        self.path = path
        self.marks = _marks(steps)
        self.at: dict[int, int] = {}

    def maybe(self, seq: int) -> None:
        """Call before step ``seq``: reads the bytes when ``seq`` is a mark."""
        if seq in self.marks:
            self.at[seq] = _common.stored_bytes(self.path, checkpoint=False)

    def result(self, steps: int) -> dict[str, Any]:
        first, middle = self.marks
        end = _common.stored_bytes(self.path, checkpoint=False)
        return {
            "bytes_first_half": self.at[middle] - self.at[first],
            "steps_first_half": middle - first,
            "bytes_second_half": end - self.at[middle],
            "steps_second_half": steps - middle,
            "bytes_total": end,
        }


def _starting_gate(runs: int, began: list[int]) -> threading.Barrier:
    """A barrier for ``runs`` runs and the caller; the clock starts when all arrived,
    before any of them goes on."""
    return threading.Barrier(runs + 1, action=lambda: began.append(time.perf_counter_ns()))


class _TraceCount:
    """Counts COMMIT statements on the connections handed to it, while switched on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: list[Any] = []
        self.commits = 0

    def add(self, conn: Any) -> None:
        with self._lock:
            self._conns.append(conn)

    def _trace(self, statement: str) -> None:
        if statement.lstrip().upper().startswith(("COMMIT", "END")):
            with self._lock:
                self.commits += 1

    def switch(self, on: bool) -> None:
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            conn.set_trace_callback(self._trace if on else None)


class _Floored:
    """A floor commit taken right before each step of ``single`` and ``growing`` (outside
    the step's timing), so the floor and the steps see the same disk weather."""

    floor: Callable[[], int] | None = None
    floor_ns: list[int]

    def _floor_sample(self) -> int:
        if self.floor is None:
            return 0
        sample = self.floor()
        self.floor_ns.append(sample)
        return sample

    def interleave(self, floor: Callable[[], int] | None) -> None:
        """Sample ``floor`` before each step from now on, into a new ``floor_ns``; None
        stops sampling and keeps the samples taken."""
        if floor is not None:
            self.floor_ns = []
        self.floor = floor


class Ours(_Floored):
    """Our journal, driven as the agent loop drives it (frozen history messages)."""

    name = "ours"
    settings = "WAL, synchronous=FULL (the journal's own settings)"

    def __init__(self, folder: Path, wal: str) -> None:
        _common.use_repo()
        import journal_concurrency

        self.folder = folder
        self.wal = wal
        self.jc = journal_concurrency

    def _open(self, name: str) -> Any:
        from durability import Journal

        path = self.folder / f"{name}.sqlite"
        holder = _common.open_wal_holder(path, self.wal)
        journal = Journal.open_sqlite(path)
        if holder is not None:
            holder.close()  # the journal's connections keep the WAL from here on
        return journal

    def _steps(
        self, journal: Any, run_id: str, steps: int, growing: bool, marks: _Bytes | None = None
    ) -> list[int]:
        from durability import CheckpointData

        history = [journal.freeze(m) for m in CONTEXT]
        latencies = []
        for seq in range(steps):
            if marks is not None:
                marks.maybe(seq)
            result = message(seq)
            if growing:
                history.append(journal.freeze(result))
            data = CheckpointData({"iteration": seq}, {"0": list(history)}, seq)
            self._floor_sample()
            start = time.perf_counter_ns()
            call = journal.record_intent(run_id, **self.jc.intent_args(seq))
            journal.commit_result(call.id, result, checkpoint=data)
            latencies.append(time.perf_counter_ns() - start)
        return latencies

    def single(self, steps: int) -> dict[str, Any]:
        journal = self._open("single")
        try:
            run = journal.admit("single", "single", DIGEST, message="bench").run
            latencies = self._steps(journal, run.id, steps, growing=False)
            self.interleave(None)
            count_run = journal.admit("count", "count", DIGEST, message="bench").run
            before = self.jc.writer_transactions(journal)
            self._steps(journal, count_run.id, COUNT_STEPS, growing=False)
            after = self.jc.writer_transactions(journal)
        finally:
            journal.close()
        commits = (after - before) / COUNT_STEPS if before is not None and after else None
        return {"latencies_ns": latencies, "commits_per_step": commits}

    def concurrent(self, runs: int, steps: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for variant in ("threads", "asyncio"):
            journal = self._open(f"concurrent-{variant}")
            try:
                if variant == "threads":
                    level = self.jc.threads_level(
                        journal, variant, runs, steps, "frozen", result_for=message
                    )
                else:
                    import asyncio

                    coro = self.jc.asyncio_level(
                        journal, variant, runs, steps, "frozen", result_for=message
                    )
                    level = asyncio.run(coro)
            finally:
                journal.close()
            latencies, elapsed_ns = level.latencies_ns, level.elapsed_ns
            out[variant] = {"latencies_ns": latencies, "elapsed_ns": elapsed_ns}
        return {**out["threads"], "asyncio": out["asyncio"]}

    def growing(self, steps: int) -> dict[str, Any]:
        journal = self._open("growing")
        marks = _Bytes(self.folder / "growing.sqlite", steps)
        try:
            run = journal.admit("growing", "growing", DIGEST, message="bench").run
            latencies = self._steps(journal, run.id, steps, growing=True, marks=marks)
            return {"latencies_ns": latencies, **marks.result(steps)}
        finally:
            journal.close()


class Dbos(_Floored):
    """DBOS Transact with its SQLite system database switched to WAL, synchronous=FULL."""

    name = "dbos"
    settings = "WAL (set on the file before launch), synchronous=FULL on every connection"

    def __init__(self, folder: Path, wal: str) -> None:
        import sqlalchemy as sa
        from dbos import DBOS
        from sqlalchemy import event

        self.folder = folder
        self.path = folder / "dbos.sqlite"
        self.count = _TraceCount()

        @event.listens_for(sa.engine.Engine, "connect")
        def durable_connection(dbapi_conn: Any, record: Any) -> None:
            dbapi_conn.execute("PRAGMA synchronous=FULL")
            self.count.add(dbapi_conn)

        # WAL is persistent in the file: DBOS's connections keep it. The holder keeps a
        # pregrown WAL alive until DBOS has connected.
        self.holder = _common.open_wal_holder(self.path, wal) or sqlite3.connect(self.path)
        self.holder.execute("PRAGMA journal_mode=WAL")
        self.latencies: list[int] = []
        self.ends: list[int] = []
        self.barrier: threading.Barrier | None = None
        self.bytes: _Bytes | None = None
        bench = self

        @DBOS.step()
        def step(seq: int) -> dict[str, str]:
            return message(seq)

        @DBOS.workflow()
        def run_steps(steps: int, context: list[dict[str, str]], growing: bool) -> int:
            history = list(context)
            if bench.barrier is not None:
                bench.barrier.wait()
            for seq in range(steps):
                if bench.bytes is not None:
                    bench.bytes.maybe(seq)
                bench._floor_sample()
                start = time.perf_counter_ns()
                result = step(seq)
                end = time.perf_counter_ns()
                bench.latencies.append(end - start)
                bench.ends.append(end)
                if growing:
                    history.append(result)
            return len(history)

        self.run_steps = run_steps
        DBOS(
            config={
                "name": "peers-bench",
                "system_database_url": f"sqlite:///{self.path}",
                "run_admin_server": False,
                "log_level": "WARNING",
            }
        )
        DBOS.launch()
        self.holder.close()

    def close(self) -> None:
        from dbos import DBOS

        DBOS.destroy()

    def single(self, steps: int) -> dict[str, Any]:
        self.latencies = []
        self.run_steps(steps, CONTEXT, False)
        latencies = self.latencies
        self.interleave(None)
        self.count.switch(True)
        before = self.count.commits
        self.latencies = []
        self.run_steps(COUNT_STEPS, CONTEXT, False)
        self.count.switch(False)
        # the count includes the workflow's own start and end records, spread over its steps
        commits = (self.count.commits - before) / COUNT_STEPS
        return {"latencies_ns": latencies, "commits_per_step": commits}

    def concurrent(self, runs: int, steps: int) -> dict[str, Any]:
        from dbos import DBOS

        self.latencies, self.ends = [], []
        began: list[int] = []
        self.barrier = _starting_gate(runs, began)
        handles = [DBOS.start_workflow(self.run_steps, steps, CONTEXT, False) for _ in range(runs)]
        self.barrier.wait()
        (start,) = began
        for handle in handles:
            handle.get_result()
        self.barrier = None
        return {"latencies_ns": self.latencies, "elapsed_ns": max(self.ends) - start}

    def growing(self, steps: int) -> dict[str, Any]:
        self.latencies = []
        self.bytes = _Bytes(self.path, steps)
        try:
            self.run_steps(steps, CONTEXT, True)
            return {"latencies_ns": self.latencies, **self.bytes.result(steps)}
        finally:
            self.bytes = None


class _Constant(TypedDict):
    """LangGraph state of the constant case: the context, the last output, counters."""

    context: list[dict[str, str]]
    last: dict[str, str]
    n: int
    left: int


class _Growing(TypedDict):
    """LangGraph state of the growing case: messages appended by the reducer."""

    messages: Annotated[list[dict[str, str]], operator.add]
    n: int
    left: int


class LangGraph(_Floored):
    """LangGraph's SqliteSaver (WAL, synchronous=FULL) under durability="sync"."""

    name = "langgraph"
    settings = "WAL (SqliteSaver sets it), synchronous=FULL on its connection, durability=sync"

    def __init__(self, folder: Path, wal: str) -> None:
        self.folder = folder
        self.wal = wal
        self.count = _TraceCount()
        self.stamps: dict[str, list[int]] = {}
        self.floors: dict[str, list[int]] = {}  # the floor sample in each node, per thread
        self.bytes: _Bytes | None = None
        self.barrier: threading.Barrier | None = None
        self.graphs: dict[str, Any] = {}
        self.conns: list[sqlite3.Connection] = []

    def _graph(self, name: str, growing: bool) -> Any:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.config import get_config
        from langgraph.graph import END, START, StateGraph

        path = self.folder / f"langgraph-{name}.sqlite"
        holder = _common.open_wal_holder(path, self.wal)
        conn = sqlite3.connect(path, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        if holder is not None:
            holder.close()
        self.conns.append(conn)
        self.count.add(conn)
        saver = SqliteSaver(conn)
        saver.setup()

        bench = self

        def step(state: dict[str, Any]) -> dict[str, Any]:
            thread = get_config()["configurable"]["thread_id"]
            n = state["n"]
            if n == 0 and bench.barrier is not None:
                bench.barrier.wait()
            if bench.bytes is not None:
                bench.bytes.maybe(n)
            bench.floors.setdefault(thread, []).append(bench._floor_sample())
            bench.stamps.setdefault(thread, []).append(time.perf_counter_ns())
            update: dict[str, Any] = {"n": n + 1, "left": state["left"] - 1}
            update["messages" if growing else "last"] = [message(n)] if growing else message(n)
            return update

        def route(state: dict[str, Any]) -> str:
            return "step" if state["left"] > 0 else END

        builder = StateGraph(_Growing if growing else _Constant)
        builder.add_node("step", step)
        builder.add_edge(START, "step")
        builder.add_conditional_edges("step", route)
        return builder.compile(checkpointer=saver), path

    def _invoke(self, graph: Any, thread: str, steps: int, growing: bool) -> int:
        """Run one thread to the end; returns when its last checkpoint is on disk."""
        state: dict[str, Any] = {"n": 0, "left": steps}
        state.update({"messages": list(CONTEXT)} if growing else {"context": CONTEXT})
        config = {"configurable": {"thread_id": thread}, "recursion_limit": steps + 10}
        graph.invoke(state, config, durability="sync")
        return time.perf_counter_ns()

    def _latencies(self, threads: list[str], ends: dict[str, int]) -> list[int]:
        """Node entry to the next node entry, less the next node's floor sample; the last
        step ends when invoke returned (its checkpoint is on disk)."""
        out = []
        for thread in threads:
            stamps = [*self.stamps[thread], ends[thread]]
            floors = [*self.floors[thread][1:], 0]
            pairs = itertools.pairwise(stamps)
            out.extend(b - a - f for (a, b), f in zip(pairs, floors, strict=True))
        return out

    def close(self) -> None:
        for conn in self.conns:
            conn.close()

    def single(self, steps: int) -> dict[str, Any]:
        graph, _ = self._graph("single", growing=False)
        end = self._invoke(graph, "single", steps, growing=False)
        latencies = self._latencies(["single"], {"single": end})
        self.interleave(None)
        self.count.switch(True)
        before = self.count.commits
        self._invoke(graph, "count", COUNT_STEPS, growing=False)
        self.count.switch(False)
        commits = (self.count.commits - before) / COUNT_STEPS
        return {"latencies_ns": latencies, "commits_per_step": commits}

    def concurrent(self, runs: int, steps: int) -> dict[str, Any]:
        graph, _ = self._graph("concurrent", growing=False)
        names = [f"run-{i}" for i in range(runs)]
        ends: dict[str, int] = {}
        began: list[int] = []
        self.barrier = _starting_gate(runs, began)

        def one(name: str) -> None:
            ends[name] = self._invoke(graph, name, steps, growing=False)

        workers = [threading.Thread(target=one, args=(n,)) for n in names]
        for worker in workers:
            worker.start()
        self.barrier.wait()
        (start,) = began
        for worker in workers:
            worker.join()
        self.barrier = None
        if len(ends) != runs:
            raise RuntimeError("a LangGraph run failed; see its traceback above")
        return {
            "latencies_ns": self._latencies(names, ends),
            "elapsed_ns": max(ends.values()) - start,
        }

    def growing(self, steps: int) -> dict[str, Any]:
        graph, path = self._graph("growing", growing=True)
        self.bytes = _Bytes(path, steps)
        try:
            end = self._invoke(graph, "growing", steps, growing=True)
            return {
                "latencies_ns": self._latencies(["growing"], {"growing": end}),
                **self.bytes.result(steps),
            }
        finally:
            self.bytes = None


SYSTEMS: dict[str, type] = {"ours": Ours, "dbos": Dbos, "langgraph": LangGraph}
