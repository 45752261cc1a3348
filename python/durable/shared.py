"""A shared worker: the server's side of claims, leases and takeovers (PostgreSQL).

With ``A0_DURABILITY_POSTGRES_DSN`` set, python/durable/startup.py opens the shared journal
as this worker's (``journal.cluster``, durability/cluster.py) and ``Runtime.start`` starts a
:class:`SharedWorker` next to the chats. It

- is the process's ``Ownership`` (python/durable/ownership.py; ``LocalOwnership`` with
  SQLite) and gates every effect (``gate``): a model or tool call starts only while
  this worker's claim on the run is live on its own clock; otherwise the run stops here;
- renews the claims by a heartbeat thread; a claim found taken over stops its run here;
- on a run that ends (completed, failed, stopped) gives its claim up; a held run keeps it,
  so the decision is carried out where the run's shell receipts and work folder are;
- polls the journal for the runs it holds: a decision made through another worker
  resumes or stops the run here, a message admitted through another worker reaches the
  working agent as an intervention;
- sweeps for runs whose lease expired (``cluster.sweep``), classifies each exactly as
  start-up recovery does (durability/recovery.py) and resumes or holds it, at most
  ``MAX_PARALLEL_RESUMES`` taken-over runs at once;
- loads chats other workers created, and refreshes an idle chat from the journal before
  it is shown or continued.

A run stopped here because its claim was lost stays active in the journal: nothing of it
commits from here (fencing), nothing new starts, and this worker does not resume it unless
it claims it again. docs/shared-workers.md describes the whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from agent import UserMessage
from durability import recovery
from durability.errors import DurabilityError, FencingLost
from durability.status import TERMINAL_RUN_STATUSES, HoldReason, PlanAction, Policy, RunStatus
from python.durable import takeover
from python.durable.chats import MAX_PARALLEL_RESUMES
from python.durable.session import DurableSession, session_of

if TYPE_CHECKING:  # pragma: no cover
    from agent import AgentContext
    from durability.cluster import Claim, Cluster, Heartbeat
    from durability.config import SharedConfig
    from durability.records import Call
    from durability.resources import SharedResources
    from python.durable.chats import DurableChats

logger = logging.getLogger("a0.shared")

#: How often the worker looks at its held runs and sweeps (at most; see ``interval``).
POLL_SECONDS = 1.0


class SharedWorker:
    """One server process's part in a shared journal (built by ``Runtime.start``): the
    process's ``Ownership`` (python/durable/ownership.py) when the journal is shared."""

    others_may_run = True  # a run open in the journal may work on another worker

    def __init__(
        self,
        chats: DurableChats,
        config: SharedConfig,
        resources: SharedResources | None = None,
    ) -> None:
        cluster = chats.journal.cluster
        if cluster is None:
            raise ValueError("a shared worker needs a journal opened with a worker id")
        self.chats = chats
        self.cluster: Cluster = cluster
        self.config = config
        self.resources = resources
        self.interval = min(POLL_SECONDS, config.heartbeat_seconds)
        self._heartbeat: Heartbeat | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._takeovers: set[asyncio.Task[str]] = set()
        self._seen_interventions: dict[str, set[str]] = {}  # run id -> input ids handled
        self._lost: set[str] = set()  # runs stopped here because their claim was lost
        self._held: set[str] = set()  # held runs this worker keeps, waiting for a decision
        self._not_chats: set[str] = set()  # contexts found removed in the journal
        chats.ownership = self

    @property
    def worker_id(self) -> str:
        return self.cluster.worker_id

    # lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()

        def lost(run_ids: list[str]) -> None:  # the heartbeat thread
            for run_id in run_ids:
                loop.call_soon_threadsafe(self.claim_lost, run_id, "heartbeat: taken over")

        self._heartbeat = self.cluster.start_heartbeat(self.config.heartbeat_seconds, lost)
        self._loop_task = loop.create_task(self._run(), name=f"shared-worker:{self.worker_id}")
        logger.info(
            "shared worker %s: lease %.1fs, heartbeat %.1fs",
            self.worker_id,
            self.cluster.lease_seconds,
            self.config.heartbeat_seconds,
        )

    async def release(self, timeout: float) -> None:
        """Shutting down: the chats' tasks end (at most ``timeout`` seconds), then the
        claims are given up."""
        pending = self.chats.tasks()
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        await self.close()

    async def close(self) -> None:
        """Stop sweeping and renewing, and give every claim up (the runs stay active: the
        next sweeping worker resumes them at once instead of after the lease)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self._heartbeat is not None:
            await asyncio.to_thread(self._heartbeat.stop)
        try:
            released = await asyncio.to_thread(self.cluster.release_all)
        except DurabilityError as exc:
            logger.warning("claims not released (%s): they expire after the lease", exc.code)
        else:
            logger.info("shared worker %s released %d claim(s)", self.worker_id, released)

    # the gate before each effect -------------------------------------------------------------
    async def gate(self, call: Call) -> None:
        """Refuse to start an effect unless this worker's claim on the run is live."""
        if self.cluster.is_live(call.run_id):
            return
        reason = "not_claimed" if self.cluster.get(call.run_id) is None else "lease_expired"
        logger.warning(
            "effect not started (%s): worker %s's claim on run %s is not live; %s (call %s)"
            " does not start",
            reason,
            self.worker_id,
            call.run_id,
            call.name,
            call.id,
        )
        raise FencingLost(
            "this worker's claim on the run is not live: the effect does not start",
            run_id=call.run_id,
            worker_id=self.worker_id,
            reason=reason,
            effect=call.name,
        )

    def keeps_open(self, run_id: str) -> bool:
        """True for a run stopped here because its claim was lost: it stays active."""
        return run_id in self._lost

    def claim_lost(self, run_id: str, why: str) -> None:
        """The claim is gone (taken over, lease run out, fencing refused a write): stop the
        run here without writing anything for it; another worker continues it."""
        self._lost.add(run_id)
        self.cluster.lose(run_id, why)
        for session in self._sessions_of(run_id):
            if session.stop():
                logger.warning(
                    "worker %s stopped run %s locally (%s): another worker continues it",
                    self.worker_id,
                    run_id,
                    why,
                )

    def _sessions_of(self, run_id: str) -> list[DurableSession]:
        found = []
        for context in self.chats.contexts():
            session = session_of(context)
            if session.run is not None and session.run.run_id == run_id:
                found.append(session)
        return found

    def run_ended(self, run_id: str) -> None:
        """The run's task ended here: a finished run's claim is given up; a held or still
        active run keeps it (a decision continues it here; shutdown releases it)."""
        if self.cluster.get(run_id) is not None:
            self.chats.in_background(asyncio.to_thread(self._release_finished, run_id))

    def _release_finished(self, run_id: str) -> None:
        try:
            status = self.chats.journal.get_run(run_id).status
            if status in TERMINAL_RUN_STATUSES:
                self._release(run_id)
            elif status == RunStatus.NEEDS_ATTENTION:
                self._held.add(run_id)
        except DurabilityError as exc:
            logger.warning("claim on run %s not checked (%s)", run_id, exc.code)

    def _release(self, run_id: str) -> None:
        try:
            self.cluster.release(run_id)
        except DurabilityError as exc:
            logger.warning("claim on run %s not released (%s): it expires", run_id, exc.code)

    async def named_chat(
        self, context_id: str, context: AgentContext | None
    ) -> AgentContext | None:
        """The chat a request names: loaded from the journal when another worker created
        it, brought up to the journal first when idle."""
        if context is None:
            return await takeover.find_chat(self.chats, context_id)
        await takeover.refresh_chat(self.chats, session_of(context))
        return context

    async def chat_for_poll(self, context_id: str) -> AgentContext | None:
        """A chat as the UI's poll shows it: loaded from the journal when another worker
        created it, refreshed when idle (at most once per poll interval)."""
        context = self.chats.get(context_id)
        if context is None:
            if context_id in self._not_chats:
                return None
            return await takeover.find_chat(self.chats, context_id)
        session = session_of(context)
        now = time.monotonic()
        if now - session.refreshed_at >= self.interval:
            session.refreshed_at = now
            await takeover.refresh_chat(self.chats, session)
        return context

    async def take(self, run_id: str) -> bool:
        """A decision made here made the run active: True when this worker holds its claim
        (or just won it) and may resume it here; False when another worker holds it."""
        self._held.discard(run_id)
        if self.cluster.get(run_id) is not None:
            return True
        claim = await asyncio.to_thread(self.cluster.claim, run_id)
        if claim is None:
            return False
        self._lost.discard(run_id)
        context = self.chats.get(claim.context_id)
        if context is not None and claim.previous_worker not in (None, self.worker_id):
            await takeover.restore_resources(self.resources, context, claim)
        return True

    async def store_attachments(self, context: AgentContext, run_id: str, paths: list[str]) -> None:
        """A new run's attachments, stored encrypted for a worker that may take it over."""
        if self.resources is not None:
            await takeover.store_attachments(self.resources, context, run_id, paths)

    async def after_iteration(self, context: AgentContext, run_id: str) -> None:
        """After each checkpoint: store the work folder for a worker that may take over."""
        if self.resources is not None and self.cluster.is_live(run_id):
            await takeover.snapshot_workdir(self.resources, context, run_id)

    # the worker's loop: held runs, then a sweep ----------------------------------------------
    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except DurabilityError as exc:
                logger.warning("shared worker tick failed (%s); trying again", exc.code)
            except Exception as exc:
                logger.warning("shared worker tick failed (%s); trying again", type(exc).__name__)

    async def tick(self) -> None:
        await self.sync_chats()
        for claim in self.cluster.claims():
            await self._look_after(claim)
        await self.sweep()

    async def sync_chats(self) -> None:
        """Load the chats other workers created since this one started."""
        await self.chats.settled()  # the idle chats known first (read in a thread at start-up)
        runs = await self.chats.journal.aio.list_runs(limit=200)
        for context_id in dict.fromkeys(r.context_id for r in runs):
            known = self.chats.get(context_id) is not None or self.chats.is_deferred(context_id)
            if context_id in self._not_chats or known:  # deferred: rebuilt once a request names it
                continue
            if any(c.context_id == context_id for c in self.cluster.claims()):
                continue  # admitted here a moment ago: its session is being built
            if await takeover.find_chat(self.chats, context_id) is None:
                self._not_chats.add(context_id)  # removed: not shown again

    async def _look_after(self, claim: Claim) -> None:
        """A run this worker holds: act on what other workers wrote for it."""
        run = await self.chats.journal.aio.get_run(claim.run_id)
        context = self.chats.get(claim.context_id)
        session = session_of(context) if context is not None else None
        mine = session is not None and session.run is not None and session.run.run_id == run.id
        if run.status in TERMINAL_RUN_STATUSES:
            self._held.discard(run.id)
            if mine and session is not None and session.is_running():
                if session.run is not None and session.run.ending:  # committed by its task
                    logger.info("run %s ended by its task here, which is finishing", run.id)
                    return  # (run_ended releases the claim)
                session.stop()  # a Stop decided through another worker
            else:
                await asyncio.to_thread(self._release, run.id)
            return
        if run.status != RunStatus.ACTIVE:
            self._held.add(run.id)  # it waits here for a person's decision
            return
        if mine and session is not None and session.is_running():
            await self._deliver_interventions(session, run.id)
            return
        if run.id not in self._held:
            return  # active and not held before: its task is starting or just ended
        self._held.discard(run.id)
        if context is None:
            context = await takeover.load_chat(self.chats, claim.context_id)
        session = session_of(context)
        if session.busy:
            return
        logger.info("run %s is active again (a decision): resuming it here", run.id)
        await takeover.refresh_chat(self.chats, session)
        session.resume(run.id)

    async def _deliver_interventions(self, session: DurableSession, run_id: str) -> None:
        """Messages admitted for this run through other workers reach the working agent."""
        seen = self._seen_interventions.setdefault(run_id, set())
        events = await self.chats.journal.aio.list_events(run_id=run_id, limit=100_000)
        for event in events:
            if event.type != "intervention" or not isinstance(event.payload, dict):
                continue
            input_id = str(event.payload.get("input_id") or "")
            if not input_id or input_id in seen or input_id in session.local_inputs:
                continue
            seen.add(input_id)
            message = event.payload.get("message")
            message = message if isinstance(message, dict) else {}
            text = str(message.get("message") or "")
            session.context.get_agent().intervention = UserMessage(text, id=input_id)
            logger.info("run %s: a message admitted elsewhere reached the agent", run_id)

    async def sweep(self) -> list[Claim]:
        """Claim expired runs (as many as this worker may resume now) and recover them."""
        self._takeovers = {t for t in self._takeovers if not t.done()}
        free = MAX_PARALLEL_RESUMES - len(self._takeovers)
        if free <= 0:
            return []
        claims = await asyncio.to_thread(self.cluster.sweep, free)
        for claim in claims:
            self._lost.discard(claim.run_id)
            self._seen_interventions.pop(claim.run_id, None)
            await self._recover(claim)
        return claims

    async def _recover(self, claim: Claim) -> None:
        """Classify a taken-over run as start-up recovery does, then resume or hold it.
        Local shell receipts are the previous worker's files: none is used here, so an open
        local shell call is held; a command that ran over SSH has its location in the
        journal, and its remote receipt is read from here (durability/adapters/evidence.py)."""
        journal = self.chats.journal
        try:
            run = await journal.aio.get_run(claim.run_id)
            is_safe = self.chats.policy.shipped_is_safe
            evidence = self.chats.evidence
            adapters: dict[str, recovery.Adapter] = {}
            if evidence is not None:
                adapters[Policy.SHELL] = evidence.classify
                adapters[Policy.PTY] = evidence.classify
            plan = await asyncio.to_thread(
                recovery.classify_run, journal, run, adapters=adapters, is_safe=is_safe
            )
            plan = await asyncio.to_thread(recovery.apply_plan, journal, plan)
        except FencingLost:
            self.claim_lost(claim.run_id, "taken over again during recovery")
            return
        except Exception as exc:
            detail = recovery.error_detail(exc, "takeover")
            with contextlib.suppress(DurabilityError):
                reason = HoldReason.RECOVERY_ERROR
                await journal.aio.mark_needs_attention(claim.run_id, reason, detail)
            logger.warning("run %s held after a failed takeover: %s", claim.run_id, detail["type"])
            return
        # a chat loaded here while the run worked elsewhere is brought up to the journal
        context = await takeover.load_chat(self.chats, claim.context_id, fresh=True)
        session = session_of(context)
        if plan.action != PlanAction.RESUME:
            self._held.add(claim.run_id)  # a decision may come before the next tick sees it
            takeover.warn_held(context, plan.run)
            logger.info("run %s taken over and held (%s)", claim.run_id, plan.run.reason)
            return
        if session.is_running():  # the chat works on something else here: let it be
            logger.warning("run %s taken over but its chat is busy here", claim.run_id)
            return
        await takeover.restore_resources(self.resources, session.context, claim)
        logger.info("run %s taken over by %s: resuming", claim.run_id, self.worker_id)
        task = session.resume(claim.run_id, plan.permits)
        self._takeovers.add(task)

    def describe(self) -> dict[str, Any]:
        """What /api/health may show (never the DSN)."""
        return {"worker_id": self.worker_id, "claims": len(self.cluster.claims())}
