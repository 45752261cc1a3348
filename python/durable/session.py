"""One durable session per chat: it owns the chat's life (docs/durability-loop.md).

The session admits a message for ``DurableChats.submit`` (the one way in; ``communicate``
and ``nudge`` go through it too), resumes a journaled run (``resume``: start-up, takeover,
a decision), creates the chat's one task (``spawn``, the only ``create_task`` of a chat) in
which the run's scope (python/durable/scope.py) drives the run to its end, and journals
what Stop, reset and remove did. The loop reaches it through ``context.session`` (the
``ChatSession`` Protocol of python/helpers/chat_session.py): ``Agent.call_model`` and
``Agent.execute_tool`` each make one call into it, which the run scope of the calling task
(``current_scope()``) carries out; every iteration ends with ``iteration_end``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent import UserMessage
from durability import recovery
from durability.errors import ActiveRunExists, CorruptRecord, DurabilityError, FencingLost
from durability.status import HoldReason, RunStatus
from durability.verdicts import Evidence, judge
from python.durable import admission
from python.durable.admission import Admitted, Submission, SubmitOptions
from python.durable.atomic import Effect, atomic_call
from python.durable.notices import stop_quietly, warn_held
from python.durable.run import ClaimLost, DurableRun
from python.durable.scope import RunScope, current_scope
from python.helpers.errors import DomainError
from python.helpers.models import ModelResult
from python.helpers.tool import Response, Tool

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext
    from durability import Journal
    from durability.adapters.shell import ShellReceipts
    from durability.records import Admission, Run
    from python.durable.ports import Chats
    from python.helpers.chat_session import ModelRequest
    from python.helpers.scheduler import TaskScheduler

logger = logging.getLogger("a0.durable")


class DurableSession:
    """The durable life of one chat (one per AgentContext, made by DurableChats)."""

    def __init__(self, context: AgentContext, chats: Chats) -> None:
        self.context = context
        self.chats = chats
        #: The run the chat is working on: set and cleared only by ``RunScope.drive``.
        self.run: RunScope | None = None
        self.journaled = False  # the chat has runs in the journal (see DurableChats.forget_purged)
        self.purged = False  # retention removed every run of the chat: journal nothing more
        self._task: asyncio.Task[str] | None = None
        self._admission = asyncio.Lock()  # one message at a time is admitted to the chat
        self._admitting = 0
        # shared workers (python/durable/shared.py, takeover.py)
        self.last_run_id: str | None = None  # the run this process drove last
        self.synced_checkpoint: int | None = None  # the chat's checkpoint it was loaded from
        self.refreshed_at = 0.0  # when a poll last brought it up to the journal (monotonic)
        self.local_inputs: set[str] = set()  # interventions admitted through this process

    # what the loop and the tools read ---------------------------------------------------
    @property
    def journal(self) -> Journal:
        return self.chats.journal

    @property
    def receipts(self) -> ShellReceipts | None:
        return self.chats.receipts

    @property
    def scheduler(self) -> TaskScheduler:
        return self.chats.scheduler

    @property
    def task(self) -> asyncio.Task[str] | None:
        return self._task

    def is_running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def admitting(self) -> bool:
        """True while a message to this chat is being admitted."""
        return self._admitting > 0

    @property
    def busy(self) -> bool:
        """The chat works here, or is about to (its log is the live one, not the journal's)."""
        return self.is_running() or self.run is not None or self.admitting

    def scope(self) -> RunScope:
        """The run scope of the calling task; the loop never runs outside one."""
        scope = current_scope()
        if scope is None or scope is not self.run:
            raise RuntimeError(f"chat {self.context.id} has no admitted run to journal into")
        return scope

    # the chat's one task -----------------------------------------------------------------
    def spawn(
        self, work: Coroutine[Any, Any, str], *, run_id: str | None = None
    ) -> asyncio.Task[str]:
        """Create the chat's task: the only place a chat's work starts. ``run_id``: the run
        the task works on (a task cancelled before it began still ends its run)."""
        task = asyncio.get_running_loop().create_task(work, name=f"chat-{self.context.id}")
        task.add_done_callback(functools.partial(self._task_done, run_id))
        self._task = task
        return task

    def _task_done(self, run_id: str | None, task: asyncio.Task[str]) -> None:
        ended = run_id or self.last_run_id
        if ended is not None:
            self.chats.ownership.run_ended(ended)
        if task.cancelled():
            if run_id is not None and not self.chats.keeps_open(run_id):  # idempotent
                self.chats.in_background(asyncio.to_thread(stop_quietly, self.journal, run_id))
            return
        if task.exception() is not None:  # whoever awaited the task was told; no traceback
            error = type(task.exception()).__name__
            logger.info("chat %s task ended with %s", self.context.id, error)

    async def _journal_admit(
        self, content: admission.Content, *, intervention: bool = False
    ) -> tuple[Admission, bool]:
        """The journal's admit, carried to its end even when the caller is cancelled
        meanwhile (the write may land anyway): (the admission, whether it was cancelled).
        The caller then acts on an admission it made instead of leaving a run nobody runs."""
        admit = self.journal.aio.admit_intervention if intervention else self.journal.aio.admit
        work = asyncio.ensure_future(
            admit(self.context.id, content.input_id, content.digest, message=content.payload)
        )
        try:
            return await asyncio.shield(work), False
        except asyncio.CancelledError:
            return await work, True

    # admission: the session's step of DurableChats.submit (the one way in) ------------------
    async def admit(
        self, msg: UserMessage, *, here: Agent | None = None, handed: bool = False
    ) -> Submission:
        """Admit a message to this chat through the journal and act on it (called by
        ``DurableChats.submit`` only). ``here``: the chat's own task admits it (``communicate``
        and ``nudge``, which masked it already) and drives a started run itself on that agent;
        ``handed``: the message was handed to the working agent already (``communicate``
        while the chat works) and is journaled as its intervention.

        Raises InputConflict (same id, other content), RunHeld (the chat waits for a
        decision) and ActiveRunExists (a run is open but not running in this process)."""
        self._admitting += 1
        try:
            if here is None and not handed:
                admission.mask_message(self.context, msg)
            content = await admission.content(self.journal, msg)
            async with self._admission:
                return await self._admit(msg, content, here, handed)
        finally:
            self._admitting -= 1

    async def _admit(
        self, msg: UserMessage, content: admission.Content, here: Agent | None, handed: bool
    ) -> Submission:
        context = self.context
        own = here is not None or handed  # the chat's own call: it unpaused already
        if not own:
            context.paused = False
        running = handed or (here is None and self.is_running())
        if handed:  # before the journal has it: a shared worker's poll never hands it again
            self.local_inputs.add(content.input_id)
        try:
            adm, cancelled = await self._journal_admit(content, intervention=running)
        except ActiveRunExists:
            if here is not None or not self.chats.ownership.others_may_run:
                raise
            # shared workers: the chat's run works on another worker; the message joins it
            # there (its owner hands it to the agent, python/durable/shared.py)
            running = True
            adm, cancelled = await self._journal_admit(content, intervention=True)
        if running:
            self.local_inputs.add(content.input_id)
        if not adm.created:
            if cancelled:
                raise asyncio.CancelledError
            owner = self.chats.get(adm.run.context_id)
            return await admission.duplicate(self.journal, adm, content.input_id, owner)
        run = adm.run
        if running:  # the journal took it: the working agent gets it, whatever the caller does
            if self.is_running() and not handed:
                context.get_agent().intervention = msg
            input_id, task = content.input_id, self._task
            kind = Admitted.INTERVENTION
            result = Submission(kind, run.id, input_id, run.status, task, context_id=context.id)
        elif here is not None:  # the caller's task (the chat's) drives it
            if cancelled:  # stopped while the journal admitted: the run ends at once
                await self.stopped(run.id)
            active = RunStatus.ACTIVE
            started, task = Admitted.STARTED, self._task
            result = Submission(started, run.id, run.input_id, active, task, None, context.id)
        else:  # the journal took it: it runs, whatever the caller does
            result = self.start(run, msg)
        if cancelled:
            raise asyncio.CancelledError
        return result

    def start(self, run: Run, msg: UserMessage) -> Submission:
        """Run an input the journal just admitted for this chat, in the chat's task."""
        agent = self.context.agent0
        task = self.spawn(
            self._scope_of(run.id, run.input_id, agent).start(msg, agent), run_id=run.id
        )
        active, started = RunStatus.ACTIVE, Admitted.STARTED
        return Submission(started, run.id, run.input_id, active, task, None, self.context.id)

    def _scope_of(self, run_id: str, input_id: str, agent: Agent) -> RunScope:
        return RunScope(self, DurableRun(run_id, input_id, start_agent=agent.number))

    def communicate(self, msg: UserMessage) -> asyncio.Task[str]:
        """``AgentContext.communicate``: a task that submits ``msg`` and runs it, or, while the
        chat works, the intervention handed to the working agent (submitted meanwhile)."""
        self.context.paused = False
        self.context.last_message = datetime.now(UTC)
        admission.mask_message(self.context, msg)
        if self._task is not None and not self._task.done():
            self.context.get_agent().intervention = msg
            self.chats.in_background(self._submit_handed(msg))
            return self._task
        return self.spawn(self._submit_here(msg, self.context.agent0))

    def nudge(self) -> asyncio.Task[str]:
        """Stop the run and start a new one on the working agent with the nudge message."""
        agent = self.context.get_agent()
        previous = self._task
        self.stop()
        self.context.paused = False
        msg = UserMessage(agent.read_prompt("fw.msg_nudge.md"))
        return self.spawn(self._submit_here(msg, agent, after=previous))

    async def _submit_here(
        self, msg: UserMessage, agent: Agent, after: asyncio.Task[str] | None = None
    ) -> str:
        """In the chat's task: submit ``msg``, then drive its run here (or answer as before)."""
        if after is not None and not after.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait([after])
        _chat, submitted = await self.chats.submit(self.context.id, msg, SubmitOptions(here=agent))
        if submitted.kind == Admitted.STARTED:
            scope = self._scope_of(submitted.run_id, submitted.input_id, agent)
            return await scope.start(msg, agent)
        response = await asyncio.to_thread(
            admission.recorded_response, self.journal, submitted.run_id
        )
        return response or ""

    async def _submit_handed(self, msg: UserMessage) -> None:
        try:
            await self.chats.submit(self.context.id, msg, SubmitOptions(handed=True))
        except (DurabilityError, DomainError) as exc:
            self.context.log.log(type="warning", content=f"intervention not journaled: {exc.code}")

    # resume: start-up, takeover, a decision (the one way a journaled run continues) -------
    def resume(self, run_id: str, permits: Mapping[str, str] | None = None) -> asyncio.Task[str]:
        """Continue a journaled run from its resume base in the chat's task, replaying
        committed calls (``permits``: what recovery allowed its open calls)."""
        return self.spawn(self._resume(run_id, dict(permits or {})), run_id=run_id)

    async def _resume(self, run_id: str, permits: dict[str, str]) -> str:
        slots = self.chats.resume_slots
        try:
            await slots.acquire()
        except asyncio.CancelledError:  # stopped while waiting for a slot
            await self.stopped(run_id)
            raise
        try:
            return await self._resume_in_slot(run_id, permits)
        finally:
            slots.release()

    async def _resume_in_slot(self, run_id: str, permits: dict[str, str]) -> str:
        try:
            rebuilt = await RunScope.rebuilt(self, run_id, permits)
        except asyncio.CancelledError:  # stopped while the run was being rebuilt
            await self.stopped(run_id)
            raise
        except Exception as exc:  # rebuilding this run failed: hold it, the others go on
            if isinstance(exc, CorruptRecord):
                verdict = judge(None, Evidence(record_damage=exc.to_dict()))
                reason, detail = str(verdict.reason), verdict.hold_detail()
            else:
                reason, detail = HoldReason.RECOVERY_ERROR, recovery.error_detail(exc, "resume")
            try:
                await self.journal.aio.mark_needs_attention(run_id, reason, detail)
            except DurabilityError as again:
                logger.warning("run %s could not be held: %s", run_id, again.code)
            warn_held(self.context, run_id, reason, detail)
            return ""
        if rebuilt is None:
            return ""
        scope, agent, resume = rebuilt
        return await scope.drive(agent, resume=resume)

    async def stopped(self, run_id: str) -> None:
        """The run's task was cancelled: a Stop, reset or nudge ends the run (``stop``); a
        server shutdown (or a shared worker's lost claim) leaves it active for recovery."""
        if not self.chats.keeps_open(run_id):
            await asyncio.shield(asyncio.to_thread(stop_quietly, self.journal, run_id))

    # control ------------------------------------------------------------------------------
    def stop(self) -> bool:
        """Cancel the chat's task (Stop, reset, remove); the run ends as stopped unless the
        server is shutting down. True when something was running."""
        if running := self._task is not None and not self._task.done():
            self._task.cancel()
        return running

    def reset(self) -> None:
        """Stop, start the chat over, and journal it so start-up rebuilds it empty."""
        self.stop()
        self.context.clear()
        self._note("context_reset")

    def remove(self) -> None:
        """The chat was deleted: stop it, close its shells, journal that start-up must not
        rebuild it (unless retention already forgot it), and forget it."""
        self.stop()
        self.context.close_shells()
        if not self.purged:
            self._note("context_removed")
        self.chats.forget(self.context)

    def _note(self, event_type: str) -> None:
        context_id, journal = self.context.id, self.journal

        def write() -> None:
            try:
                journal.append_event(context_id, event_type)
            except DurabilityError as exc:
                logger.warning("chat %s %s not journaled: %s", context_id, event_type, exc.code)

        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a script): write now
            write()
            return
        self.chats.in_background(asyncio.to_thread(write))

    # the seams: carried out by the run scope of the calling task (seams.py, atomic.py)
    async def model_call(self, agent: Agent, request: ModelRequest) -> ModelResult:
        with self._fenced():
            return await self.scope().model_call(agent, request)

    async def embedding_call(
        self, agent: Agent, args: dict[str, Any], effect: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        with self._fenced():
            return await self.scope().embedding_call(agent, args, effect)

    async def tool_call(
        self, agent: Agent, tool: Tool, effect: Callable[[], Awaitable[Response]]
    ) -> Response:
        with self._fenced():
            return await self.scope().tool_call(agent, tool, effect)

    async def atomic_call(self, agent: Agent, name: str, args: Any, effect: Effect) -> Any:
        with self._fenced():  # recall and memorize (python/durable/atomic.py)
            return await atomic_call(self.scope(), agent, name, args, effect)

    async def iteration_end(self, agent: Agent, *, final: bool) -> None:
        scope = self.scope()
        with self._fenced():
            await scope.iteration_end(agent, final=final)
        await self.chats.ownership.after_iteration(self.context, scope.run_id)

    @contextlib.contextmanager
    def _fenced(self) -> Iterator[None]:
        """A shared worker's write refused, or an effect not started, with FencingLost
        (durability/cluster.py and the shared worker's gate log which): the run is no
        longer this worker's; unwind the chain as a signal no tool or extension swallows."""
        try:
            yield
        except FencingLost as exc:
            run_id = str(exc.fields.get("run_id") or (self.run.run_id if self.run else ""))
            reason = str(exc.fields.get("reason") or "fencing_lost")
            refused = "effect not started" if "effect" in exc.fields else "write refused"
            raise ClaimLost(run_id, f"{refused}: {reason}") from None


def session_of(context: AgentContext) -> DurableSession:
    """The chat's durable session (every context made by DurableChats has one)."""
    session = context.session
    if not isinstance(session, DurableSession):
        raise TypeError(f"chat {context.id} has no durable session")
    return session
