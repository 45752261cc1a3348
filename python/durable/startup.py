"""The server's journal: open it at start-up, rebuild and recover the chats; close it.

``Runtime.start`` calls :func:`open_chats`: apply retention, open usr/durability/
journal.sqlite, hash the replay pins, register the shell receipts adapter, rebuild the chats
with an open run (the idle ones are rebuilt later: python/durable/rebuild.py), recover open
runs, prune receipts nobody needs. ``Runtime.shutdown`` calls
``DurableChats.close`` (background journal writes are flushed before the journal closes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durability import Journal
from durability.adapters.evidence import (
    ShellEvidence,
    TargetFor,
    journal_locator,
    location_recorder,
)
from durability.adapters.pty import PTY_POLICY, prune_terminals, running_commands
from durability.adapters.shell import SHELL_POLICY, ShellReceipts
from durability.adapters.ssh import REMOTE_RECEIPTS, SshTarget
from durability.config import DEFAULT_DEFER_SECONDS, DEFER_MS, journal_defer_seconds
from durability.errors import ConfigurationError, DurabilityError
from durability.masking import Masker
from durability.paths import journal_path, receipts_dir
from durability.recovery import RecoveryPlan
from durability.retention import DEFAULT_RETENTION_DAYS, DEFAULT_RETENTION_RUNS, apply_retention
from durability.status import CallState, PlanAction
from python.durable.chats import ConfigFactory, DurableChats
from python.durable.policy import ReplayPolicy
from python.durable.rebuild import restore_contexts
from python.durable.recheck import DEFAULT_INTERVAL, recheck_forever
from python.durable.resume import recover

if TYPE_CHECKING:  # pragma: no cover
    from durability.config import SharedConfig

logger = logging.getLogger("a0.journal")


def _retention_limits(settings: Mapping[str, Any]) -> tuple[int, float]:
    def number(key: str, default: float) -> float:
        value = settings.get(key, default)
        try:
            return float(value)
        except (TypeError, ValueError):
            return default

    runs = number("retention_runs", DEFAULT_RETENTION_RUNS)
    return int(runs), number("retention_days", DEFAULT_RETENTION_DAYS)


def retain(usr: Path, settings: Mapping[str, Any]) -> None:
    """Forget old finished runs (settings retention_runs / retention_days); never fatal."""
    path = journal_path(usr)
    if not path.exists():
        return
    keep_runs, keep_days = _retention_limits(settings)
    try:
        report = apply_retention(path, keep_runs=keep_runs, keep_days=keep_days)
        logger.info("retention: %d finished runs removed", report.runs_removed)
    except DurabilityError as exc:  # a bad setting must not stop the server
        logger.warning("retention skipped: %s", exc.code)
    except Exception as exc:
        logger.warning("retention skipped: %s", type(exc).__name__)


def receipt_needed(journal: Journal) -> Callable[[str], bool]:
    """A receipt is kept while its call is open (no result committed: the receipt is the
    evidence recovery reads) in a run still open (active or held)."""

    def needed(call_id: str) -> bool:
        try:
            call = journal.get_call(call_id)
            return call.state == CallState.OPEN and journal.get_run(call.run_id).is_open
        except DurabilityError:  # the call or its run is gone (retention)
            return False

    return needed


def ssh_target_for(usr: Path) -> TargetFor:
    """How this worker reads a receipt on an SSH host: the location the call recorded, with
    the login of the current settings (its password only for the same host, port and user)."""

    def target_for(ssh: Mapping[str, Any]) -> SshTarget | None:
        from python.helpers import settings as settings_mod
        from python.helpers.ssh_shell import target_from_settings

        current = {**settings_mod.load(usr), "code_exec_ssh_enabled": True}
        configured = target_from_settings(current, usr)
        try:
            host, port, user = str(ssh["host"]), int(ssh["port"]), str(ssh["user"])
        except (KeyError, TypeError, ValueError):
            return None
        if configured is None:
            return None
        same = (configured.host, configured.port, configured.user) == (host, port, user)
        return SshTarget(
            host=host,
            port=port,
            user=user,
            password=configured.password if same else "",
            key_file=configured.key_file,
            known_hosts=configured.known_hosts,
            receipts=str(ssh.get("folder") or REMOTE_RECEIPTS),
        )

    return target_for


def attach_evidence(chats: DurableChats, usr: Path, *, owner: bool = True) -> ShellEvidence | None:
    """Make the chats' evidence adapter; every SSH command's location goes into the journal."""
    receipts = chats.receipts
    if receipts is None:
        return None
    receipts.on_remote = location_recorder(chats.journal)
    journal = chats.journal
    chats.evidence = ShellEvidence(
        receipts,
        target_for=ssh_target_for(usr),
        locate=journal_locator(journal),
        owner=owner,
        context_of=lambda call: journal.get_run(call.run_id).context_id,
    )
    return chats.evidence


def start_recheck(chats: DurableChats, settings: Mapping[str, Any]) -> None:
    """The periodic re-check of held runs (python/durable/recheck.py)."""
    try:
        interval = float(settings.get("recovery_recheck_seconds", DEFAULT_INTERVAL))
    except (TypeError, ValueError):
        interval = DEFAULT_INTERVAL
    if interval > 0:
        work = recheck_forever(chats, interval)
        chats.rechecker = asyncio.get_running_loop().create_task(work, name="recovery-recheck")


def _open(usr: Path, masker: Masker, config: ConfigFactory) -> DurableChats:
    try:  # how long results and checkpoints wait for the run's next write to ride on
        defer = journal_defer_seconds()
    except ConfigurationError as exc:
        logger.warning("%s ignored (%s): the default applies", DEFER_MS, exc.message)
        defer = DEFAULT_DEFER_SECONDS
    journal = Journal.open_sqlite(journal_path(usr), masker=masker, defer_seconds=defer)
    policy = ReplayPolicy()
    policy.preload()
    receipts = ShellReceipts(receipts_dir(usr))
    return DurableChats(journal, config=config, receipts=receipts, policy=policy)


async def open_chats(
    usr: Path, settings: Mapping[str, Any], masker: Masker, config: ConfigFactory
) -> tuple[DurableChats, list[RecoveryPlan]]:
    """Open the journal, rebuild the chats with an open run, recover those runs; the chats
    and the plans. The idle chats are left to ``DurableChats.load``."""
    await asyncio.to_thread(retain, usr, settings)
    chats = await asyncio.to_thread(_open, usr, masker, config)
    # only the chats recovery needs before serving; the idle ones are listed once read (in
    # a thread, the server answers meanwhile) and rebuilt when named (DurableChats.load)
    contexts = await asyncio.to_thread(restore_contexts, chats, idle_later=True)
    receipts = chats.receipts
    evidence = attach_evidence(chats, usr)
    adapters = {}
    if evidence is not None:  # the shell's receipts and the terminal's delivery receipts
        adapters = {SHELL_POLICY: evidence.classify, PTY_POLICY: evidence.classify}
    try:  # each run is held on its own failure; this guards what all runs share
        plans = await recover(chats, adapters=adapters)
    except DurabilityError as exc:
        logger.warning("recovery did not run: %s", exc.code)
        plans = []
    except Exception as exc:
        logger.warning("recovery did not run: %s", type(exc).__name__)
        plans = []
    if receipts is not None:
        await asyncio.to_thread(_prune, receipts, chats.journal)
    start_recheck(chats, settings)
    held = [p for p in plans if p.action in (PlanAction.HOLD, PlanAction.SKIP)]
    resumed = len(plans) - len(held)
    # the idle chats are counted once read ("idle chats listed: N", python/durable/idle.py)
    logger.info(
        "journal open: %d chats, %d runs recovered, %d held", len(contexts), resumed, len(held)
    )
    return chats, plans


def _open_shared(
    usr: Path, shared: SharedConfig, masker: Masker, config: ConfigFactory
) -> DurableChats:
    journal = Journal.open_postgres(
        shared.dsn,
        namespace=shared.namespace,
        masker=masker,
        pool_size=shared.pool_size,
        worker_id=shared.worker_id,
        lease_seconds=shared.lease_seconds,
        liveness=shared.liveness,
    )
    policy = ReplayPolicy()
    policy.preload()
    receipts = ShellReceipts(receipts_dir(usr))
    return DurableChats(journal, config=config, receipts=receipts, policy=policy)


async def open_shared_chats(
    usr: Path, shared: SharedConfig, masker: Masker, config: ConfigFactory
) -> DurableChats:
    """A shared worker's chats: the PostgreSQL journal opened as this worker's, the chats
    with an open run rebuilt from it, the idle ones left to ``DurableChats.load`` (or a
    poll or the sweep loading them, python/durable/takeover.py). Open runs are not
    recovered here: they belong to whoever holds their claim, and this worker's sweeper
    (python/durable/shared.py) takes those whose lease expired through the same
    classification as start-up recovery."""
    chats = await asyncio.to_thread(_open_shared, usr, shared, masker, config)
    attach_evidence(chats, usr, owner=False)  # local receipts are this worker's alone
    from python.helpers import settings as settings_mod

    start_recheck(chats, await asyncio.to_thread(settings_mod.load, usr))
    contexts = await asyncio.to_thread(restore_contexts, chats, idle_later=True)
    logger.info(
        "shared journal open (namespace %s, worker %s): %d chats",
        shared.namespace,
        shared.worker_id,
        len(contexts),
    )
    return chats


def _prune(receipts: ShellReceipts, journal: Journal) -> None:
    try:
        needed, running = receipt_needed(journal), running_commands(receipts.folder)
        pruned = receipts.prune(lambda call_id: call_id in running or needed(call_id))
        pruned += prune_terminals(receipts.folder, needed)
    except Exception as exc:
        logger.warning("receipts not pruned: %s", type(exc).__name__)
        return
    if pruned:
        logger.info("receipts: %d finished calls' receipts removed", pruned)
