"""The run scope: one run of a chat, entered in one place and driven to its end.

A ``RunScope`` holds what the session knows of the run its chat works on (``state``, a
``DurableRun``) and is the object the seams are methods of (``CallSeams``,
python/durable/seams.py). It is made by the session for an input the journal just admitted
(then ``start``), or rebuilt from the journal for a run that resumes (``RunScope.rebuilt``),
and entered in exactly one place, ``drive``: there the session's ``run`` is set and the
ContextVar that ``current_scope()`` reads (as DBOS's ``EnterDBOSWorkflow``), and both are
cleared when the run ends, is held or stopped. ``drive`` runs the chain and is the one
place its errors are handled; a Stop, reset or nudge ends the run with the ``stop``
decision, a server shutdown leaves it active for recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

from agent import UserMessage
from durability import integrity
from durability.errors import (
    CorruptCheckpoint,
    FencingLost,
    InvalidTransition,
    OpenIntents,
    RunNotActive,
)
from durability.status import HoldReason, RunStatus
from durability.verdicts import Evidence, Why, judge
from python.durable import checkpoint
from python.durable.embedding_calls import EmbeddingSeam
from python.durable.notices import HELD, warn, warn_held
from python.durable.recorded import position
from python.durable.run import ClaimLost, DurableHold, DurableRun
from python.durable.seams import SeamHost
from python.helpers.errors import HandledException

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from durability.records import Run

logger = logging.getLogger("a0.durable")
FAILED, COMPLETED = RunStatus.FAILED, RunStatus.COMPLETED

_CURRENT: ContextVar[RunScope | None] = ContextVar("a0_run_scope", default=None)


def current_scope() -> RunScope | None:
    """The run scope the calling task is in (None outside a run)."""
    return _CURRENT.get()


class Host(SeamHost, Protocol):
    """What a run scope uses of its chat's session (``DurableSession``): the seams' part,
    and the run the chat works on, which only ``RunScope.drive`` sets."""

    run: RunScope | None
    last_run_id: str | None
    journaled: bool

    async def stopped(self, run_id: str) -> None: ...


class RunScope(EmbeddingSeam):
    """One run of one chat: its state, the seams, and the steps that drive it to its end."""

    session: Host

    def __init__(self, session: Host, state: DurableRun) -> None:
        super().__init__(session, state)
        #: this task ends the run (``_finish``): a final status in the journal is its own
        self.ending = False

    @property
    def run_id(self) -> str:
        return self.state.run_id

    # made -----------------------------------------------------------------------------
    @classmethod
    async def rebuilt(
        cls, session: Host, run_id: str, permits: dict[str, str]
    ) -> tuple[RunScope, Agent, bool] | None:
        """Rebuild the chain a run resumes from: (its scope, the agent to drive, resume?),
        or None when the run is not active (or its checkpoint is damaged: held)."""
        journal, context = session.chats.journal, session.context
        run = await journal.aio.get_run(run_id)
        if run.status != RunStatus.ACTIVE:
            return None
        calls = await journal.aio.list_calls(run_id)
        known = {c.id for c in calls}
        positions = {(c.agent_no, c.seq) for c in calls}
        state = DurableRun(
            run_id, run.input_id, permits=permits, known_calls=known, known_positions=positions
        )
        scope = cls(session, state)
        try:
            latest = await journal.aio.latest_checkpoint(run_id)
        except CorruptCheckpoint as exc:
            verdict = judge(None, Evidence(checkpoint_damage=exc.to_dict()))
            reason, detail = str(verdict.reason), verdict.hold_detail()
            await journal.aio.mark_needs_attention(run_id, reason, detail)
            return None
        if latest is None:
            return scope, await scope._restart_from_input(run), False
        state = scope.state
        base = latest.state.get("resume") or {}
        prefix = checkpoint.RESUME_PREFIX
        histories = {
            k[len(prefix) :]: v for k, v in latest.histories.items() if k.startswith(prefix)
        }
        checkpoint.restore_chain(context, base, histories)
        state.seq = {int(k): int(v) for k, v in (base.get("seq") or {}).items()}
        state.start_agent = int(base.get("start_agent", 0))
        state.resume_base = (base, histories)
        agent = checkpoint.agent_by_number(context, int(base.get("resume_agent", 0)))
        return scope, agent, base.get("phase") == "iteration"

    async def _restart_from_input(self, run: Run) -> Agent:
        """Admitted but no checkpoint yet: the chat's last state plus the journaled input."""
        journal, context = self.journal, self.context
        previous = await journal.aio.latest_context_checkpoint(
            context.id, histories=checkpoint.current_chains
        )
        if previous is not None:
            current = previous.state.get("current") or {}
            checkpoint.restore_chain(context, current, previous.histories)
        events = await journal.aio.list_events(run_id=run.id, limit=1000, verify=False)
        first = next((e for e in events if e.type == "input"), None)
        payload = integrity.require_event(first).payload if first is not None else {}
        message = payload.get("message") if isinstance(payload, dict) else None
        message = message if isinstance(message, dict) else {}
        system = [str(s) for s in message.get("system_message") or []]
        text = str(message.get("message") or "")
        msg = UserMessage(text, system_message=system, id=run.input_id)
        msg.images = [p for p in message.get("images") or [] if isinstance(p, dict)]
        agent = context.agent0
        agent.hist_add_user_message(msg)
        checkpoint.set_resume_base(context, self.state, agent, phase="start")
        await checkpoint.write(context, self.state, journal)
        return agent

    # driven -------------------------------------------------------------------------------
    async def start(self, msg: UserMessage, agent: Agent) -> str:
        """A freshly admitted input: history, base checkpoint, then the chain."""
        session, state = self.session, self.state
        session.journaled = True
        agent.hist_add_user_message(msg)
        checkpoint.set_resume_base(self.context, state, agent, phase="start")

        async def base_checkpoint() -> None:
            await checkpoint.write(self.context, state, self.journal, start=True)
            if msg.attachments:  # for a worker that may take it over
                paths = list(msg.attachments)
                await self.chats.ownership.store_attachments(self.context, state.run_id, paths)

        return await self.drive(agent, resume=False, first=base_checkpoint)

    @contextlib.contextmanager
    def _entered(self) -> Iterator[None]:
        """The one place a run is entered and left: the session's ``run`` and the task's
        ``current_scope()`` are this scope while the chain runs."""
        self.session.run = self
        self.session.last_run_id = self.state.run_id
        token = _CURRENT.set(self)
        try:
            yield
        finally:
            _CURRENT.reset(token)
            self.session.run = None  # the run is over (or held): no journaling outside it

    async def drive(
        self, agent: Agent, *, resume: bool, first: Callable[[], Awaitable[None]] | None = None
    ) -> str:
        """Run the chain of this run (after ``first``) to its end: completed, failed, held
        or stopped. The one place that handles the chain's errors."""
        with self._entered():
            try:
                return await self._drive(agent, resume=resume, first=first)
            except FencingLost as exc:  # a write outside the seams (the run's end) was refused
                reason = str(exc.fields.get("reason") or "fencing_lost")
                self.claim_lost(ClaimLost(self.state.run_id, f"write refused: {reason}"))
                return ""

    async def _drive(
        self, agent: Agent, *, resume: bool, first: Callable[[], Awaitable[None]] | None
    ) -> str:
        run_id = self.state.run_id
        try:
            if first is not None:
                await first()
            response = await self.context.chain(agent, resume=resume)
        except ClaimLost as lost:
            self.claim_lost(lost)
            return ""
        except DurableHold as hold:
            warn_held(self.context, run_id, hold.reason, hold.detail)
            return ""
        except asyncio.CancelledError:
            await self.session.stopped(run_id)
            raise
        except HandledException as e:
            await self._finish(str(e), failed=True)
            return str(e)
        except Exception as e:
            try:
                agent.log_error(e)
            except HandledException as handled:
                await self._finish(str(handled), failed=True)
                return str(handled)
        await self._finish(response, failed=False)
        return response

    def claim_lost(self, lost: ClaimLost) -> None:
        """A shared worker lost the run's claim: it writes nothing more for the run and
        leaves it active for the worker that holds it now (python/durable/shared.py)."""
        self.chats.ownership.claim_lost(lost.run_id, lost.reason)
        logger.warning("run %s stopped on this worker: claim lost (%s)", lost.run_id, lost.reason)
        self.context.log.log(
            type="warning",
            heading="Run moved to another worker",
            content="This worker no longer holds the run's claim; it started nothing more for "
            f"it (reason: {lost.reason}). The worker that holds the claim continues it.",
            kvps={"run_id": lost.run_id, "reason": lost.reason},
        )

    async def _finish(self, response: str, *, failed: bool) -> None:
        """The run's answer and its end in one commit (``finish_run``: the open-call check
        runs inside it, after the deferred writes ahead of it, so no read forces those to
        commit on their own first). A run that still has an open call is held instead."""
        run_id, journal = self.state.run_id, self.journal
        self.ending = True
        payload = {"response": response, "failed": failed}
        status = FAILED if failed else COMPLETED
        for _ in range(2):  # again if the open call got its result between the two
            try:
                await journal.aio.finish_run(
                    run_id,
                    status,
                    context_id=self.context.id,
                    event_type="run_result",
                    payload=payload,
                )
                return
            except OpenIntents:
                pass
            except (InvalidTransition, RunNotActive) as exc:  # ended meanwhile: answer alone
                await journal.aio.append_event(
                    self.context.id, "run_result", payload, run_id=run_id
                )
                logger.warning("run %s could not be closed: %s", run_id, exc.code)
                return
            open_calls = await journal.aio.open_intents(run_id)
            if open_calls:
                break
        if not open_calls:  # refused twice, yet no open call read after either: left active
            logger.warning("run %s not closed: its open calls changed while it ended", run_id)
            return
        # never end a run whose call has no journaled outcome: hold it instead
        reason = HoldReason.UNCERTAIN_CALL
        detail = {**position(open_calls[-1]), "why": Why.RUN_ENDED_WITH_OPEN_CALL}
        with contextlib.suppress(InvalidTransition):
            await journal.aio.mark_needs_attention(run_id, reason, detail)
        content = (
            "The run ended with a call whose outcome is not journaled; it waits "
            f"for a person's decision (reason: {reason})."
        )
        warn(self.context, HELD, content, run_id=run_id, reason=reason)
