"""One durable session per chat: it owns the chat's life (docs/durability-loop.md).

The session admits a message (or refuses it), creates the chat's one task (``spawn``, the
only ``create_task`` of a chat), drives the chain, writes checkpoints, finishes or holds
the run, and journals what Stop, reset and remove did. The loop reaches it through
``context.session`` (agent.py's ``ChatSession``): ``Agent.call_model`` and
``Agent.execute_tool`` each make one call into it (python/durable/seams.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

from agent import UserMessage
from durability.errors import (
    DurabilityError,
    InvalidTransition,
    OpenIntents,
    RunNotActive,
    StaleVersion,
)
from durability.integrity import Damage
from python.durable import admission, checkpoint, seams
from python.durable.admission import Submission
from python.durable.run import DurableHold, DurableRun
from python.helpers.errors import HandledException
from python.helpers.models import ModelResult
from python.helpers.tool import Response, Tool

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext, StreamCallback
    from durability import Journal
    from durability.adapters.shell import ShellReceipts
    from durability.records import Admission, Call, Run
    from python.durable.chats import DurableChats

logger = logging.getLogger("a0.durable")
HELD = "Run held for a decision"


def held_text(reason: str | None, detail: Any = None) -> str:
    """The chat's warning for a held run; a damaged record is named."""
    text = f"This run waits for a person's decision (reason: {reason})."
    if reason == "corrupt_record" and isinstance(detail, dict):
        skip = ("record", "reason", "code", "message")
        ids = {k: v for k, v in detail.items() if k not in skip}
        damage = Damage(str(detail.get("record")), str(detail.get("reason")), ids)
        text += f" A journaled record is damaged and was not used: {damage.describe()}."
    return text


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

    # what the loop and the tools read ---------------------------------------------------
    @property
    def journal(self) -> Journal:
        return self.chats.journal

    @property
    def receipts(self) -> ShellReceipts | None:
        return self.chats.receipts

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
    def spawn(self, work: Coroutine[Any, Any, str]) -> asyncio.Task[str]:
        """Create the chat's task: the only place a chat's work starts."""
        task = asyncio.get_running_loop().create_task(work, name=f"chat-{self.context.id}")
        task.add_done_callback(self._task_done)
        self._task = task
        return task

    def _task_done(self, task: asyncio.Task[str]) -> None:
        """A task that ended with an error (a refused admission in ``communicate``'s task)
        has told whoever awaited it; nobody else needs its traceback."""
        if not task.cancelled() and task.exception() is not None:
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
            content = await admission.content(self.journal, msg)
            async with self._admission:
                return await self._submit(msg, content)
        finally:
            self._admitting -= 1

    async def _submit(self, msg: UserMessage, content: admission.Content) -> Submission:
        context = self.context
        context.paused = False
        running = self.is_running()
        adm, cancelled = await self._journal_admit(content, intervention=running)
        if not adm.created:
            if cancelled:
                raise asyncio.CancelledError
            return await admission.duplicate(self.chats, adm, content.input_id)
        run = adm.run
        if running:  # the journal took it: the working agent gets it, whatever the caller does
            context.get_agent().intervention = msg
            task = self._task
            result = Submission("intervention", run.id, content.input_id, run.status, task)
            result.context_id = context.id
        else:  # the journal took it: it runs, whatever the caller does
            result = self.start(run, msg)
        if cancelled:
            raise asyncio.CancelledError
        return result

    def start(self, run: Run, msg: UserMessage) -> Submission:
        """Run an input the journal just admitted for this chat."""
        task = self.spawn(self._run_admitted(run, msg, self.context.agent0))
        return Submission("started", run.id, run.input_id, "active", task, None, self.context.id)

    def communicate(self, msg: UserMessage) -> asyncio.Task[str]:
        """``AgentContext.communicate``: a task that admits ``msg`` and runs it, or, while the
        chat works, the intervention handed to the working agent (journaled meanwhile)."""
        self.context.paused = False
        self.context.last_message = datetime.now(UTC)
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
            if adm.created and not self.chats.stopping:
                await asyncio.shield(asyncio.to_thread(_stop_quietly, self.journal, adm.run.id))
            raise asyncio.CancelledError
        if not adm.created:
            response = await asyncio.to_thread(
                admission.recorded_response, self.journal, adm.run.id
            )
            return response or ""
        return await self._run_admitted(adm.run, msg, agent)

    def _journal_intervention(self, msg: UserMessage) -> None:
        context, journal = self.context, self.journal

        async def admit() -> None:
            try:
                content = await admission.content(journal, msg)
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
        return await seams.model_call(
            self, agent, messages, kind, effect, on_reasoning=on_reasoning, on_response=on_response
        )

    async def tool_call(
        self, agent: Agent, tool: Tool, effect: Callable[[], Awaitable[Response]]
    ) -> Response:
        return await seams.tool_call(self, agent, tool, effect)

    async def iteration_end(self, agent: Agent, *, final: bool) -> None:
        await seams.iteration_end(self, agent, final=final)

    async def before_effect(self, call: Call) -> None:
        """Called right before an effect starts, after its intent is durable: the place
        where a worker of a shared journal checks that it still holds the run's claim
        (``DurableChats.effect_gate``; none with SQLite)."""
        gate = self.chats.effect_gate
        if gate is not None:
            await gate(call)

    async def hold(self, reason: str, detail: Any = None) -> NoReturn:
        """Hold the run for a person and unwind the chain."""
        run = self.current_run()
        with contextlib.suppress(InvalidTransition):
            await self.journal.aio.mark_needs_attention(run.run_id, reason, detail)
        raise DurableHold(reason, detail)

    # driving a run --------------------------------------------------------------------------
    async def _run_admitted(self, run: Run, msg: UserMessage, agent: Agent) -> str:
        """A freshly admitted input: history, base checkpoint, then the chain."""
        state = self.run = DurableRun(run.id, run.input_id, start_agent=agent.number)
        self.journaled = True
        agent.hist_add_user_message(msg)
        checkpoint.set_resume_base(self.context, state, agent, phase="start")
        await checkpoint.write(self.context, state, self.journal)
        return await self.drive(agent, resume=False)

    async def drive(self, agent: Agent, *, resume: bool) -> str:
        """Run the chain of the session's run to its end: completed, failed, held or
        stopped. The one place that handles the chain's errors."""
        try:
            return await self._drive(agent, resume=resume)
        finally:
            self.run = None  # the run is over (or held): no journaling outside it

    async def _drive(self, agent: Agent, *, resume: bool) -> str:
        run = self.current_run()
        try:
            response = await self.context.chain(agent, resume=resume)
        except DurableHold as hold:
            kvps = {"run_id": run.run_id, "reason": hold.reason}
            content = held_text(hold.reason, hold.detail)
            self.context.log.log(type="warning", heading=HELD, content=content, kvps=kvps)
            return ""
        except asyncio.CancelledError:
            if not self.chats.stopping:  # Stop / reset / nudge: the run ends here
                stop = asyncio.to_thread(_stop_quietly, self.journal, run.run_id)
                await asyncio.shield(stop)
            raise  # on shutdown the run stays active: recovery continues it at the next start
        except HandledException as e:
            await self._finish(str(e), failed=True)
            return str(e)
        except Exception as e:
            try:
                agent.log_error(e)
            except HandledException as handled:
                await self._finish(str(handled), failed=True)
                return str(handled)
            return "Error"
        await self._finish(response, failed=False)
        return response

    async def _finish(self, response: str, *, failed: bool) -> None:
        run, journal = self.current_run(), self.journal
        open_calls = await journal.aio.open_intents(run.run_id)
        if open_calls:  # never end a run whose call has no journaled outcome: hold it instead
            detail = {**seams.position(open_calls[-1]), "why": "run_ended_with_open_call"}
            with contextlib.suppress(InvalidTransition):
                await journal.aio.mark_needs_attention(run.run_id, "uncertain_call", detail)
            self.context.log.log(
                type="warning",
                heading=HELD,
                content="The run ended with a call whose outcome is not journaled; it waits "
                "for a person's decision (reason: uncertain_call).",
                kvps={"run_id": run.run_id, "reason": "uncertain_call"},
            )
            return
        payload = {"response": response, "failed": failed}
        await journal.aio.append_event(self.context.id, "run_result", payload, run_id=run.run_id)
        try:
            await journal.aio.set_run_status(run.run_id, "failed" if failed else "completed")
        except (OpenIntents, InvalidTransition, RunNotActive) as exc:
            logger.warning("run %s could not be closed: %s", run.run_id, exc.code)


def _stop_quietly(journal: Journal, run_id: str) -> None:
    """The chat was stopped (Stop, reset, nudge): end the run, abandoning open calls.
    A journal write of the cancelled step may still land meanwhile: retry on its version."""
    for _ in range(10):
        try:
            run = journal.get_run(run_id)
            if run.is_open:
                journal.decide(run_id, "stop", version=run.version, actor="user:stop")
            return
        except StaleVersion:
            continue
        except DurabilityError as exc:
            logger.warning("run %s could not be stopped: %s", run_id, exc.code)
            return
    logger.warning("run %s could not be stopped: its version kept changing", run_id)


def session_of(context: AgentContext) -> DurableSession:
    """The chat's durable session (every context made by DurableChats has one)."""
    session = context.session
    if not isinstance(session, DurableSession):
        raise TypeError(f"chat {context.id} has no durable session")
    return session
