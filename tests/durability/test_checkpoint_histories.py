"""Property: any sequence of history edits reads back exactly from the delta chain."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durability import CheckpointData, Journal, Masker, history_write
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

messages = st.one_of(
    st.text(max_size=20),
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=20)}
    ),
    st.lists(st.integers(-5, 5), max_size=3),
)
edits = st.one_of(
    st.tuples(st.just("append"), st.lists(messages, min_size=1, max_size=3)),
    st.tuples(st.just("truncate"), st.integers(0, 10)),
    st.tuples(st.just("replace"), st.integers(0, 10), messages),
    st.tuples(st.just("same"), st.none()),
)


def apply(history: list, edit) -> list:
    kind = edit[0]
    if kind == "append":
        return history + edit[1]
    if kind == "truncate":
        return history[: edit[1]]
    if kind == "replace" and history:
        i = edit[1] % len(history)
        return [*history[:i], edit[2], *history[i + 1 :]]
    return list(history)


def test_random_edit_sequences_round_trip(tmp_path):
    counter = itertools.count()
    with Journal.open_sqlite(tmp_path / "j.sqlite", masker=Masker({"K": "SECRETVALUE"})) as j:

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            steps=st.lists(st.tuples(edits, edits), min_size=1, max_size=8),
            reopen_cache=st.booleans(),
        )
        def check(steps, reopen_cache):
            n = next(counter)
            run = j.admit(f"chat-{n}", f"in-{n}", sha(str(n))).run
            histories: dict[str, list] = {"0": [], "1": []}
            for i, (edit0, edit1) in enumerate(steps):
                histories = {"0": apply(histories["0"], edit0), "1": apply(histories["1"], edit1)}
                if reopen_cache and i % 2:
                    j.set_masker(j.masker)  # drop the cache: the base comes from the store
                j.write_checkpoint(run.id, CheckpointData(state={"i": i}, histories=histories))
                cp = j.latest_checkpoint(run.id)
                assert cp.histories == histories
                assert cp.state == {"i": i}

        check()


def _nodes(journal: Journal) -> int:
    return journal.store.read_raw(
        lambda c: c.execute(
            "SELECT count(*) FROM blobs WHERE substr(data, 1, 6) = CAST(? AS BLOB)", ('{"add"',)
        ).fetchone()[0]
    )


def test_chains_with_the_same_messages_in_one_checkpoint_share_one_node(tmp_path, monkeypatch):
    """A run's resume base taken at a step equals the current history (issue #24): the
    second chain reuses the first one's head, though their previous heads differ (a node
    of its own would differ too, being based on its own chain); both read back whole.
    Every change is made a node blob here (none carried inline in the row)."""
    monkeypatch.setattr(history_write, "INLINE_MAX", 0)
    with Journal.open_sqlite(tmp_path / "j.sqlite") as journal:
        run = journal.admit("chat", "in-1", sha("x")).run
        log, base = [{"m": 1}, {"m": 2}], [{"m": 1}]
        journal.write_checkpoint(run.id, CheckpointData({}, {"log": log, "resume:log": base}))
        assert _nodes(journal) == 2
        log = [*log, {"m": 3}]
        journal.write_checkpoint(run.id, CheckpointData({}, {"log": log, "resume:log": log}))
        assert _nodes(journal) == 3  # one node for both chains (two before #24)
        latest = journal.latest_checkpoint(run.id)
        assert latest is not None and latest.histories == {"log": log, "resume:log": log}
        log = [*log, {"m": 4}]  # the chains part again: each stores its own change
        journal.write_checkpoint(run.id, CheckpointData({}, {"log": log, "resume:log": base}))
        assert _nodes(journal) == 4  # "resume:log" is the node's first message: no new node
    with Journal.open_sqlite(tmp_path / "j.sqlite") as journal:  # no cache: from the rows
        latest = journal.latest_checkpoint(run.id)
        assert latest is not None and latest.histories == {"log": log, "resume:log": base}
