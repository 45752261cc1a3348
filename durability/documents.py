"""Typed documents (the durable plan): validation, limits and revision rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durability import integrity
from durability.canonical import canonical_json, digest
from durability.errors import DocumentConflict, DocumentInvalid, DocumentTooLarge
from durability.masking import Masker
from durability.records import Document
from durability.store.base import StoreTx
from durability.store.rows import DocumentRow

PLAN_KIND = "plan"
PLAN_MAX_ITEMS = 100
PLAN_MAX_BYTES = 64 * 1024
_TEXT_LIMIT = 16 * 1024


def _invalid(message: str, path: str) -> DocumentInvalid:
    return DocumentInvalid(message, kind=PLAN_KIND, path=path)


def validate_plan(value: Any) -> dict[str, Any]:
    """The normalised plan ``{"title": str, "items": [{"id", "text", "done"}]}`` or an error."""
    if not isinstance(value, dict):
        raise _invalid("a plan is an object with title and items", "$")
    unknown = sorted(set(value) - {"title", "items"})
    if unknown:
        raise _invalid(f"unknown plan field: {unknown[0]}", f"$.{unknown[0]}")
    title = value.get("title", "")
    if not isinstance(title, str) or len(title) > _TEXT_LIMIT:
        raise _invalid("title must be a string", "$.title")
    items = value.get("items", [])
    if not isinstance(items, list):
        raise _invalid("items must be a list", "$.items")
    if len(items) > PLAN_MAX_ITEMS:
        raise DocumentTooLarge(
            f"a plan holds at most {PLAN_MAX_ITEMS} items",
            kind=PLAN_KIND,
            limit="items",
            max=PLAN_MAX_ITEMS,
            actual=len(items),
        )
    seen: set[str] = set()
    normalised = []
    for i, item in enumerate(items):
        path = f"$.items[{i}]"
        if not isinstance(item, dict) or set(item) - {"id", "text", "done"}:
            raise _invalid("an item is an object with id, text and done", path)
        item_id, text, done = item.get("id"), item.get("text"), item.get("done", False)
        if not isinstance(item_id, str) or not item_id.strip() or len(item_id) > 200:
            raise _invalid("item id must be a non-empty string", f"{path}.id")
        if item_id in seen:
            raise _invalid(f"duplicate item id: {item_id}", f"{path}.id")
        if not isinstance(text, str):
            raise _invalid("item text must be a string", f"{path}.text")
        if not isinstance(done, bool):
            raise _invalid("item done must be true or false", f"{path}.done")
        seen.add(item_id)
        normalised.append({"id": item_id, "text": text, "done": done})
    plan = {"title": title, "items": normalised}
    size = len(canonical_json(plan).encode("utf-8"))
    if size > PLAN_MAX_BYTES:
        raise DocumentTooLarge(
            f"a plan holds at most {PLAN_MAX_BYTES} bytes",
            kind=PLAN_KIND,
            limit="bytes",
            max=PLAN_MAX_BYTES,
            actual=size,
        )
    return plan


#: Document kind -> (validator, empty value).
DOCUMENT_KINDS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    PLAN_KIND: (validate_plan, {"title": "", "items": []}),
}


def _kind(kind: str) -> tuple[Callable[[Any], Any], Any]:
    if kind not in DOCUMENT_KINDS:
        raise DocumentInvalid(f"unknown document kind: {kind[:50]}", kind=kind[:50], path="$")
    return DOCUMENT_KINDS[kind]


def read_document(tx: StoreTx, context_id: str, kind: str) -> Document:
    """The document checked against its digest (CorruptRecord when damaged)."""
    _, empty = _kind(kind)
    row = tx.documents.get(context_id, kind)
    if row is None:
        return Document(context_id, kind, 0, empty, digest(empty), None, None)
    value = integrity.load_json(row.body)
    damage = integrity.document_damage(context_id, kind, row.revision, value, row.digest)
    if damage is not None:
        raise damage.error()
    return Document(
        context_id, kind, row.revision, value, row.digest, row.updated_at, row.updated_by
    )


def prepare_value(kind: str, value: Any, masker: Masker) -> Any:
    """Validate outside the transaction; the stored value is the masked, normalised one."""
    validate, _ = _kind(kind)
    return masker.mask(validate(value))


def replace_document(
    tx: StoreTx,
    context_id: str,
    kind: str,
    value: Any,
    expected_revision: int,
    actor: str,
    now: float,
) -> Document:
    """Replace on the expected revision, or record a conflict row and raise DocumentConflict.

    A damaged stored value is never read, but it can be replaced whole on its revision (the
    new value does not depend on it): that is how a person repairs a damaged plan.
    """
    row = tx.documents.get(context_id, kind)
    damaged = row is not None and integrity.document_row_damage(row) is not None
    current = None if damaged else read_document(tx, context_id, kind)
    revision = row.revision if row is not None else 0
    if (
        current is not None
        and current.revision > 0
        and (canonical_json(value) == canonical_json(current.value))
    ):
        return current  # the same content again (e.g. a retry whose answer was lost): no-op
    if revision != expected_revision:
        tx.contexts.ensure(context_id, now)
        conflict_id = tx.conflicts.insert(
            context_id, kind, expected_revision, revision, value, actor, now
        )
        raise DocumentConflict(
            "the document changed since it was read",
            context_id=context_id,
            kind=kind,
            expected_revision=expected_revision,
            current_revision=revision,
            conflict_id=conflict_id,
        )
    tx.contexts.ensure(context_id, now)
    body = canonical_json(value)
    new = DocumentRow(context_id, kind, revision + 1, body, digest(value), now, actor)
    tx.documents.put(new)
    return read_document(tx, context_id, kind)
