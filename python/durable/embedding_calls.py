"""The embedding seam: every embedding request of a run, journaled (docs/documents.md).

An embedding request is recorded as a model call named ``embedding`` with the
``safe_replay`` policy, which the engine alone chooses: asking a model for the vectors of
a text again changes nothing, so an intent found open after a crash is asked again
(durability/verdicts.py), never held. ``args`` names the model and the texts by digest (the
texts themselves are not journaled); the committed result is a summary, the vectors stay in
the embedding cache (durability/memory/, table ``embedding_cache``), so a reused result
costs no request while the cache holds them. Like a safe-replay tool's, the result may ride
on the run's next write (the journal defers it): lost with a crash, the request is replayed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from durability.status import CallKind, Policy
from durability.verdicts import Action, judge
from python.durable.recorded import fire, recorded_failure
from python.durable.seams import CallSeams
from python.helpers.models import ModelError

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent

EMBEDDING_CALL_NAME = "embedding"


class EmbeddingSeam(CallSeams):
    """``CallSeams`` plus ``embedding_call`` (the run scope is one)."""

    async def embedding_call(
        self, agent: Agent, args: dict[str, Any], effect: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """Journal one embedding request; reuse a committed summary instead of asking."""
        while True:
            call, _seq = await self._intent(
                agent, CallKind.MODEL, EMBEDDING_CALL_NAME, args, Policy.SAFE_REPLAY
            )
            verdict = judge(call, self.evidence(call, utility=True))
            if verdict.action is Action.HOLD:
                await self._hold(verdict, call)
            if verdict.action is Action.REUSE and isinstance(call.result, dict):
                return call.result
            if verdict.action is Action.FAIL:
                raise recorded_failure(call)
            if verdict.action not in (Action.RUN, Action.REPLAY):
                continue  # abandoned by a decision: ask again at the next position
            await self.chats.ownership.gate(call)
            try:
                summary = await effect()
            except ModelError as exc:
                error = {"error": "model_error", "status": exc.status, "message": str(exc)[:2000]}
                await self.journal.aio.commit_result(call.id, error, failed=True)
                raise
            except Exception as exc:
                await self._failed(call, exc)
                raise
            fire("after_effect", EMBEDDING_CALL_NAME)
            await self.journal.aio.commit_result(call.id, summary)
            await self.fire_after_deferred("after_result", EMBEDDING_CALL_NAME)
            return summary
