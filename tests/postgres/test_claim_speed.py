"""The cheaper fenced write and sweep of #24, against a real PostgreSQL: the fence is read
in the round trip of the write's first statement (pipeline mode), and a sweep that lost
its candidates to a concurrent sweeper looks again instead of coming back empty."""

from __future__ import annotations

import re
import threading

import psycopg
import pytest

from durability import CheckpointData, FencingLost
from durability.errors import CallNotFound, IntentMissing, RunNotFound
from durability.store._tables import claims as claims_table
from durability.store.postgres_tx import PostgresTx
from tests.postgres.conftest import sha, wait_for

pytestmark = pytest.mark.postgres


def statements_of(monkeypatch, action) -> list[str]:
    """The statements ``action`` sends, as the driver's cursors see them, with ``<wait>``
    where the client waits for the server's answers (a round trip): a statement outside
    pipeline mode, a fetch, sync or exit of a pipeline."""
    sent: list[str] = []
    execute_original, wait_original = psycopg.Cursor.execute, psycopg.Connection.wait

    def execute(self, query, params=None, **kwargs):
        sent.append(str(query))
        return execute_original(self, query, params, **kwargs)

    def wait(self, gen, *args, **kwargs):
        name = getattr(gen, "__name__", "")
        if name in ("_fetch_gen", "_sync_gen", "_exit_gen") or (
            name == "_execute_gen" and self._pipeline is None
        ):
            sent.append("<wait>")
        return wait_original(self, gen, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    monkeypatch.setattr(psycopg.Connection, "wait", wait)
    try:
        action()
    finally:
        monkeypatch.setattr(psycopg.Cursor, "execute", execute_original)
        monkeypatch.setattr(psycopg.Connection, "wait", wait_original)
    return sent


def test_a_fenced_intent_is_one_statement_and_two_round_trips(open_journal, monkeypatch):
    """Pipeline mode: BEGIN and the intent's server-side function (which locks the fence's
    run row, reads its token and the transaction's id, then writes; the run id an argument,
    not a literal) go out before the client first waits; COMMIT is the second round trip
    (before #24 round 4: a statement of its own for the id and the fence, three in all)."""
    w1 = open_journal("w1")
    run = w1.admit("chat", "in-1", sha("x")).run
    sent = statements_of(
        monkeypatch,
        lambda: w1.record_intent(
            run.id, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="hold"
        ),
    )
    assert len(sent) == 5 and sent.count("<wait>") == 2, sent
    assert sent[0].startswith("BEGIN") and "a0_intent_if_free(" in sent[1], sent
    assert run.id not in sent[1] and sent[2:] == ["<wait>", "COMMIT", "<wait>"], sent
    call = w1.list_calls(run.id)[0]
    assert call.state == "open" and call.seq == 0  # and it committed


def test_a_fenced_result_with_its_checkpoint_is_three_statements_and_round_trips(
    open_journal, monkeypatch
):
    """The result's function answers the transaction's id and the fence with the closed
    call; the checkpoint is the second statement, COMMIT the third (before: four
    statements, the id and the fence one of their own)."""
    w1 = open_journal("w1")
    run = w1.admit("chat", "in-1", sha("x")).run
    history = {"0": [{"role": "user", "content": "hi"}]}
    for seq in range(2):  # the chat's first checkpoint stores its messages; the next, not
        call = w1.record_intent(
            run.id, agent_no=0, seq=seq, kind="tool", name="t", args={}, policy="hold"
        )
        data = CheckpointData(state={"i": seq}, histories=history)
        if seq == 0:
            w1.commit_result(call.id, "r", checkpoint=data)
    sent = statements_of(monkeypatch, lambda: w1.commit_result(call.id, "r", checkpoint=data))
    statements = [s for s in sent if s != "<wait>"]
    assert len(statements) == 4 and sent.count("<wait>") == 3, sent
    assert statements[0].startswith("BEGIN") and "a0_close_open(" in statements[1], sent
    assert call.id not in statements[1] and "pg_current_xact_id" not in " ".join(sent), sent
    assert sent[2] == "<wait>" and sent[-2:] == ["COMMIT", "<wait>"], sent
    assert w1.get_call(call.id).state == "completed"
    assert w1.latest_checkpoint(run.id).state == {"i": 1}


def test_a_superseded_worker_s_intent_is_refused_and_nothing_of_it_committed(open_journal):
    w1, w2 = open_journal("w1"), open_journal("w2")
    run = w1.admit("chat", "in-1", sha("x")).run
    w1.record_intent(run.id, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="hold")
    version = w2.get_run(run.id).version
    with psycopg.connect(w2.store.dsn.conninfo, autocommit=True) as conn:  # lease runs out
        conn.execute(
            f"UPDATE {w2.store.namespace}.claims SET expires_at = 0 WHERE run_id = %s",
            (run.id,),
        )
    assert w2.cluster.claim(run.id) is not None
    version = w2.get_run(run.id).version
    with pytest.raises(FencingLost) as info:
        w1.record_intent(run.id, agent_no=0, seq=1, kind="tool", name="t", args={}, policy="hold")
    assert info.value.reason == "superseded"
    assert [c.seq for c in w2.list_calls(run.id)] == [0]  # the function's insert rolled back
    assert w2.get_run(run.id).version == version


def test_the_folded_fence_still_refuses_a_superseded_worker(open_journal):
    w1, w2 = open_journal("w1"), open_journal("w2")
    run = w1.admit("chat", "in-1", sha("x")).run
    call = w1.record_intent(
        run.id, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="hold"
    )
    token = w1.cluster.get(run.id).token
    with psycopg.connect(w2.store.dsn.conninfo, autocommit=True) as conn:  # lease runs out
        conn.execute(
            f"UPDATE {w2.store.namespace}.claims SET expires_at = 0 WHERE run_id = %s",
            (run.id,),
        )
    assert w2.cluster.claim(run.id) is not None
    with pytest.raises(FencingLost) as info:
        w1.commit_result(call.id, "late")
    assert info.value.reason == "superseded" and info.value.held_token == token
    assert w2.get_call(call.id).state == "open"  # nothing of the late write committed


@pytest.mark.parametrize("odd", ["it's", "back\\slash", "x'; DROP TABLE runs; --"])
def test_ids_that_need_quoting_reach_the_fence_as_arguments(open_journal, odd):
    w1 = open_journal("w1")
    run = w1.admit("chat", "in-1", sha("x")).run
    with pytest.raises((IntentMissing, CallNotFound)):
        w1.commit_result(odd, "r")
    with pytest.raises(RunNotFound):
        w1.record_intent(odd, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="hold")
    assert w1.get_run(run.id).status == "active"  # and nothing else happened


def test_a_sweep_that_loses_its_candidates_looks_again(open_journal, monkeypatch):
    """The candidates a sweep locks may have been claimed by another worker after its
    statement's snapshot (PostgreSQL rechecks only the run's own row): their upsert is
    refused. Simulated here by a candidate lookup blind to live claims: the two oldest
    runs are held by w1, the sweep must still win the two free ones behind them."""
    w1, plain, w2 = open_journal("w1"), open_journal(), open_journal("w2")
    held_runs = [w1.admit(f"held-{i}", f"in-h{i}", sha(str(i))).run.id for i in range(2)]
    free_runs = [plain.admit(f"free-{i}", f"in-f{i}", sha(str(i))).run.id for i in range(2)]
    real_held = claims_table.held
    monkeypatch.setattr(
        claims_table,
        "held",
        lambda c, now=claims_table.NOW: "false" if c == "c" else real_held(c, now),
    )
    won = w2.cluster.sweep(limit=2)
    assert sorted(c.run_id for c in won) == sorted(free_runs)
    for run_id in held_runs:  # refused: still w1's, under the same token
        assert w1.cluster.owner(run_id).worker_id == "w1"
    tokens = [c.token for c in won]
    assert len(set(tokens)) == 2
    for claim in won:
        events = [e.payload for e in w2.list_events(run_id=claim.run_id) if e.type == "claim"]
        assert events == [{"worker_id": "w2", "token": claim.token, "previous": None}]


def test_a_sweep_is_two_round_trips_its_lookup_and_claims_one_statement(open_journal, monkeypatch):
    """#24 round 4: a sweep's lookup, its claims and the runs' fences are one statement
    sent with BEGIN; the claims' events go with COMMIT. Two round trips, one of them the
    commit's flush (before: four, the lookup, the claims and the events each waited for)."""
    plain, w2 = open_journal(), open_journal("w2", liveness=True)
    runs = [plain.admit(f"c{i}", f"in-{i}", sha(str(i))).run.id for i in range(3)]
    won: list = []
    sent = statements_of(monkeypatch, lambda: won.extend(w2.cluster.sweep(limit=2)))
    assert [c.run_id for c in won] == runs[:2], won  # the oldest first
    assert sent.count("<wait>") == 2, sent
    first = sent.index("<wait>")
    lookup = [s for s in sent[:first] if "SKIP LOCKED" in s]
    assert len(lookup) == 1 and "INSERT INTO claims" in lookup[0], sent
    assert "UPDATE runs SET fence" in lookup[0], sent
    rest = sent[first + 1 :]
    assert len(rest) == 3 and "INSERT INTO events" in rest[0], sent
    assert rest[1:] == ["COMMIT", "<wait>"], sent
    for claim in won:  # the events committed with the claims
        events = [e.payload for e in w2.list_events(run_id=claim.run_id) if e.type == "claim"]
        assert events == [{"worker_id": "w2", "token": claim.token, "previous": None}]
        assert w2.cluster.owner(claim.run_id).token == claim.token
    assert w2.cluster.owner(runs[2]) is None  # the third untouched


def test_a_sweeps_generic_plan_looks_its_own_claims_up_in_a_hashed_set(
    open_journal, postgres_server, pg_namespace
):
    """#24 round 4: the sweeper's own claims (its book, up to every run it holds) are
    named by token; under the generic plan PostgreSQL uses for a statement prepared after
    five runs, ``token = ANY($n)`` compared every claim not held with the whole book, one
    by one (a parameter's array is not hashed; a constant's is): a sweep of a dead
    worker's backlog cost twice main's server CPU once the merged statement's plan went
    generic. The book is now a hashed subquery. The generic plan is read with
    auto_explain, its LOG lines sent to this client."""
    plain = open_journal()
    plain.admit("chat", "in-1", sha("x"))
    w1 = open_journal("w1", liveness=True)
    w1.admit("chat-2", "in-2", sha("y"))
    mine = [c.token for c in w1.cluster.claims()]
    plans: list[str] = []
    with postgres_server.connect() as conn:
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        conn.execute(f"SET search_path TO {pg_namespace}")
        conn.execute("LOAD 'auto_explain'")
        for setting in (
            "auto_explain.log_min_duration = 0",
            "plan_cache_mode = force_generic_plan",
            "client_min_messages = log",
        ):
            conn.execute(f"SET {setting}")
        conn.prepare_threshold = 0  # prepared at once: the generic plan from the start
        with conn.transaction(force_rollback=True):
            won = PostgresTx(conn, locking=True).claims.sweep("w1", 30.0, 2, None, mine)
    assert [c.context_id for c in won] == ["chat"], won  # its own run left to its renewal
    swept = [p for p in plans if "SKIP LOCKED" in p]
    assert swept, plans
    for plan in swept:
        assert not re.search(r"token = ANY \(\(?\$\d+", plan), plan  # in the plan, not the text


#: The advisory lock a paused candidate lookup waits for.
PAUSE = 240_003
ACTIVE = "WHERE status = 'active'"


def test_a_sweep_skips_runs_claimed_after_its_snapshot(open_journal, postgres_server, monkeypatch):
    """#24 round 3: why one of four sweepers took 90% of a backlog. w2's candidate lookup
    takes its snapshot, then w1 claims the two oldest runs and commits, then w2's lookup
    goes on to lock rows. w2 must pass over w1's runs at the lock (their fence changed
    since its snapshot) and win the next two in that same lookup: on the old code it locked
    w1's runs (they looked free in its snapshot), the upsert refused them, and the lookup
    was lost (four such losses in a row and the sweep came back empty while runs were
    free)."""
    plain = open_journal()
    w1, w2 = open_journal("w1", liveness=True), open_journal("w2", liveness=True)
    runs = [plain.admit(f"c{i}", f"in-{i}", sha(str(i))).run.id for i in range(4)]
    lookups: list[str] = []
    original = psycopg.Cursor.execute
    paused = threading.Event()

    def execute(self, query, params=None, **kwargs):
        text = str(query)
        if paused.is_set() and "SKIP LOCKED" in text and ACTIVE in text:  # a sweep's lookup
            # wait for the test's lock after the statement's snapshot is taken
            query = text.replace(
                ACTIVE,
                f"WHERE (SELECT pg_advisory_xact_lock_shared({PAUSE})::text) IS NOT NULL"
                " AND status = 'active'",
                1,
            )
            lookups.append(query)
        return original(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    won2: list = []
    with postgres_server.connect() as gate:
        gate.execute("SELECT pg_advisory_lock(%s)", (PAUSE,))
        paused.set()
        sweeper = threading.Thread(target=lambda: won2.extend(w2.cluster.sweep(limit=2)))
        sweeper.start()
        wait_for(
            lambda: gate.execute(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted",
                (PAUSE,),
            ).fetchone(),
            what="w2's lookup waiting after its snapshot",
        )
        paused.clear()  # w1's own lookup runs unpaused
        won1 = w1.cluster.sweep(limit=2)
        paused.set()
        gate.execute("SELECT pg_advisory_unlock(%s)", (PAUSE,))
        sweeper.join(timeout=60)
    assert not sweeper.is_alive()
    assert len(won1) == 2 and len(won2) == 2
    assert sorted(c.run_id for c in won1 + won2) == sorted(runs)  # each run won once
    assert len(lookups) == 1, "the sweep lost a lookup to runs claimed after its snapshot"
    for claim in won1:  # untouched: still w1's, under its token
        owner = w1.cluster.owner(claim.run_id)
        assert owner.worker_id == "w1" and owner.token == claim.token


def test_a_sweep_leaves_its_own_claims_to_their_renewal_when_they_look_free(open_journal):
    """A sweeper names its own claims by token: a claim in its book that the database
    takes for free (here its liveness lock key is one nobody holds, as after the worker's
    session ended) is not taken back by it under a new token; a peer takes it."""
    w1, w2 = open_journal("w1", liveness=True), open_journal("w2", liveness=True)
    run = w1.admit("chat", "in-1", sha("x")).run
    other = open_journal().admit("chat-2", "in-2", sha("y")).run
    token = w1.cluster.get(run.id).token
    with psycopg.connect(w1.store.dsn.conninfo, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {w1.store.namespace}.claims SET alive_key = 12345 WHERE run_id = %s",
            (run.id,),
        )
    assert [c.run_id for c in w1.cluster.sweep(limit=2)] == [other.id]
    assert w1.cluster.owner(run.id).token == token  # not taken back by w1
    assert [c.run_id for c in w2.cluster.sweep(limit=2)] == [run.id]


def test_sweeps_and_claims_work_while_an_advisory_lock_with_a_negative_key_is_held(
    open_journal, postgres_server
):
    """The liveness check reads every advisory lock of the database; one with a negative
    key (the migration lock of a journal opening at that moment, or another application's)
    made the key's arithmetic overflow, and every sweep and claim failed with
    ``invalid_argument`` while it was held."""
    w1, w2 = open_journal("w1", liveness=True), open_journal("w2", liveness=True)
    run = open_journal().admit("chat", "in-1", sha("x")).run
    with postgres_server.connect() as other:
        other.execute("SELECT pg_advisory_lock(%s)", (-(2**62) - 12345,))
        assert [c.run_id for c in w2.cluster.sweep(limit=2)] == [run.id]
        assert w1.cluster.claim(run.id) is None  # w2 holds it: its lock is seen
        assert w1.cluster.owner(run.id).worker_id == "w2"
