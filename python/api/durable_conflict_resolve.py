"""POST /api/durable_conflict_resolve: a person settles a plan conflict.

``keep_current`` leaves the stored plan as it is; ``take_proposed`` stores the value that
was refused; ``merge`` stores the plan the person put together. The two writing choices
name the revision they were made on, like any plan write: if the plan changed again
meanwhile nothing is written (``stale_revision``) and the person looks again.
"""

from __future__ import annotations

from typing import Any

from durability.errors import DocumentConflict, DocumentInvalid, DurabilityError
from python.api._durable_plan import conflict_row
from python.api._durable_runs import actor_of
from python.server.api import ApiError, ApiHandler, bad_request, get_int, get_str

RESOLUTIONS = {"keep_current": "kept_current", "take_proposed": "took_proposed", "merge": "merged"}
WRITER = "user"  # the document's updated_by for a person's write (as durable_plan_set)


def _expected_revision(input: dict[str, Any]) -> int:
    if input.get("expected_revision") in (None, ""):
        raise bad_request(
            "'expected_revision' is required: the plan revision you resolved against",
            field="expected_revision",
        )
    return get_int(input, "expected_revision", minimum=0)


class DurableConflictResolve(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        journal = self.runtime.journal
        if input.get("conflict_id") in (None, ""):
            raise bad_request("'conflict_id' is required", field="conflict_id")
        conflict_id = get_int(input, "conflict_id", minimum=1)
        choice = get_str(input, "resolution")
        if choice not in RESOLUTIONS:
            raise bad_request(
                f"'resolution' must be one of {', '.join(RESOLUTIONS)}", field="resolution"
            )
        conflict = await _call(journal.aio.get_conflict(conflict_id))
        if conflict.resolved_at is not None:  # settled already (a retry, or someone else)
            return await _answer(journal, conflict, applied=False)
        if choice != "keep_current":
            value = conflict.proposed if choice == "take_proposed" else input.get("plan")
            if not isinstance(value, dict):
                raise bad_request(
                    "'plan' is required for merge: an object {title, items}", field="plan"
                )
            await _write(journal, conflict, value, _expected_revision(input))
        resolved = await _call(
            journal.aio.resolve_conflict(
                conflict_id, resolution=RESOLUTIONS[choice], actor=actor_of(request, self.runtime)
            )
        )
        return await _answer(journal, resolved, applied=True)


async def _write(journal: Any, conflict: Any, value: dict[str, Any], expected: int) -> None:
    current = await journal.aio.read_document(conflict.context_id, conflict.kind)
    if current.revision != expected:
        raise ApiError(
            "stale_revision",
            f"The plan changed again: revision {current.revision} is current, not {expected}. "
            "Load it again and resolve the conflict on what is there now.",
            current_revision=current.revision,
        )
    try:
        await journal.aio.replace_document(
            conflict.context_id, conflict.kind, value, expected_revision=expected, actor=WRITER
        )
    except DocumentConflict as e:  # the plan changed in the instant between read and write
        raise ApiError(
            e.code,
            f"The plan changed while resolving; your plan was kept as conflict "
            f"#{e.conflict_id}. Load the plan again.",
        ) from None
    except DocumentInvalid as e:
        raise ApiError(
            e.code, f"{e.message} (at {e.fields.get('path', '$')})", field="plan"
        ) from None


async def _call(awaitable: Any) -> Any:
    try:
        return await awaitable
    except DurabilityError as e:
        raise ApiError(e.code, e.message) from None


async def _answer(journal: Any, conflict: Any, *, applied: bool) -> dict[str, Any]:
    document = await journal.aio.read_document(conflict.context_id, conflict.kind)
    return {
        "applied": applied,
        "conflict": conflict_row(conflict),
        "context_id": conflict.context_id,
        "plan": document.value,
        "revision": document.revision,
    }
