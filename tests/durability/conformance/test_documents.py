"""Typed documents: the plan, its revisions, limits and conflicts."""

from __future__ import annotations

import pytest

from durability import DocumentConflict, DocumentInvalid, DocumentTooLarge
from durability.documents import PLAN_MAX_BYTES, PLAN_MAX_ITEMS
from durability.errors import ConflictNotFound

pytestmark = pytest.mark.unit


def plan(n=2, title="Ship it"):
    return {
        "title": title,
        "items": [{"id": f"s{i}", "text": f"step {i}", "done": False} for i in range(n)],
    }


def test_unwritten_plan_is_empty_at_revision_0(journal):
    doc = journal.read_document("chat-1", "plan")
    assert (doc.revision, doc.value) == (0, {"title": "", "items": []})


def test_replace_on_the_expected_revision(journal):
    first = journal.replace_document("chat-1", "plan", plan(), expected_revision=0, actor="agent")
    assert first.revision == 1
    assert first.value == plan()
    assert first.updated_by == "agent"
    second = journal.replace_document("chat-1", "plan", plan(3), expected_revision=1, actor="ui")
    assert second.revision == 2
    assert journal.read_document("chat-1").value == plan(3)


def test_items_default_done_to_false(journal):
    doc = journal.replace_document(
        "chat-1",
        "plan",
        {"title": "t", "items": [{"id": "a", "text": "x"}]},
        expected_revision=0,
        actor="agent",
    )
    assert doc.value["items"] == [{"id": "a", "text": "x", "done": False}]


def test_stale_revision_records_a_conflict_and_loses_nothing(journal):
    journal.replace_document("chat-1", "plan", plan(), expected_revision=0, actor="agent")
    journal.replace_document("chat-1", "plan", plan(3), expected_revision=1, actor="ui")
    with pytest.raises(DocumentConflict) as info:
        journal.replace_document("chat-1", "plan", plan(5), expected_revision=1, actor="agent")
    assert info.value.code == "document_conflict"
    assert (info.value.expected_revision, info.value.current_revision) == (1, 2)
    [conflict] = journal.list_conflicts("chat-1")
    assert conflict.id == info.value.conflict_id
    assert conflict.proposed == plan(5)
    assert (conflict.expected_revision, conflict.actual_revision, conflict.actor) == (1, 2, "agent")
    assert journal.read_document("chat-1").value == plan(3)
    resolved = journal.resolve_conflict(conflict.id, resolution="kept_current", actor="alice")
    assert resolved.resolution == "kept_current" and resolved.resolved_at is not None
    assert journal.list_conflicts("chat-1") == []
    assert len(journal.list_conflicts("chat-1", unresolved_only=False)) == 1
    assert journal.get_conflict(conflict.id) == resolved


def test_get_conflict_of_an_unknown_id(journal):
    with pytest.raises(ConflictNotFound) as info:
        journal.get_conflict(12345)
    assert info.value.code == "conflict_not_found"


def test_same_content_again_is_a_no_op(journal):
    first = journal.replace_document("chat-1", "plan", plan(), expected_revision=0, actor="a")
    again = journal.replace_document("chat-1", "plan", plan(), expected_revision=0, actor="a")
    assert again.revision == first.revision == 1
    assert journal.list_conflicts("chat-1") == []


def test_plan_item_limit(journal):
    journal.replace_document("c", "plan", plan(PLAN_MAX_ITEMS), expected_revision=0, actor="a")
    with pytest.raises(DocumentTooLarge) as info:
        journal.replace_document(
            "c", "plan", plan(PLAN_MAX_ITEMS + 1), expected_revision=1, actor="a"
        )
    assert info.value.code == "document_too_large"
    assert info.value.limit == "items"
    assert journal.read_document("c").revision == 1


def test_plan_byte_limit(journal):
    big = {"title": "t", "items": [{"id": "a", "text": "x" * PLAN_MAX_BYTES, "done": False}]}
    with pytest.raises(DocumentTooLarge) as info:
        journal.replace_document("c", "plan", big, expected_revision=0, actor="a")
    assert info.value.limit == "bytes"
    assert journal.read_document("c").revision == 0


@pytest.mark.parametrize(
    "value",
    [
        [],
        {"title": 3, "items": []},
        {"title": "t", "items": {}},
        {"title": "t", "items": [{"id": "", "text": "x"}]},
        {"title": "t", "items": [{"id": "a", "text": 1}]},
        {"title": "t", "items": [{"id": "a", "text": "x", "done": "yes"}]},
        {"title": "t", "items": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]},
        {"title": "t", "items": [], "owner": "me"},
    ],
)
def test_invalid_plans_are_refused(journal, value):
    with pytest.raises(DocumentInvalid) as info:
        journal.replace_document("c", "plan", value, expected_revision=0, actor="a")
    assert info.value.code == "document_invalid"
    assert info.value.path.startswith("$")


def test_unknown_kind_is_refused(journal):
    with pytest.raises(DocumentInvalid):
        journal.read_document("c", "notes")
