"""The durable side of one process: the chats, and what their sessions share.

``DurableChats`` holds the journal, the shell receipts, the replay policy (pins hashed
once), the shutdown state, the journal writes started in the background and the resume
slots. It makes every chat (``create``: an ``AgentContext`` whose session it builds, so
no chat exists without one) and is the process's one way in for a message:
``submit(context_id, message)`` (the HTTP endpoints call it through
``Runtime.admit_message``, the scheduler of python/durable/scheduler.py directly, a chat's
own ``communicate`` and ``nudge`` from its task).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from agent import AgentConfig, AgentContext, AgentContextType, UserMessage, new_context_id
from durability.errors import DurabilityError
from durability.status import RunStatus
from python.durable import admission, new_chats, rebuild
from python.durable.admission import KeyedLocks, Submission, SubmitOptions
from python.durable.idle import IdleChat, IdleMap, IdleSummaries
from python.durable.new_chats import ChatSpec
from python.durable.ownership import LocalOwnership, Ownership
from python.durable.policy import ReplayPolicy
from python.durable.scheduler import Scheduler
from python.durable.session import DurableSession, session_of
from python.helpers.errors import ChatNotFound

if TYPE_CHECKING:  # pragma: no cover
    from durability import Journal
    from durability.adapters.evidence import ShellEvidence
    from durability.adapters.shell import ShellReceipts

logger = logging.getLogger("a0.durable")

MAX_PARALLEL_RESUMES = 2
ConfigFactory = Callable[[], AgentConfig]
DEFAULT_NAME_PREFIX = "Chat "


def _settings_config() -> AgentConfig:
    from python.helpers import settings

    return AgentConfig.from_settings(settings.load())


class DurableChats:
    """The chats of one process over one journal (python/durable/startup.py opens it)."""

    def __init__(
        self,
        journal: Journal,
        *,
        config: ConfigFactory | None = None,
        receipts: ShellReceipts | None = None,
        policy: ReplayPolicy | None = None,
    ) -> None:
        self.journal = journal
        self.receipts = receipts
        #: What proves a shell call's outcome here, local or over SSH (set at start-up:
        #: python/durable/startup.py); the periodic re-check of held runs (recheck.py).
        self.evidence: ShellEvidence | None = None
        self.rechecker: asyncio.Task[None] | None = None
        if policy is None:
            policy = ReplayPolicy()
            policy.preload()
        self.policy = policy
        self.config = config or _settings_config
        #: Who runs which run: this process every run (SQLite), or a shared journal's
        #: worker the runs it claims (python/durable/shared.py replaces it at start-up).
        self.ownership: Ownership = LocalOwnership(self)
        self.stopping = False  # shutting down: cancelled runs stay active for recovery
        self._sessions: dict[str, DurableSession] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._resume_slots: asyncio.Semaphore | None = None
        self._input_locks = KeyedLocks()
        #: Journaled chats not rebuilt yet (oldest first), each as the chat list shows it
        #: (None: removed, not listed): ``load`` rebuilds each once. Read after start-up
        #: (``_pending``): every use of it waits for that read first (``_idle``).
        self._later: dict[str, IdleChat | None] = {}
        self._pending: IdleSummaries | None = None
        self._load_locks = KeyedLocks()
        #: Held while chats are made by a request (python/durable/new_chats.py): one id,
        #: one chat.
        self.opening = asyncio.Lock()
        #: The process's task scheduler (python/durable/scheduler.py); the server starts
        #: its loop (``Runtime.start``), ``close`` stops it.
        self.scheduler = Scheduler(self)

    # the chats ------------------------------------------------------------------------------
    def create(
        self,
        id: str | None = None,
        name: str | None = None,
        *,
        config: AgentConfig | None = None,
        type: AgentContextType = AgentContextType.USER,
    ) -> AgentContext:
        """A new chat with its durable session (``config`` defaults to the factory's). A user
        chat without a name gets one now ("Chat N"), which its first checkpoint stores: the
        name stays the same across restarts and workers (a rebuilt chat takes the stored
        name back), unlike the process-local number ``no``."""
        if name is None and type == AgentContextType.USER:
            name = self.next_chat_names(1)[0]
        return AgentContext(
            config or self.config(), id=id, name=name, type=type, session=self._new_session
        )

    def next_chat_names(self, count: int) -> list[str]:
        """``count`` default names after those of the chats loaded here ("Chat N")."""
        later = self._idle()
        highest = len(self._sessions) + len(later)
        names = [s.context.name for s in self._sessions.values()]
        names += [idle.name for idle in later.values() if idle is not None]
        for name in names:
            number = (name or "").removeprefix(DEFAULT_NAME_PREFIX)
            if number.isdigit():
                highest = max(highest, int(number))
        return [f"{DEFAULT_NAME_PREFIX}{highest + n}" for n in range(1, count + 1)]

    async def open(self, specs: Sequence[ChatSpec]) -> list[AgentContext]:
        """Make the chats a request asks for (chat_create, chat_load), journaled first, all
        in one transaction, so a restart rebuilds them (python/durable/new_chats.py)."""
        return await new_chats.open_chats(self, specs)

    def _new_session(self, context: AgentContext) -> DurableSession:
        session = DurableSession(context, self)
        self._sessions[context.id] = session
        return session

    def forget(self, context: AgentContext) -> None:
        """The chat was removed (``DurableSession.remove``)."""
        session = self._sessions.get(context.id)
        if session is not None and session.context is context:
            del self._sessions[context.id]

    def get(self, context_id: str) -> AgentContext | None:
        session = self._sessions.get(context_id)
        return session.context if session is not None else None

    def contexts(self) -> list[AgentContext]:
        """The chats loaded here (a chat left for later appears once ``load`` rebuilt it)."""
        return [s.context for s in self._sessions.values()]

    # chats rebuilt after start-up (python/durable/rebuild.py) ------------------------------
    def defer(self, idle: IdleMap | IdleSummaries) -> None:
        """Leave these journaled chats for ``load`` (start-up rebuilds only what recovery
        needs); the chat list shows each as its ``IdleChat`` until then. ``IdleSummaries``:
        they are being read, in a thread (start-up)."""
        if isinstance(idle, IdleSummaries):
            self._pending = idle
        else:
            self._later.update(idle)

    def _idle(self) -> dict[str, IdleChat | None]:
        """The chats left for later, once their read is in (waiting for it: ``settled``
        waits without blocking the event loop)."""
        pending = self._pending
        if pending is not None:
            found = pending.result()
            self._pending = None
            # a chat made or loaded here meanwhile is not idle (a shared worker's sweep)
            self._later.update({c: i for c, i in found.items() if c not in self._sessions})
        return self._later

    async def settled(self) -> None:
        """Wait until the chats left for later are known (start-up reads them after the
        server answers)."""
        pending = self._pending
        if pending is not None:
            await pending.wait()
        self._idle()

    def is_deferred(self, context_id: str) -> bool:
        return context_id in self._idle()

    def idle(self) -> list[tuple[str, IdleChat]]:
        """The chats not rebuilt yet that the chat list shows, with what it shows (a chat a
        shared worker's sweep loaded meanwhile is listed as loaded)."""
        later = list(self._idle().items())
        return [(c, idle) for c, idle in later if idle is not None and c not in self._sessions]

    def idle_chat(self, context_id: str) -> IdleChat | None:
        return self._idle().get(context_id)

    async def load(self, context_id: str) -> AgentContext | None:
        """The chat ``context_id`` if loaded here; a journaled chat left for later is rebuilt
        now, once: whoever comes meanwhile waits for that one rebuild. None when there is
        no such chat."""
        await self.settled()
        if context_id not in self._later:
            return self.get(context_id)
        async with self._load_locks.hold(context_id):
            if context_id in self._later and self.get(context_id) is None:
                await rebuild.load_chat(self, context_id)  # cancelled: not built, kept for later
            self._later.pop(context_id, None)
        return self.get(context_id)

    # the one way in for a message -------------------------------------------------------
    async def submit(
        self, context_id: str, message: UserMessage, options: SubmitOptions = admission.PLAIN
    ) -> tuple[AgentContext | None, Submission]:
        """Admit a message into the chat ``context_id`` (a new chat when empty) and start
        its run; returns (its chat, what happened).

        ``context_id`` names the chat (404 ``context_not_found`` when unknown or purged;
        with ``create``, the scheduler's case, an unknown chat is made with that id and the
        name ``create``, once the journal took the input); without it, ``follow_input``
        looks the input id up first (a retry whose first answer was lost goes back to its
        chat), else a new chat is opened, and it exists only once the journal took the
        input. Copies of one input are serialised here by input id, and
        the journal's admit decides between processes: every copy gets the first one's run.
        The chat is None when a duplicate's run belongs to a chat this process does not have
        (removed since, or another worker's not loaded here).
        InputConflict, RunHeld, ... propagate and leave nothing behind. ``options``: how
        the message came (``SubmitOptions``)."""
        input_id = admission.ensure_input_id(message)
        await self.settled()  # a new chat's name counts the idle ones
        async with self._input_locks.hold(input_id):
            context = None
            if context_id and options.create is not None:
                await self.load(context_id)
                await self.forget_purged(context_id)
                context = self.get(context_id)
            elif context_id:
                context = await self.chat(context_id)
            elif options.follow_input:
                known = await self.journal.aio.input_context(input_id)
                context = await self.load(known) if known else None
            if context is not None:
                session = session_of(context)
                submission = await session.admit(message, here=options.here, handed=options.handed)
            else:
                new_id = context_id or new_context_id()
                submission = await self._submit_new_chat(new_id, message, options)
            owner = submission.context_id  # a duplicate's chat may be one left for later
            return (await self.load(owner) if owner else None), submission

    async def _submit_new_chat(
        self, context_id: str, msg: UserMessage, options: SubmitOptions = admission.PLAIN
    ) -> Submission:
        """The journal admits the input under a fresh chat id first; only a created run
        builds the chat (named ``options.create``, with agent ``options.profile``). A copy
        of an input already admitted creates nothing."""
        content = await admission.content(self.journal, msg)
        adm = await self.journal.aio.admit(
            context_id, content.input_id, content.digest, message=content.payload
        )
        if not adm.created:
            owner = self.get(adm.run.context_id)
            return await admission.duplicate(self.journal, adm, content.input_id, owner)
        try:
            context = self.get(context_id)
            if context is None:
                config = self.config()
                config.profile = options.profile or config.profile
                context = self.create(context_id, name=options.create, config=config)
        except BaseException:  # no chat to run it in: the input was not taken after all
            await asyncio.shield(asyncio.to_thread(_withdraw, self.journal, adm.run.id))
            raise
        return session_of(context).start(adm.run, msg)

    async def chat(self, context_id: str) -> AgentContext:
        """The chat a request names: 404 ``context_not_found`` when there is none, also
        when retention removed every run of it (a purged chat is gone, as after a restart).
        A shared worker loads a chat another worker created, and brings an idle chat up to
        the journal first (python/durable/takeover.py). A chat start-up left for later is
        rebuilt here on its first request (``load``)."""
        if context_id:
            await self.load(context_id)
        await self.forget_purged(context_id)
        context = self.get(context_id) if context_id else None
        if context_id:
            context = await self.ownership.named_chat(context_id, context)
        if context is None:
            raise ChatNotFound(f"Chat '{context_id}' not found.")
        return context

    def keeps_open(self, run_id: str) -> bool:
        """A cancelled task leaves its run active (no ``stop`` decision): the server is
        shutting down, or this shared worker lost the run's claim."""
        return self.stopping or self.ownership.keeps_open(run_id)

    async def forget_purged(self, only: str | None = None) -> list[str]:
        """Drop the loaded chats (or ``only`` that one) whose every run retention removed
        (`python -m durability retention` while the server runs); returns their ids."""
        await self.settled()
        wanted = [only] if only is not None else list(self._sessions)
        idle = [c for c in wanted if self._idle_journaled(c)]
        listed = [c for c, _ in self.idle()] if only is None else []
        if not idle and not listed:
            return []
        alive = await self.journal.aio.contexts_with_runs(idle + listed)
        for context_id in listed:  # not rebuilt yet: no longer listed, and gone if named
            if context_id not in alive and self._later.get(context_id) is not None:
                self._later[context_id] = None
        gone = []
        for context_id in idle:
            if context_id in alive or not self._idle_journaled(context_id):  # checked again
                continue
            session = self._sessions[context_id]
            session.purged = True  # the journal forgot the chat already: journal nothing
            AgentContext.remove(context_id)
            gone.append(context_id)
        if gone:
            logger.info("retention removed every run of %d chat(s): dropped", len(gone))
        return gone

    def _idle_journaled(self, context_id: str) -> bool:
        session = self._sessions.get(context_id)
        if session is None or not session.journaled:
            return False
        return not session.busy

    # what the sessions share ----------------------------------------------------------------
    def in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        """A journal write that nobody waits for; ``flush``/``close`` wait for it."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def flush(self) -> None:
        """Wait for the journal writes started in the background."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    @property
    def resume_slots(self) -> asyncio.Semaphore:
        """At most two runs resume at a time."""
        if self._resume_slots is None:
            self._resume_slots = asyncio.Semaphore(MAX_PARALLEL_RESUMES)
        return self._resume_slots

    def tasks(self) -> list[asyncio.Task[str]]:
        """The chats' tasks that have not ended."""
        found = [s.task for s in self._sessions.values()]
        return [t for t in found if t is not None and not t.done()]

    def begin_shutdown(self) -> None:
        """The process is stopping: cancel every chat's task; their runs stay active, so the
        next start recovers them (a person's Stop ends a run; a server stop never does)."""
        self.stopping = True
        for session in list(self._sessions.values()):
            session.stop()

    async def close(self, timeout: float = 5.0) -> None:
        """Stop every chat (runs stay active), forget them, flush the background journal
        writes, then close the journal: no acknowledged write is lost on a clean stop."""
        await self.scheduler.stop()  # first: a firing it admits now is stopped below too
        self.begin_shutdown()
        if self.rechecker is not None:
            self.rechecker.cancel()
            await asyncio.gather(self.rechecker, return_exceptions=True)
        pending = self.tasks()
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        closers = []
        for session in list(self._sessions.values()):
            context = session.context
            AgentContext.unregister(context.id, context)
            closers.append(context.shells.close_all())
        self._sessions.clear()
        if closers:
            done = asyncio.gather(*closers, return_exceptions=True)
            await asyncio.wait_for(done, timeout=timeout)
        await self.flush()
        if self._pending is not None:  # the idle chats' read ends before its journal does
            await self._pending.wait()
        self.journal.close()


def _withdraw(journal: Journal, run_id: str) -> None:
    """Remove a run admitted a moment ago that never started (and its input id with it)."""
    try:
        journal.set_run_status(run_id, RunStatus.FAILED, reason="chat_not_created")
        journal.delete_run(run_id)
    except DurabilityError as exc:
        logger.warning("run %s could not be withdrawn: %s", run_id, exc.code)
