"""POST /api/durable_plan_set: replace a chat's plan on the revision it was read at."""

from __future__ import annotations

from typing import Any

from durability.documents import PLAN_KIND
from durability.errors import DocumentConflict, DocumentInvalid, DurabilityError
from python.api._durable_plan import require_chat_id
from python.server.api import ApiError, ApiHandler, bad_request, get_int

ACTOR = "user"  # a person, through the Plan panel or the API


def plan_input(input: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """``expected_revision`` (required, >= 0) and ``plan`` (required object)."""
    if input.get("expected_revision") in (None, ""):
        raise bad_request("'expected_revision' is required (0 for a plan never written)")
    expected = get_int(input, "expected_revision", minimum=0)
    plan = input.get("plan")
    if not isinstance(plan, dict):
        raise bad_request("'plan' is required: an object {title, items}")
    return expected, plan


class DurablePlanSet(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        journal = self.runtime.journal
        ctx_id = await require_chat_id(self.runtime, input)
        expected, plan = plan_input(input)
        try:
            document = await journal.aio.replace_document(
                ctx_id, PLAN_KIND, plan, expected_revision=expected, actor=ACTOR
            )
        except DocumentConflict as e:
            raise ApiError(
                e.code,
                f"The plan changed since it was read: revision {e.current_revision} is "
                f"current, not {expected}. Your plan was kept as conflict "
                f"#{e.conflict_id}; read the plan again and resolve the conflict.",
            ) from None
        except DocumentInvalid as e:
            path = e.fields.get("path", "$")
            raise ApiError(e.code, f"{e.message} (at {path})") from None
        except DurabilityError as e:
            raise ApiError(e.code, e.message) from None
        return {"context_id": ctx_id, "plan": document.value, "revision": document.revision}
