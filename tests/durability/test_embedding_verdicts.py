"""Embedding requests (a model call the engine records with the safe_replay policy, #20):
a pure read, so an open one is asked again after a crash instead of being held, while
every other model call keeps its rules."""

from __future__ import annotations

import pytest

from durability.status import CallKind, CallState, HoldReason, Permit, Policy
from durability.verdicts import Action, Evidence, judge
from tests.durability.test_verdicts import REC, call

pytestmark = pytest.mark.unit

EMBED = {"kind": CallKind.MODEL, "policy": Policy.SAFE_REPLAY}


def test_open_embedding_at_recovery_is_replayed_not_held():
    assert judge(call(**EMBED), Evidence(**REC)).action is Action.REPLAY
    chat = judge(call(kind=CallKind.MODEL), Evidence(**REC))
    assert chat.action is Action.HOLD and chat.reason == HoldReason.UNCERTAIN_CALL


def test_the_loop_asks_for_an_open_embedding():
    assert judge(call(**EMBED), Evidence(known=True, permit=Permit.REPLAY)).action is (
        Action.REPLAY
    )
    assert judge(call(**EMBED), Evidence(known=False)).action is Action.RUN
    unpermitted = judge(call(**EMBED), Evidence(known=True))
    assert unpermitted.action is Action.HOLD  # open before the resume, recovery said nothing


def test_committed_and_failed_embeddings():
    summary = {"model": "p/m", "count": 2, "dim": 3, "vectors_digest": "d"}
    done = call(**EMBED, state=CallState.COMPLETED, result=summary)
    assert judge(done, Evidence()).action is Action.REUSE  # no "response" key needed
    failed = call(**EMBED, state=CallState.FAILED, result={"error": "model_error"})
    assert judge(failed, Evidence()).action is Action.FAIL  # no retry grant, no hold
