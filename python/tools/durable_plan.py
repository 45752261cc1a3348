"""durable_plan: read or replace the chat's typed plan, kept as a journal document.

The tool is on the safe-replay allowlist (durability/replay.py): it is deterministic and
touches nothing but the plan document. Running an interrupted call again is harmless:
a read has no effect, and a replace with the same content is a no-op in the journal.
Every refusal is a message to the agent (with a stable code), never an exception; the one
exception is a damaged stored plan (corrupt_record), which holds the run for a person.
"""

from __future__ import annotations

import json
from typing import Any

from durability import Journal
from durability.documents import PLAN_KIND, PLAN_MAX_BYTES, PLAN_MAX_ITEMS
from durability.errors import (
    CorruptRecord,
    DocumentConflict,
    DocumentInvalid,
    DocumentTooLarge,
    DurabilityError,
)
from python.helpers.tool import Response, Tool, ToolArgsError, dumps, refusal_text

ACTIONS = ("read", "replace")

NEVER_REPEAT = (
    "NEVER repeat an external action (a command, a message, a payment, a deployment, "
    "a file change) to repair a plan conflict: the plan is only a record of the work."
)


class PlanArgsError(ToolArgsError):
    """Arguments the tool cannot use; ``code`` is stable."""


def refusal(code: str, message: str) -> str:
    """The text every refusal starts with, so the agent can tell it from a result."""
    return refusal_text("durable_plan", code, message)


def parse_action(args: dict[str, Any], method: str | None) -> str:
    action = args.get("action", method)
    if isinstance(action, str) and action.strip().lower() in ACTIONS:
        return action.strip().lower()
    shown = json.dumps(action, ensure_ascii=False)[:60] if action is not None else "nothing"
    raise PlanArgsError("invalid_action", f'"action" must be "read" or "replace" (got {shown}).')


def parse_expected_revision(args: dict[str, Any]) -> int:
    value = args.get("expected_revision")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if value is None:
        message = '"replace" needs "expected_revision": the revision your last read returned'
        raise PlanArgsError("invalid_argument", message + " (0 for a plan never written).")
    raise PlanArgsError(
        "invalid_argument", '"expected_revision" must be a whole number, 0 or more.'
    )


def parse_plan(args: dict[str, Any]) -> Any:
    """The proposed plan: ``plan`` (an object or its JSON text), or title/items given flat."""
    plan = args.get("plan")
    if plan is None and ("items" in args or "title" in args):
        plan = {key: args[key] for key in ("title", "items") if key in args}
    if isinstance(plan, str):
        try:
            plan = json.loads(plan)
        except ValueError:
            plan = None
    if not isinstance(plan, dict):
        raise PlanArgsError(
            "invalid_argument",
            '"replace" needs "plan": the complete new plan, an object '
            '{"title": "...", "items": [{"id": "...", "text": "...", "done": false}]}.',
        )
    return plan


class DurablePlan(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        journal = self.agent.context.session.journal
        try:
            action = parse_action(self.args, self.method)
            if action == "read":
                return self._answer(await self._read(journal))
            return self._answer(await self._replace(journal))
        except PlanArgsError as e:
            return self._answer(refusal(e.code, str(e)))
        except CorruptRecord:
            raise  # a damaged plan is never used: the journaled loop holds the run
        except DurabilityError as e:
            return self._answer(refusal(e.code, e.message))

    def _answer(self, text: str) -> Response:
        return Response(message=self.agent.mask(text), break_loop=False)

    async def _read(self, journal: Journal) -> str:
        context_id = self.agent.context.id
        document = await journal.aio.read_document(context_id, PLAN_KIND)
        conflicts = await journal.aio.list_conflicts(context_id)
        answer: dict[str, Any] = {"revision": document.revision, "plan": document.value}
        open_conflicts = [c for c in conflicts if c.kind == PLAN_KIND]
        if open_conflicts:
            answer["unresolved_conflicts"] = len(open_conflicts)
        return dumps(answer)

    async def _replace(self, journal: Journal) -> str:
        expected = parse_expected_revision(self.args)
        plan = parse_plan(self.args)
        context_id = self.agent.context.id
        try:
            document = await journal.aio.replace_document(
                context_id, PLAN_KIND, plan, expected_revision=expected, actor=self.actor
            )
        except DocumentTooLarge as e:
            return refusal(e.code, too_large_text(e))
        except DocumentInvalid as e:
            path = e.fields.get("path", "$")
            return refusal(e.code, f"{e.message} (at {path}). Nothing was saved; fix the plan.")
        except DocumentConflict as e:
            current = await journal.aio.read_document(context_id, PLAN_KIND)
            return conflict_text(e, current.revision, current.value)
        result = "replaced" if document.revision == expected + 1 else "unchanged"
        return dumps({"result": result, "revision": document.revision, "plan": document.value})

    @property
    def actor(self) -> str:
        return f"agent{self.agent.number}"


def too_large_text(error: DocumentTooLarge) -> str:
    limit, actual = error.fields.get("limit"), error.fields.get("actual")
    if limit == "items":
        detail = f"a plan holds at most {PLAN_MAX_ITEMS} items; yours has {actual}"
    else:
        detail = f"a plan holds at most {PLAN_MAX_BYTES} bytes of JSON; yours has {actual}"
    return f"{detail}. Nothing was saved; merge or drop finished items and shorten texts."


def conflict_text(error: DocumentConflict, revision: int, value: Any) -> str:
    expected = error.fields.get("expected_revision")
    conflict_id = error.fields.get("conflict_id")
    return "\n".join(
        [
            refusal(
                error.code,
                f"you expected revision {expected}, but the plan is at revision {revision}: "
                "someone else (a person or another agent) changed it since you read it.",
            ),
            f"Your plan was NOT applied. It is kept as conflict #{conflict_id}, and a person "
            "will resolve that conflict; nothing is lost.",
            NEVER_REPEAT,
            f"Continue from the current plan (revision {revision}). If it still needs a "
            f"change, build it on this value and replace with expected_revision {revision}.",
            f"Current plan (revision {revision}):",
            dumps(value),
        ]
    )
