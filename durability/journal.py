"""The journal: the API the agent loop calls. Policy lives here; SQL lives in store/.

Every method is synchronous and thread-safe; a write returns once it is durable. Code on
an asyncio loop uses ``journal.aio.<method>(...)`` (the same methods, run in a thread).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from durability import _decisions, checkpoints, documents, integrity, schedules
from durability._runs import bump, load_run, require_active, transition
from durability.canonical import (
    canonical_json,
    digest,
    digest_bytes,
    digest_text,
    fingerprint_from_json,
    is_digest,
    storable_json,
)
from durability.dsn import PostgresDsn
from durability.errors import (
    ActiveRunExists,
    BlobNotFound,
    CallNotFound,
    ConflictNotFound,
    FencingLost,
    InputConflict,
    IntentMissing,
    InvalidArgument,
    InvalidTransition,
    NoActiveRun,
    NoteRequired,
    NotSerializable,
    ReplayDivergence,
    ResultConflict,
    RunHeld,
)
from durability.masking import Masker
from durability.records import (
    CALL_KINDS,
    DECISIONS,
    DECISIONS_NEEDING_NOTE,
    MAX_INT,
    MAX_RETRY_ATTEMPTS,
    OPEN_RUN_STATUSES,
    RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    Admission,
    Call,
    Checkpoint,
    CheckpointData,
    CheckpointRef,
    Conflict,
    Decision,
    DecisionOutcome,
    Document,
    Event,
    RetryGrant,
    Run,
    RunDetail,
)
from durability.store.base import InputRow, Store, StoreTx

if TYPE_CHECKING:  # pragma: no cover
    from durability.cluster import Cluster

T = TypeVar("T")
MAX_ID_LENGTH = 200
_CONTROL_CHARS = re.compile(r"[\x00-\x1f]")


def _write_name(op: Callable[..., Any]) -> str:
    """The journal method a run's write belongs to (``Journal.commit_result.<locals>.op``
    gives ``commit_result``), for the line that says it was refused."""
    return op.__qualname__.split(".<locals>", 1)[0].rsplit(".", 1)[-1]


def _require_text(field: str, value: object, max_length: int = MAX_ID_LENGTH) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > max_length:
        raise InvalidArgument(f"{field} must be a non-empty string", field=field)
    if _CONTROL_CHARS.search(value):
        raise InvalidArgument(f"{field} contains control characters", field=field)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument(f"{field} is not valid Unicode", field=field) from None
    return value


def _require_int(field: str, value: object, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidArgument(f"{field} must be an integer >= {minimum}", field=field)
    if value > MAX_INT:
        raise InvalidArgument(f"{field} must be at most {MAX_INT}", field=field)
    return value


def _require_digest(field: str, value: object) -> str:
    if not is_digest(value):
        raise InvalidArgument(f"{field} must be a lowercase hex SHA-256", field=field)
    return str(value)


def _require_instant(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(f"{field} must be a finite number of seconds", field=field)
    return float(value)


class Journal:
    """Admit inputs, journal call intents and results, checkpoint, decide, and read back."""

    def __init__(
        self,
        store: Store,
        *,
        masker: Masker | None = None,
        clock: Callable[[], float] = time.time,
        cluster: Cluster | None = None,
    ) -> None:
        self.store = store
        self._masker = masker or Masker({})
        self._clock = clock
        self._history_cache = checkpoints.HistoryCache()
        #: Shared workers only: this worker's claims; every run write is fenced by them.
        self.cluster = cluster
        if cluster is not None:
            cluster.on_claim = lambda claim: self._history_cache.forget(claim.context_id)

    @classmethod
    def open_sqlite(
        cls,
        path: str | os.PathLike[str],
        *,
        masker: Masker | None = None,
        clock: Callable[[], float] = time.time,
        quick_check: bool = True,
    ) -> Journal:
        """Open (creating 0600 in a 0700 folder, migrating) the SQLite journal at ``path``."""
        from durability.store.sqlite import SqliteStore

        return cls(SqliteStore(path, quick_check=quick_check), masker=masker, clock=clock)

    @classmethod
    def open_postgres(
        cls,
        dsn: str | PostgresDsn,
        *,
        namespace: str = "agent_zero",
        masker: Masker | None = None,
        clock: Callable[[], float] = time.time,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        worker_id: str | None = None,
        lease_seconds: float = 30.0,
    ) -> Journal:
        """Open (creating the schema ``namespace``, migrating) the journal on PostgreSQL.

        With ``worker_id`` the journal is a shared worker's: it claims the runs it admits,
        and every write for a run is fenced by this worker's claim on it
        (``journal.cluster``, durability/cluster.py). Without, it takes no claims and
        fences nothing: one process owning every run, like SQLite.
        """
        from durability.cluster import Cluster
        from durability.store.postgres import PostgresStore

        store = PostgresStore(
            dsn, namespace=namespace, pool_size=pool_size, connect_timeout=connect_timeout
        )
        cluster = None
        if worker_id is not None:
            try:
                cluster = Cluster(store, worker_id, lease_seconds=lease_seconds)
            except BaseException:
                store.close()
                raise
        return cls(store, masker=masker, clock=clock, cluster=cluster)

    def _write_run(
        self, op: Callable[[StoreTx], T], *, run_id: str | None = None, call_id: str | None = None
    ) -> T:
        """A write for one run: fenced by this worker's claim when there is a cluster."""
        cluster = self.cluster
        if cluster is None:
            return self.store.write(op)

        def fenced(tx: StoreTx) -> T:
            cluster.check_fence(tx, run_id=run_id, call_id=call_id)
            return op(tx)

        try:
            return self.store.write(fenced)
        except FencingLost as exc:
            cluster.refused(exc, _write_name(op), call_id)
            raise

    # lifecycle
    @property
    def masker(self) -> Masker:
        return self._masker

    def set_masker(self, masker: Masker) -> None:
        """Use new secrets from now on (e.g. after the settings changed)."""
        self._masker = masker
        self._history_cache.clear()

    @property
    def aio(self) -> AsyncJournal:
        return AsyncJournal(self)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def integrity_check(self, full: bool = False) -> list[str]:
        return self.store.integrity_check(full=full)

    def _mask_only(self, value: Any) -> Any:
        try:
            return self._masker.mask(value)
        except RecursionError:
            raise NotSerializable("value is nested too deeply", reason="too_deep") from None

    def _mask(self, value: Any) -> Any:
        masked = self._mask_only(value)
        storable_json(masked)  # refuse what cannot be stored, before the transaction
        return masked

    # admit
    def _admit(
        self, context_id: str, input_id: str, content_digest: str, message: Any, kind: str
    ) -> Admission:
        _require_text("context_id", context_id)
        _require_text("input_id", input_id)
        _require_digest("content_digest", content_digest)
        payload = self._mask(message) if message is not None else None
        now = self._clock()
        adopt: list[Callable[[], Any]] = []

        def recorded(tx: StoreTx, known: InputRow) -> Admission:
            # The digest decides: the same content under the same id is the same input,
            # even when a racing copy named another (e.g. freshly generated) chat.
            if known.digest != content_digest:
                raise InputConflict(
                    "this input id was already used for different content",
                    input_id=input_id, run_id=known.run_id,
                )  # fmt: skip
            return Admission(load_run(tx, known.run_id), created=False, kind=known.kind)

        def op(tx: StoreTx) -> Admission:
            adopt.clear()  # a backend may run op again (PostgreSQL, after a conflict)
            known = tx.get_input(input_id)
            if known is not None:
                return recorded(tx, known)
            open_run = tx.open_run_for_context(context_id)
            if open_run is not None:
                # A racing copy of this input may have committed its run after the first
                # read (PostgreSQL reads each statement afresh): it is the same input.
                known = tx.get_input(input_id)
                if known is not None:
                    return recorded(tx, known)
            if open_run is not None and open_run.status == "needs_attention":
                raise RunHeld(
                    "the chat's run waits for a decision", context_id=context_id,
                    run_id=open_run.id, version=open_run.version,
                )  # fmt: skip
            if kind == "run":
                if open_run is not None:
                    raise ActiveRunExists(
                        "the chat already has an active run",
                        context_id=context_id, run_id=open_run.id,
                    )  # fmt: skip
                tx.ensure_context(context_id, now)
                run = Run(
                    id=uuid.uuid4().hex, context_id=context_id, input_id=input_id,
                    input_digest=content_digest, status="active", version=1, reason=None,
                    reason_detail=None, recovery_attempts=0, created_at=now, updated_at=now,
                )  # fmt: skip
                tx.insert_run(run)
            else:
                if open_run is None:
                    raise NoActiveRun("the chat has no active run", context_id=context_id)
                run = open_run
            tx.insert_input(InputRow(input_id, content_digest, context_id, run.id, kind, now))
            event_type = "input" if kind == "run" else "intervention"
            event = {"input_id": input_id, "message": payload}
            tx.insert_event(context_id, run.id, event_type, event, now, digest(event))
            if kind == "run" and self.cluster is not None:  # the admitting worker runs it
                adopt.append(self.cluster.adopt_new_run(tx, run.id))
            return Admission(run, created=True, kind=kind)

        admission = self.store.write(op)
        for adopted in adopt:
            adopted()
        return admission

    def admit(
        self, context_id: str, input_id: str, content_digest: str, *, message: Any = None
    ) -> Admission:
        """Start a run for a new input, or return the run this input id already started.

        An input id is global: the same id and digest returns its run even when another
        chat is named (the returned run's ``context_id`` says where it went); nothing is
        created then. The same id with other content raises InputConflict."""
        return self._admit(context_id, input_id, content_digest, message, "run")

    def admit_intervention(
        self, context_id: str, input_id: str, content_digest: str, *, message: Any = None
    ) -> Admission:
        """Journal a message that arrived while the chat's run is active, on that run."""
        return self._admit(context_id, input_id, content_digest, message, "intervention")

    def input_context(self, input_id: str) -> str | None:
        """The chat an input id was admitted to, or None: a client that retries without
        knowing the chat (its first answer was lost) is sent back to the same one."""
        _require_text("input_id", input_id)
        row = self.store.read(lambda tx: tx.get_input(input_id))
        return row.context_id if row is not None else None

    # calls
    def record_intent(
        self, run_id: str, *, agent_no: int, seq: int, kind: str, name: str, args: Any,
        policy: str,
    ) -> Call:  # fmt: skip
        """Journal a call before its effect. Returns the recorded call at this position when
        there is one (check ``call.state``: a committed result is reused, never re-run)."""
        _require_text("run_id", run_id)
        _require_int("agent_no", agent_no)
        _require_int("seq", seq)
        if kind not in CALL_KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(CALL_KINDS)}", field="kind")
        _require_text("name", name)
        _require_text("policy", policy, max_length=64)
        masked_args = self._mask_only(args)
        args_json = canonical_json(masked_args)  # refuses what cannot be stored
        fp = fingerprint_from_json(kind, name, args_json, policy)
        now = self._clock()
        fresh = Call(
            id=uuid.uuid4().hex, run_id=run_id, agent_no=agent_no, seq=seq, attempt=1,
            kind=kind, name=name, args=masked_args, policy=policy, fingerprint=fp, state="open",
            result=None, result_digest=None, created_at=now, closed_at=None,
        )  # fmt: skip

        def op(tx: StoreTx) -> Call:
            if tx.insert_call_if_free(fresh, args_json):  # the common case: a new position
                return fresh
            run = load_run(tx, run_id)
            require_active(run)
            latest = tx.latest_call_at(run_id, agent_no, seq)
            if latest is not None and latest.fingerprint != fp:
                detail = {"agent_no": agent_no, "seq": seq, "attempt": latest.attempt,
                          "recorded": latest.fingerprint, "requested": fp}  # fmt: skip
                bump(tx, run, now, status="needs_attention", reason="replay_divergence",
                     reason_detail=detail)  # fmt: skip
                raise ReplayDivergence(
                    f"the call at agent {agent_no}, sequence {seq} differs from the journal",
                    run_id=run_id,
                    **detail,
                )
            if latest is not None and latest.state not in ("superseded", "not_completed"):
                damage = integrity.result_damage(latest)
                if damage is not None:  # a damaged result is never reused: hold the run
                    held = {"status": "needs_attention", "reason": "corrupt_record"}
                    bump(tx, run, now, **held, reason_detail=damage.to_dict())
                    raise damage.error()
                # the arguments handed back are the caller's, proven equal by the fingerprint
                return dataclasses.replace(latest, args=masked_args)
            call = dataclasses.replace(fresh, attempt=(latest.attempt + 1) if latest else 1)
            tx.insert_call(call)
            bump(tx, run, now)
            return call

        return self._write_run(op, run_id=run_id)

    def commit_result(
        self, call_id: str, result: Any, *, failed: bool = False,
        checkpoint: CheckpointData | None = None,
    ) -> Call:  # fmt: skip
        """Commit a call's outcome (optionally with a checkpoint, in one transaction).
        The same result again is a no-op; a different one raises ResultConflict."""
        _require_text("call_id", call_id)
        masked = self._mask_only(result)
        result_json = canonical_json(masked)  # refuses what cannot be stored
        result_digest = digest_text(result_json)
        state = "failed" if failed else "completed"
        now = self._clock()
        cache_update: list[Any] = []

        def op(tx: StoreTx) -> Call:
            cache_update.clear()  # a backend may run op again (PostgreSQL, after a conflict)
            closed = tx.close_open_call(call_id, state, masked, result_json, result_digest, now)
            if closed is not None:  # the common case: an open call of an active run
                done, context_id = closed
                if checkpoint is not None:
                    cache_update.append(
                        self._checkpoint_op(tx, done.run_id, context_id, checkpoint, now)
                    )
                return done
            call = tx.get_call(call_id)
            if call is None:
                raise IntentMissing("no intent was journaled for this call", call_id=call_id)
            if call.state in ("completed", "failed"):
                if call.result_digest == result_digest and call.state == state:
                    return call
                raise ResultConflict(
                    "the call already has a different committed result", call_id=call_id,
                    recorded_digest=call.result_digest, new_digest=result_digest,
                )  # fmt: skip
            if call.state != "open":
                raise ResultConflict(
                    f"the call was closed as {call.state}", call_id=call_id, state=call.state
                )
            run = load_run(tx, call.run_id)
            require_active(run)
            done = dataclasses.replace(
                call, state=state, result=masked, result_digest=result_digest, closed_at=now
            )
            tx.update_call(done)
            bump(tx, run, now)
            if checkpoint is not None:
                cache_update.append(
                    self._checkpoint_op(tx, run.id, run.context_id, checkpoint, now)
                )
            return done

        call = self._write_run(op, call_id=call_id)
        self._apply_cache(cache_update)
        return call

    def get_call(self, call_id: str) -> Call:
        call = self.store.read(lambda tx: tx.get_call(call_id))
        if call is None:
            raise CallNotFound("no such call", call_id=call_id)
        return call

    def list_calls(self, run_id: str) -> list[Call]:
        return self.store.read(lambda tx: tx.list_calls(run_id))

    def open_intents(self, run_id: str) -> list[Call]:
        """Calls of the run whose intent is on disk without a result, oldest first."""
        return self.store.read(lambda tx: tx.list_calls(run_id, ["open"]))

    # checkpoints
    def _checkpoint_op(
        self, tx: StoreTx, run_id: str, context_id: str, data: CheckpointData, now: float
    ) -> tuple[str, CheckpointRef, checkpoints.HistoryCacheEntry]:
        ref, entry = checkpoints.store_checkpoint(
            tx, self._masker, self._history_cache, run_id, context_id, data, now
        )
        return context_id, ref, entry

    def _apply_cache(self, updates: list[Any]) -> None:
        for context_id, _, entry in updates:
            self._history_cache.put(context_id, entry)

    def freeze(self, message: Any) -> checkpoints.FrozenMessage:
        """A history message masked, serialised and hashed once, for checkpoints.

        A caller that keeps its FrozenMessage objects and hands the same object again at the
        same position of a history pays nothing for it: the checkpoint compares the
        unchanged prefix by identity and stores only what is new. Freeze a message again
        whenever it changes.
        """
        return checkpoints.FrozenMessage.of(self._masker, message)

    def write_checkpoint(self, run_id: str, data: CheckpointData) -> CheckpointRef:
        """Commit a masked projection of the agents' state (history stored as deltas)."""
        if not isinstance(data, CheckpointData):
            raise InvalidArgument("data must be a CheckpointData", field="data")
        if not isinstance(data.state, dict) or not isinstance(data.histories, dict):
            raise InvalidArgument("state and histories must be dicts", field="data")
        canonical_json(data.state)  # histories are checked message by message when stored
        now = self._clock()
        cache_update: list[Any] = []

        def op(tx: StoreTx) -> CheckpointRef:
            cache_update.clear()  # a backend may run op again (PostgreSQL, after a conflict)
            context_id = tx.bump_active_run(run_id, now)
            if context_id is None:
                require_active(load_run(tx, run_id))  # raises the precise error
                raise AssertionError("unreachable: the run is active")
            update = self._checkpoint_op(tx, run_id, context_id, data, now)
            cache_update.append(update)
            return update[1]

        ref = self._write_run(op, run_id=run_id)
        self._apply_cache(cache_update)
        return ref

    def latest_checkpoint(self, run_id: str) -> Checkpoint | None:
        """The run's newest checkpoint, validated (CorruptCheckpoint when damaged)."""

        def op(tx: StoreTx) -> Checkpoint | None:
            row = tx.latest_checkpoint(run_id=run_id)
            return checkpoints.load_checkpoint(tx, row) if row else None

        return self.store.read(op)

    def latest_context_checkpoint(self, context_id: str) -> Checkpoint | None:
        """The chat's newest checkpoint over all its runs (to rebuild the chat)."""

        def op(tx: StoreTx) -> Checkpoint | None:
            row = tx.latest_checkpoint(context_id=context_id)
            return checkpoints.load_checkpoint(tx, row) if row else None

        return self.store.read(op)

    # runs
    def get_run(self, run_id: str) -> Run:
        return self.store.read(lambda tx: load_run(tx, run_id))

    def read_run(self, run_id: str) -> RunDetail:
        """A run with all its calls and decisions, from one snapshot."""

        def op(tx: StoreTx) -> RunDetail:
            run = load_run(tx, run_id)
            return RunDetail(run, tx.list_calls(run_id), tx.list_decisions(run_id))

        return self.store.read(op)

    def list_runs(
        self, status: str | Iterable[str] | None = None, *, context_id: str | None = None,
        limit: int = 100,
    ) -> list[Run]:  # fmt: skip
        """Runs, newest first, optionally filtered by status(es) and chat."""
        statuses = [status] if isinstance(status, str) else (list(status) if status else None)
        for s in statuses or []:
            if s not in RUN_STATUSES:
                raise InvalidArgument(f"unknown run status: {s[:30]}", field="status")
        _require_int("limit", limit, minimum=1)
        return self.store.read(lambda tx: tx.list_runs(statuses, context_id, limit))

    def list_nonterminal_runs(self, limit: int = 100_000) -> list[Run]:
        """Active and held runs: what a recovery scan looks at."""
        return self.list_runs(OPEN_RUN_STATUSES, limit=limit)

    def active_run(self, context_id: str) -> Run | None:
        """The chat's open run (active or held), if any."""
        return self.store.read(lambda tx: tx.open_run_for_context(context_id))

    def mark_needs_attention(self, run_id: str, reason: str, detail: Any = None) -> Run:
        """Hold a run for a person (no-op when it is already held)."""
        _require_text("reason", reason, max_length=64)
        masked = self._mask(detail)
        now = self._clock()
        return self._write_run(
            lambda tx: transition(tx, load_run(tx, run_id), "needs_attention", now, reason, masked),
            run_id=run_id,
        )

    def set_run_status(self, run_id: str, status: str, *, reason: str | None = None) -> Run:
        """Move a run along its lifecycle (a held run leaves only by decision or ending)."""
        if status not in RUN_STATUSES:
            raise InvalidArgument(f"unknown run status: {str(status)[:30]}", field="status")
        if reason is not None:
            _require_text("reason", reason, max_length=64)
        now = self._clock()
        return self._write_run(
            lambda tx: transition(tx, load_run(tx, run_id), status, now, reason), run_id=run_id
        )

    def note_recovery_attempt(self, run_id: str) -> Run:
        """Count one recovery attempt on an active run (to park runs that keep crashing)."""
        now = self._clock()

        def op(tx: StoreTx) -> Run:
            run = load_run(tx, run_id)
            require_active(run)
            return bump(tx, run, now, recovery_attempts=run.recovery_attempts + 1)

        return self._write_run(op, run_id=run_id)

    def contexts_with_runs(self, context_ids: Iterable[str]) -> set[str]:
        """Which of these chats still have a run (retention removes a chat's finished runs:
        a chat with none left is gone)."""
        ids = [c for c in context_ids if isinstance(c, str)]
        return self.store.read(lambda tx: tx.contexts_with_runs(ids)) if ids else set()

    def delete_run(self, run_id: str) -> None:
        """Remove a finished run with its calls, checkpoints, decisions, events and input ids."""

        def op(tx: StoreTx) -> None:
            run = load_run(tx, run_id)
            if run.status not in TERMINAL_RUN_STATUSES:
                raise InvalidTransition("only finished runs can be deleted", run_id=run_id,
                                        status=run.status)  # fmt: skip
            tx.delete_run(run_id)

        self.store.write(op)

    # decisions and retry grants
    def decide(
        self, run_id: str, decision: str, *, version: int, actor: str, note: str | None = None,
        call_id: str | None = None,
    ) -> DecisionOutcome:  # fmt: skip
        """Apply a person's decision made on ``version`` of a run (see docs/durability.md)."""
        if decision not in DECISIONS:
            raise InvalidArgument(f"decision must be one of {', '.join(DECISIONS)}",
                                  field="decision")  # fmt: skip
        _require_int("version", version, minimum=1)
        _require_text("actor", actor)
        if note is not None and not isinstance(note, str):
            raise InvalidArgument("note must be a string", field="note")
        if decision in DECISIONS_NEEDING_NOTE and not (note or "").strip():
            raise NoteRequired(f"{decision} needs a note saying what was checked",
                               decision=decision)  # fmt: skip
        masked_note = self._masker.mask_text(note) if note else None
        if masked_note is not None:
            storable_json(masked_note)
        now = self._clock()
        return self.store.write(
            lambda tx: _decisions.apply_decision(
                tx, run_id, decision, version, actor, masked_note, call_id, now
            )
        )

    def list_decisions(self, run_id: str) -> list[Decision]:
        return self.store.read(lambda tx: tx.list_decisions(run_id))

    def grant_retries(self, run_id: str, attempts: int, *, actor: str) -> RetryGrant:
        """Allow ``attempts`` more retries of failed calls in this run."""
        _require_int("attempts", attempts, minimum=1)
        if attempts > MAX_RETRY_ATTEMPTS:
            raise InvalidArgument(f"attempts must be at most {MAX_RETRY_ATTEMPTS}",
                                  field="attempts")  # fmt: skip
        _require_text("actor", actor)
        now = self._clock()

        def op(tx: StoreTx) -> RetryGrant:
            load_run(tx, run_id)
            grant_id = tx.insert_grant(run_id, attempts, actor, now)
            return next(g for g in tx.list_grants(run_id) if g.id == grant_id)

        return self.store.write(op)

    def consume_retry(self, run_id: str, *, call_id: str | None = None) -> bool:
        """Use one granted retry; False when none is left. With ``call_id`` (a failed call),
        that call is superseded so the next intent at its position is attempt + 1."""
        now = self._clock()

        def op(tx: StoreTx) -> bool:
            run = load_run(tx, run_id)
            call = None
            if call_id is not None:
                call = tx.get_call(call_id)
                if call is None or call.run_id != run_id:
                    raise CallNotFound("no such call in this run", run_id=run_id,
                                       call_id=call_id)  # fmt: skip
                if call.state != "failed":
                    raise InvalidTransition("only a failed call can be retried",
                                            call_id=call_id, state=call.state)  # fmt: skip
            if not tx.consume_grant(run_id):
                return False
            if call is not None:
                tx.update_call(dataclasses.replace(call, state="superseded", closed_at=now))
                bump(tx, run, now)
            return True

        return self._write_run(op, run_id=run_id)

    def list_retry_grants(self, run_id: str) -> list[RetryGrant]:
        return self.store.read(lambda tx: tx.list_grants(run_id))

    # documents and conflicts
    def read_document(self, context_id: str, kind: str = documents.PLAN_KIND) -> Document:
        """The document and its revision (revision 0 and the empty value when never written)."""
        return self.store.read(lambda tx: documents.read_document(tx, context_id, kind))

    def replace_document(
        self, context_id: str, kind: str, value: Any, *, expected_revision: int, actor: str
    ) -> Document:
        """Replace the whole document on ``expected_revision``; a stale revision records a
        conflict and raises DocumentConflict."""
        _require_text("context_id", context_id)
        _require_int("expected_revision", expected_revision)
        _require_text("actor", actor)
        masked = documents.prepare_value(kind, value, self._masker)
        storable_json(masked)
        now = self._clock()
        return self.store.write(
            lambda tx: documents.replace_document(
                tx, context_id, kind, masked, expected_revision, actor, now
            )
        )

    def list_conflicts(
        self, context_id: str | None = None, *, unresolved_only: bool = True
    ) -> list[Conflict]:
        return self.store.read(lambda tx: tx.list_conflicts(context_id, unresolved_only))

    def get_conflict(self, conflict_id: int) -> Conflict:
        """One document conflict, resolved or not (ConflictNotFound when unknown)."""
        conflict = self.store.read(lambda tx: tx.get_conflict(conflict_id))
        if conflict is None:
            raise ConflictNotFound("no such conflict", conflict_id=conflict_id)
        return conflict

    def resolve_conflict(self, conflict_id: int, *, resolution: str, actor: str) -> Conflict:
        """Mark a document conflict resolved (``resolution``: e.g. kept_current, applied)."""
        _require_text("resolution", resolution, max_length=64)
        _require_text("actor", actor)
        now = self._clock()

        def op(tx: StoreTx) -> Conflict:
            conflict = tx.get_conflict(conflict_id)
            if conflict is None:
                raise ConflictNotFound("no such conflict", conflict_id=conflict_id)
            if conflict.resolved_at is None:
                tx.resolve_conflict(conflict_id, resolution, actor, now)
            return tx.get_conflict(conflict_id)  # type: ignore[return-value]

        return self.store.write(op)

    # scheduled tasks (durability/schedules.py; the scheduler is python/helpers/scheduler.py)
    def create_task(
        self, task_id: str, definition: Any, *, actor: str, done_until: float
    ) -> schedules.ScheduledTask:
        """Store a new task at revision 1 (the same id and definition again returns it;
        another definition raises TaskExists). Slots at or before ``done_until`` never fire."""
        _require_text("task_id", task_id)
        _require_text("actor", actor)
        _require_instant("done_until", done_until)
        masked = self._mask(definition)
        body, body_digest = schedules.prepare_definition(definition, masked)
        now = self._clock()
        return self.store.write(
            lambda tx: schedules.create_task(
                tx, task_id, body, body_digest, actor, now, float(done_until)
            )
        )

    def get_task(self, task_id: str) -> schedules.ScheduledTask:
        """One task (TaskNotFound when unknown); a damaged one comes back with ``damage``."""
        _require_text("task_id", task_id)
        return self.store.read(lambda tx: schedules.get_task(tx, task_id))

    def list_tasks(self) -> list[schedules.ScheduledTask]:
        """Every task, oldest first; damaged ones are listed with ``damage`` set."""
        return self.store.read(schedules.list_tasks)

    def update_task(
        self,
        task_id: str,
        definition: Any,
        *,
        expected_revision: int,
        actor: str,
        done_until: float | None = None,
    ) -> schedules.ScheduledTask:
        """Replace the definition on ``expected_revision`` (TaskConflict when stale; the
        same definition again is a no-op). ``done_until`` moves the handled-slots mark
        forward, e.g. to now when the schedule changed."""
        _require_text("task_id", task_id)
        _require_int("expected_revision", expected_revision, minimum=1)
        _require_text("actor", actor)
        if done_until is not None:
            _require_instant("done_until", done_until)
        masked = self._mask(definition)
        body, body_digest = schedules.prepare_definition(definition, masked)
        now = self._clock()
        return self.store.write(
            lambda tx: schedules.update_task(
                tx, task_id, body, body_digest, expected_revision, actor, now, done_until
            )
        )

    def delete_task(self, task_id: str, *, expected_revision: int | None = None) -> None:
        """Remove a task (its chat and runs stay); with ``expected_revision``, only when
        the task is still at that revision (else TaskConflict)."""
        _require_text("task_id", task_id)
        if expected_revision is not None:
            _require_int("expected_revision", expected_revision, minimum=1)
        self.store.write(lambda tx: schedules.delete_task(tx, task_id, expected_revision))

    def record_task_firing(
        self, task_id: str, *, slot: float | None, input_id: str, run_id: str | None
    ) -> schedules.ScheduledTask:
        """The task fired ``input_id`` (run ``run_id``); a ``slot`` (None for a manual run)
        is handled from now on. The revision does not change."""
        _require_text("task_id", task_id)
        _require_text("input_id", input_id)
        if slot is not None:
            _require_instant("slot", slot)
        now = self._clock()
        return self.store.write(
            lambda tx: schedules.record_firing(tx, task_id, slot, input_id, run_id, now)
        )

    def record_task_skip(
        self, task_id: str, *, slot: float, reason: str, detail: Any = None
    ) -> schedules.ScheduledTask:
        """The slot is handled without a firing, for ``reason`` (e.g. run_held)."""
        _require_text("task_id", task_id)
        _require_instant("slot", slot)
        _require_text("reason", reason, max_length=schedules.MAX_SKIP_REASON)
        masked = self._mask(detail)
        now = self._clock()
        return self.store.write(
            lambda tx: schedules.record_skip(tx, task_id, slot, reason, masked, now)
        )

    # blobs and events
    def put_blob(self, data: bytes) -> str:
        """Store bytes once under their SHA-256 (UTF-8 text is masked first)."""
        if not isinstance(data, bytes | bytearray):
            raise InvalidArgument("data must be bytes", field="data")
        data = bytes(data)
        try:
            data = self._masker.mask_text(data.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            pass
        blob_hash = digest_bytes(data)
        now = self._clock()
        self.store.write(lambda tx: tx.put_blob(blob_hash, data, now))
        return blob_hash

    def get_blob(self, blob_hash: str) -> bytes:
        _require_digest("blob_hash", blob_hash)
        data = self.store.read(lambda tx: tx.get_blobs([blob_hash])).get(blob_hash)
        if data is None:
            raise BlobNotFound("no such blob", blob_hash=blob_hash)
        return data

    def append_event(
        self, context_id: str, type: str, payload: Any = None, *, run_id: str | None = None
    ) -> Event:
        _require_text("context_id", context_id)
        _require_text("type", type, max_length=64)
        masked = self._mask(payload)
        payload_digest = digest(masked)
        now = self._clock()

        def op(tx: StoreTx) -> Event:
            event_id = tx.insert_event(context_id, run_id, type, masked, now, payload_digest)
            return Event(event_id, context_id, run_id, type, masked, now, payload_digest)

        if run_id is None:
            return self.store.write(op)
        return self._write_run(op, run_id=run_id)

    def list_events(
        self,
        *,
        context_id: str | None = None,
        run_id: str | None = None,
        after_id: int = 0,
        limit: int = 1000,
        verify: bool = True,
    ) -> list[Event]:
        """Events, oldest first. With ``verify`` (the default) a damaged payload among them
        raises CorruptRecord; without it (listings, exports) it is returned as stored."""
        events = self.store.read(lambda tx: tx.list_events(context_id, run_id, after_id, limit))
        if verify:
            for event in events:
                integrity.require_event(event)
        return events

    def verify_records(self) -> integrity.RecordsReport:
        """Check every call, event, document and each run's latest checkpoint against its
        digest (any backend; ``python -m durability verify`` checks a SQLite file)."""
        return self.store.read(integrity.verify_records)


class AsyncJournal:
    """``await journal.aio.admit(...)``: each journal method run in a worker thread."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def __getattr__(self, name: str) -> Callable[..., Any]:
        attr = getattr(self._journal, name)
        if name.startswith("_") or not callable(attr):
            raise AttributeError(name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(attr, *args, **kwargs)

        call.__name__ = name
        return call
