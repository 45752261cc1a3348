"""Admission: a new input starts a run (or finds the run it already started); a message
that arrives while the chat's run is active is journaled on that run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durability._runs import load_run
from durability.canonical import digest
from durability.errors import ActiveRunExists, InputConflict, NoActiveRun, RunHeld
from durability.ids import new_id
from durability.journal._operation import Builder, JournalBase, operation
from durability.journal._plan import Plan, read, write
from durability.journal._validation import mask_storable, require_digest, require_text
from durability.records import Admission, Run
from durability.status import InputKind, RunStatus
from durability.store.base import StoreTx
from durability.store.rows import InputRow


class _Admit(Builder[InputKind]):
    """``admit`` and ``admit_intervention``: one builder, ``variant`` the kind of input."""

    def __call__(
        self,
        journal: JournalBase,
        context_id: str,
        input_id: str,
        content_digest: str,
        *,
        message: Any = None,
    ) -> Plan[Admission]:
        return _admit(journal, context_id, input_id, content_digest, message, self.variant)


class AdmissionOps:
    """Inputs: a new one starts a run, one during a run is journaled on it."""

    admit = operation(prepare="message")(
        _Admit(
            "admit",
            InputKind.RUN,
            """Start a run for a new input, or return the run this input id already started.

        An input id is global: the same id and digest returns its run even when another
        chat is named (the returned run's ``context_id`` says where it went); nothing is
        created then. The same id with other content raises InputConflict.""",
        )
    )
    admit_intervention = operation(prepare="message")(
        _Admit(
            "admit_intervention",
            InputKind.INTERVENTION,
            """Journal a message that arrived while the chat's run is active, on that run.""",
        )
    )

    @operation()
    def input_context(journal: JournalBase, input_id: str) -> Plan[str | None]:
        """The chat an input id was admitted to, or None: a client that retries without
        knowing the chat (its first answer was lost) is sent back to the same one."""
        require_text("input_id", input_id)

        def op(tx: StoreTx) -> str | None:
            row = tx.inputs.get(input_id)
            return row.context_id if row is not None else None

        return read(op)


def _admit(
    journal: JournalBase,
    context_id: str,
    input_id: str,
    content_digest: str,
    message: Any,
    kind: InputKind,
) -> Plan[Admission]:
    require_text("context_id", context_id)
    require_text("input_id", input_id)
    require_digest("content_digest", content_digest)
    payload = mask_storable(journal.masker, message) if message is not None else None
    now = journal.clock()
    cluster = journal.cluster
    adopt: list[Callable[[], Any]] = []

    def recorded(tx: StoreTx, known: InputRow) -> Admission:
        # The digest decides: the same content under the same id is the same input,
        # even when a racing copy named another (e.g. freshly generated) chat.
        if known.digest != content_digest:
            raise InputConflict(
                "this input id was already used for different content",
                input_id=input_id,
                run_id=known.run_id,
            )
        return Admission(load_run(tx, known.run_id), created=False, kind=known.kind)

    def op(tx: StoreTx) -> Admission:
        adopt.clear()  # a backend may run op again (e.g. after a conflict)
        known = tx.inputs.get(input_id)
        if known is not None:
            return recorded(tx, known)
        open_run = tx.runs.open_for_context(context_id)
        if open_run is not None:
            # A racing copy of this input may have committed its run after the first
            # read (PostgreSQL reads each statement afresh): it is the same input.
            known = tx.inputs.get(input_id)
            if known is not None:
                return recorded(tx, known)
        if open_run is not None and open_run.status == RunStatus.NEEDS_ATTENTION:
            raise RunHeld(
                "the chat's run waits for a decision",
                context_id=context_id,
                run_id=open_run.id,
                version=open_run.version,
            )
        if kind == InputKind.RUN:
            if open_run is not None:
                raise ActiveRunExists(
                    "the chat already has an active run",
                    context_id=context_id,
                    run_id=open_run.id,
                )
            tx.contexts.ensure(context_id, now)
            run = Run(
                id=new_id(),
                context_id=context_id,
                input_id=input_id,
                input_digest=content_digest,
                status=RunStatus.ACTIVE,
                version=1,
                reason=None,
                reason_detail=None,
                recovery_attempts=0,
                created_at=now,
                updated_at=now,
            )
            tx.runs.insert(run)
        else:
            if open_run is None:
                raise NoActiveRun("the chat has no active run", context_id=context_id)
            run = open_run
        tx.inputs.insert(InputRow(input_id, content_digest, context_id, run.id, kind, now))
        event_type = "input" if kind == InputKind.RUN else "intervention"
        event = {"input_id": input_id, "message": payload}
        tx.events.insert(context_id, run.id, event_type, event, now, digest(event))
        if kind == InputKind.RUN and cluster is not None:  # the admitting worker runs it
            adopt.append(cluster.adopt_new_run(tx, run.id))
        return Admission(run, created=True, kind=kind)

    def adopted(admission: Admission) -> Admission:
        for claim in adopt:
            claim()
        return admission

    return write(op, after=adopted)
