"""Shared workers: chats loaded from the shared journal, and what moves with a taken-over run.

Any worker serves any chat, so a chat another worker created is loaded here from its
latest checkpoint (``load_chat``), and an idle chat is brought up to the journal before it
is shown or continued (``refresh_chat``): its last run may have run on another worker.
A run taken over gets the chat's work folder, its browser profile and the run's attachments
back from the journal's encrypted resources, each in a new private directory
(``restore_resources``); the browser profile's file then replaces the chat's own in its
private browser folder (usr/browser/<chat>/profile).
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durability.errors import DurabilityError
from python.durable import checkpoint, notices, rebuild
from python.durable.session import DurableSession, session_of

if TYPE_CHECKING:  # pragma: no cover
    from agent import AgentContext
    from durability.cluster import Claim
    from durability.records import Run
    from durability.resources import SharedResources
    from python.durable.chats import DurableChats

logger = logging.getLogger("a0.shared")


def _held_elsewhere(detail: Any) -> None:
    """A chat that cannot be rebuilt here is shown empty with a warning; its open run, if
    any, belongs to whichever worker claims it (that worker's resume decides), so nothing
    is held from here."""
    return None


def _build(chats: DurableChats, read: rebuild.ChatRead) -> AgentContext | None:
    """The chat from what ``rebuild.read_chat`` read (checkpoint and the calls after it),
    marked as synced with that checkpoint."""
    context = rebuild.build_chat(chats, read, _held_elsewhere)
    if context is not None and read.latest is not None:
        session_of(context).synced_checkpoint = read.latest.id
    return context


async def load_chat(chats: DurableChats, context_id: str, *, fresh: bool = False) -> AgentContext:
    """The chat ``context_id`` as the journal has it, rebuilt the way start-up rebuilds a
    chat (latest checkpoint, then the calls journaled after it); a chat already loaded is
    returned as it is (``fresh``: rebuilt too when idle, since another worker may have
    journaled calls after the checkpoint it was loaded from), and a run's chat is made even
    when the journal holds no state."""
    read = await asyncio.to_thread(rebuild.read_chat, chats.journal, context_id)
    context = chats.get(context_id)
    if context is None or (fresh and not session_of(context).busy):
        context = _build(chats, read) or context
    if context is None:  # removed after its newest run, yet a run of it was claimed
        context = chats.create(context_id)
        session_of(context).journaled = True
    return context


async def find_chat(chats: DurableChats, context_id: str) -> AgentContext | None:
    """A chat created through another worker, loaded here; None when the journal has no
    run of it, or it was removed."""
    read = await asyncio.to_thread(rebuild.read_chat, chats.journal, context_id)
    if read.gone:
        return None
    return chats.get(context_id) or _build(chats, read)


async def refresh_chat(chats: DurableChats, session: DurableSession) -> None:
    """Bring an idle chat up to its latest checkpoint when another worker wrote it."""
    if session.busy:
        return
    latest = await chats.journal.aio.latest_context_checkpoint(
        session.context.id, histories=checkpoint.current_chains
    )
    if latest is None or latest.id == session.synced_checkpoint:
        return
    if latest.run_id == session.last_run_id:  # this process wrote it: nothing new
        session.synced_checkpoint = latest.id
        return
    if session.busy:
        return  # it started meanwhile
    state = latest.state.get("current") or {}
    checkpoint.restore_chain(session.context, state, latest.histories)
    session.synced_checkpoint = latest.id


def warn_held(context: AgentContext, run: Run) -> None:
    notices.warn_held(context, run.id, run.reason, run.reason_detail)


# resources ---------------------------------------------------------------------------------
def _private_dir(kind: str, claim: Claim) -> Path:
    """A new path under usr/shared/ (the restore creates it 0700)."""
    from python.helpers import files

    root = files.usr_dir() / "shared"
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    parent = Path(tempfile.mkdtemp(prefix=f"{kind}-{claim.run_id[:12]}-", dir=root))
    return parent / kind


def _restore_resources(
    resources: SharedResources, context: AgentContext, claim: Claim
) -> dict[str, Any]:
    restored: dict[str, Any] = {}
    folder = resources.latest(claim.context_id, "workdir")
    if folder is not None:
        target = resources.restore(folder.id, _private_dir("workdir", claim))
        for agent in context.agents():
            agent.config.workdir = str(target)
        context.config.workdir = str(target)
        restored["workdir"] = str(target)
    profile = resources.latest(claim.context_id, "browser_profile")
    if profile is not None:
        target = resources.restore(profile.id, _private_dir("browser_profile", claim))
        restored["browser profile"] = _adopt_profile(claim.context_id, target)
    attachments = resources.latest(claim.context_id, "attachments", run_id=claim.run_id)
    if attachments is not None:
        target = resources.restore(attachments.id, _private_dir("attachments", claim))
        restored["attachments"] = str(target)
    return restored


def _adopt_profile(context_id: str, restored: Path) -> str:
    """Move the restored profile file into the chat's private browser folder (it replaces
    whatever this worker had: the journal's copy is the newer one)."""
    from python.helpers.browser_session import STATE_FILE, profile_dir

    folder = profile_dir(context_id)
    source = restored / STATE_FILE
    if source.is_file():
        os.replace(source, folder / STATE_FILE)
    return str(folder)


async def restore_resources(
    resources: SharedResources | None, context: AgentContext, claim: Claim
) -> None:
    """The chat's work folder and the run's attachments, from the journal, each into a new
    private directory on this worker (never merged into an existing folder)."""
    if resources is None:
        return
    try:
        restored = await asyncio.to_thread(_restore_resources, resources, context, claim)
    except DurabilityError as exc:
        logger.warning("run %s: resources not restored (%s)", claim.run_id, exc.code)
        return
    if restored:
        context.close_shells()  # shells start in the restored folder
        logger.info("run %s: resources restored into %s", claim.run_id, ", ".join(restored))


def _attachment_files(paths: list[str]) -> dict[str, bytes]:
    """name -> bytes of a message's attachment files (a second file of one name gets a
    numbered name; a file that cannot be read is left out)."""
    files: dict[str, bytes] = {}
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        name, n = Path(path).name, 1
        while name in files:
            n += 1
            name = f"{n}-{Path(path).name}"
        files[name] = data
    return files


async def store_attachments(
    resources: SharedResources, context: AgentContext, run_id: str, paths: list[str]
) -> None:
    """Store a new run's attachments, encrypted, for the worker that may continue it; a
    refusal (a hostile name, over the size limit) is logged and never stops the run."""
    if not paths:
        return

    def store() -> int:
        files = _attachment_files(paths)
        if files:
            resources.store_attachments(context.id, run_id, files)
        return len(files)

    try:
        stored = await asyncio.to_thread(store)
    except DurabilityError as exc:
        logger.warning("run %s: attachments not stored (%s)", run_id, exc.code)
        context.log.log(
            type="warning",
            content=f"The attachments were not stored for other workers ({exc.code}).",
            kvps={"run_id": run_id, "code": exc.code},
        )
        return
    logger.info("run %s: %d attachment(s) stored for other workers", run_id, stored)


def _profile_folder(context_id: str) -> Path | None:
    """The chat's browser profile folder, when its browser has saved one."""
    from python.helpers.browser_session import STATE_FILE, profile_dir

    folder = profile_dir(context_id)
    return folder if (folder / STATE_FILE).is_file() else None


async def snapshot_workdir(resources: SharedResources, context: AgentContext, run_id: str) -> None:
    """Store the chat's work folder and its browser profile (only changed files) for the
    worker that may continue the run; a failure is logged and never stops the run."""
    context_id = context.id
    folders = {"workdir": context.config.workdir_path()}
    profile = _profile_folder(context_id)
    if profile is not None:
        folders["browser_profile"] = profile

    def capture() -> None:
        for kind, folder in folders.items():
            if folder.is_dir():
                previous = resources.latest(context_id, kind)
                resources.snapshot_folder(
                    folder, context_id=context_id, run_id=run_id, previous=previous, kind=kind
                )

    try:
        await asyncio.to_thread(capture)
    except DurabilityError as exc:
        logger.warning("run %s: work folder not stored (%s)", run_id, exc.code)
