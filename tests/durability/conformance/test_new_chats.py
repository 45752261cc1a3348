"""Chats made without a message (``record_chats``, issue #17): each is a finished run with
the chat's first checkpoint, masked; the chats of one call are written all or none."""

from __future__ import annotations

import pytest

from durability import ActiveRunExists, CheckpointData, InvalidArgument, Masker, NewChat
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

SECRET = "hunter2-secret-value"


def _chat(context_id: str, origin: str = "loaded", text: str = "hello") -> NewChat:
    data = CheckpointData(
        state={"current": {"name": context_id}}, histories={"agent:0": [{"m": text}], "log": []}
    )
    return NewChat(context_id, origin, data)


def test_each_chat_is_a_finished_run_with_its_checkpoint(backend):
    journal = backend.open(masker=Masker({"TOKEN": SECRET}))
    try:
        runs = journal.record_chats([_chat("c-1", "created"), _chat("c-2", text=SECRET)])
        assert [(r.context_id, r.status, r.reason) for r in runs] == [
            ("c-1", "completed", "chat_created"),
            ("c-2", "completed", "chat_loaded"),
        ]
        assert journal.active_run("c-1") is None  # nothing to recover
        latest = journal.latest_context_checkpoint("c-2")
        assert latest is not None and latest.run_id == runs[1].id
        assert latest.state == {"current": {"name": "c-2"}}
        assert latest.histories["agent:0"] == [{"m": "§§secret(TOKEN)"}]  # masked
        events = journal.list_events(context_id="c-1")
        assert [(e.type, e.run_id) for e in events] == [("input", runs[0].id)]
        # the chat goes on like any other: its next input starts a run
        admitted = journal.admit("c-1", "in-1", sha("next"))
        assert admitted.created and admitted.run.status == "active"
    finally:
        journal.close()


def test_all_or_none(journal):
    busy = journal.admit("busy", "in-1", sha("work")).run
    with pytest.raises(ActiveRunExists):
        journal.record_chats([_chat("free"), _chat("busy")])
    assert journal.list_runs(context_id="free") == []
    assert journal.latest_context_checkpoint("free") is None
    assert [r.id for r in journal.list_runs(context_id="busy")] == [busy.id]


@pytest.mark.parametrize(
    "chats",
    [
        [_chat("same"), _chat("same")],
        [_chat("x", origin="imported")],
        [_chat("")],
        [NewChat("x", "loaded", {"state": {}})],  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_write_nothing(journal, chats):
    with pytest.raises(InvalidArgument):
        journal.record_chats(chats)
    assert journal.list_runs() == []
