"""One durable session per chat: it owns the chat's life (docs/durability-loop.md).

The session admits a message (or refuses it), creates the chat's one task (``spawn``, the
only ``create_task`` of a chat) in which python/durable/driver.py drives the run to its
end, holds the run for a person, and journals what Stop, reset and remove did. The loop
reaches it through ``context.session`` (the ``ChatSession`` Protocol of
python/helpers/chat_session.py): ``Agent.call_model`` and ``Agent.execute_tool`` each make
one call into it (python/durable/seams.py), every iteration ends with ``iteration_end``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

from agent import UserMessage
from durability.errors import (
    ActiveRunExists,
    DurabilityError,
    FencingLost,
    InvalidTransition,
    RunHeld,
)
from durability.status import RunStatus
from python.durable import admission, driver, seams
from python.durable.admission import Submission
from python.durable.run import ClaimLost, DurableHold, DurableRun
from python.helpers.chat_session import StreamCallback
from python.helpers.models import ModelResult
from python.helpers.tool import Response, Tool

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext
    from durability import Journal
    from durability.adapters.shell import ShellReceipts
    from durability.records import Admission, Call, Run
    from python.durable.chats import DurableChats
    from python.durable.scheduler import Scheduler

logger = logging.getLogger("a0.durable")


class DurableSession:
    """The durable life of one chat (one per AgentContext, made by DurableChats)."""

    def __init__(self, context: AgentContext, chats: DurableChats) -> None:
        self.context = context
        self.chats = chats
        self.run: DurableRun | None = None  # the journaled run the chat is working on
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
    def scheduler(self) -> Scheduler:
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

    def current_run(self) -> DurableRun:
        """The admitted run; the loop never runs outside one."""
        if self.run is None:
            raise RuntimeError(f"chat {self.context.id} has no admitted run to journal into")
        return self.run

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
                self.chats.in_background(
                    asyncio.to_thread(driver.stop_quietly, self.journal, run_id)
                )
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

    # admission ----------------------------------------------------------------------------
    async def submit(self, msg: UserMessage) -> Submission:
        """Admit a message through the journal and act on it.

        Raises InputConflict (same id, other content), RunHeld (the chat waits for a
        decision) and ActiveRunExists (a run is open but not running in this process)."""
        self._admitting += 1
        try:
            admission.mask_message(self.context, msg)
            content = await admission.content(self.journal, msg)
            async with self._admission:
                return await self._submit(msg, content)
        finally:
            self._admitting -= 1

    async def _submit(self, msg: UserMessage, content: admission.Content) -> Submission:
        context = self.context
        context.paused = False
        running = self.is_running()
        try:
            adm, cancelled = await self._journal_admit(content, intervention=running)
        except RunHeld:
            raise
        except ActiveRunExists:
            if not self.chats.ownership.others_may_run:
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
            return await admission.duplicate(self.chats, adm, content.input_id)
        run = adm.run
        if running:  # the journal took it: the working agent gets it, whatever the caller does
            if self.is_running():
                context.get_agent().intervention = msg
            input_id, task = content.input_id, self._task
            result = Submission(
                "intervention", run.id, input_id, run.status, task, context_id=context.id
            )
        else:  # the journal took it: it runs, whatever the caller does
            result = self.start(run, msg)
        if cancelled:
            raise asyncio.CancelledError
        return result

    def start(self, run: Run, msg: UserMessage) -> Submission:
        """Run an input the journal just admitted for this chat."""
        task = self.spawn(driver.run_admitted(self, run, msg, self.context.agent0), run_id=run.id)
        active = RunStatus.ACTIVE
        return Submission("started", run.id, run.input_id, active, task, None, self.context.id)

    def communicate(self, msg: UserMessage) -> asyncio.Task[str]:
        """``AgentContext.communicate``: a task that admits ``msg`` and runs it, or, while the
        chat works, the intervention handed to the working agent (journaled meanwhile)."""
        self.context.paused = False
        self.context.last_message = datetime.now(UTC)
        admission.mask_message(self.context, msg)
        if self._task is not None and not self._task.done():
            self._journal_intervention(msg)
            self.context.get_agent().intervention = msg
            return self._task
        return self.spawn(self._admit_and_run(msg, self.context.agent0))

    def nudge(self) -> asyncio.Task[str]:
        """Stop the run and start a new one on the working agent with the nudge message."""
        agent = self.context.get_agent()
        previous = self._task
        self.stop()
        self.context.paused = False
        msg = UserMessage(agent.read_prompt("fw.msg_nudge.md"))
        return self.spawn(self._admit_and_run(msg, agent, after=previous))

    async def _admit_and_run(
        self, msg: UserMessage, agent: Agent, after: asyncio.Task[str] | None = None
    ) -> str:
        if after is not None and not after.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait([after])
        content = await admission.content(self.journal, msg)
        adm, cancelled = await self._journal_admit(content)
        if cancelled:  # stopped while the journal admitted: the run it made ends at once
            if adm.created:
                await driver.stopped(self, adm.run.id)
            raise asyncio.CancelledError
        if not adm.created:
            response = await asyncio.to_thread(
                admission.recorded_response, self.journal, adm.run.id
            )
            return response or ""
        return await driver.run_admitted(self, adm.run, msg, agent)

    def _journal_intervention(self, msg: UserMessage) -> None:
        context, journal = self.context, self.journal

        async def admit() -> None:
            try:
                content = await admission.content(journal, msg)
                self.local_inputs.add(content.input_id)
                await journal.aio.admit_intervention(
                    context.id, content.input_id, content.digest, message=content.payload
                )
            except DurabilityError as exc:
                context.log.log(type="warning", content=f"intervention not journaled: {exc.code}")

        self.chats.in_background(admit())

    # control ------------------------------------------------------------------------------
    def stop(self) -> bool:
        """Cancel the chat's task (Stop, reset, remove); the run ends as stopped unless the
        server is shutting down. True when something was running."""
        if self._task is None or self._task.done():
            return False
        self._task.cancel()
        return True

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
        self.chats.forget(self)

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

    # the seams (python/durable/seams.py) ------------------------------------------------
    async def model_call(
        self,
        agent: Agent,
        messages: list[dict[str, str]],
        kind: str,
        effect: Callable[[], Awaitable[ModelResult]],
        *,
        on_reasoning: StreamCallback | None = None,
        on_response: StreamCallback | None = None,
    ) -> ModelResult:
        with self._fenced():
            return await seams.model_call(
                self,
                agent,
                messages,
                kind,
                effect,
                on_reasoning=on_reasoning,
                on_response=on_response,
            )

    async def tool_call(
        self, agent: Agent, tool: Tool, effect: Callable[[], Awaitable[Response]]
    ) -> Response:
        with self._fenced():
            return await seams.tool_call(self, agent, tool, effect)

    async def iteration_end(self, agent: Agent, *, final: bool) -> None:
        with self._fenced():
            await seams.iteration_end(self, agent, final=final)
        if self.run is not None:
            await self.chats.ownership.after_iteration(self, self.run.run_id)

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

    async def before_effect(self, call: Call) -> None:
        """Called right before an effect starts, after its intent is durable: the place
        where a worker of a shared journal checks that it still holds the run's claim
        (``Ownership.gate``; every effect may start with SQLite)."""
        await self.chats.ownership.gate(call)

    async def hold(self, reason: str, detail: Any = None) -> NoReturn:
        """Hold the run for a person and unwind the chain."""
        run = self.current_run()
        with self._fenced(), contextlib.suppress(InvalidTransition):
            await self.journal.aio.mark_needs_attention(run.run_id, reason, detail)
        raise DurableHold(reason, detail)


def session_of(context: AgentContext) -> DurableSession:
    """The chat's durable session (every context made by DurableChats has one)."""
    session = context.session
    if not isinstance(session, DurableSession):
        raise TypeError(f"chat {context.id} has no durable session")
    return session
