"""The evidence of a shell call wherever it ran: local receipts, or remote ones over SSH.

``ShellEvidence`` is the one adapter recovery, adoption (the watch), the periodic re-check and
the Recovery panel ask about an ``adapter:shell`` call:

- ran on an SSH host: its location is the local ``<call_id>.remote`` pointer or, on any
  worker, the journal's ``receipt_location`` event; the remote markers are read over SSH
  (``SshReceipts``); for an ``input`` typed into a terminal there, the location names the
  terminal's inbox on the host and its delivery receipt is read instead;
- ran here: this worker's receipts folder (``ShellReceipts``);
- ran locally on another worker: nothing here can read it (``rejected:
  local_receipt_elsewhere``): held.

A host that does not answer gives ``host_unreachable``: it proves nothing and is asked again
later (python/durable/recheck.py), never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from durability.adapters.pty import TerminalInbox, explain_delivery, session_number, terminal_dir
from durability.adapters.shell import ShellReceipts, call_identity, classification_of
from durability.adapters.ssh import SshReceipts, SshTarget
from durability.records import Call
from durability.status import Policy, ReceiptOutcome
from durability.verdicts import AdapterVerdict, Why

#: The journal event recording, before a command starts on a host, where its receipt is.
LOCATION_EVENT = "receipt_location"

#: ssh location (host, port, user, folder) -> the target to read it with (None: cannot).
TargetFor = Callable[[Mapping[str, Any]], SshTarget | None]
#: call -> its ssh location as the journal recorded it (None: none recorded).
Locate = Callable[[Call], Mapping[str, Any] | None]
#: call -> the id of the chat it belongs to (a terminal's inbox is per chat and session).
ContextOf = Callable[[Call], str]


def journal_locator(journal: Any) -> Locate:
    """Find a call's SSH location in the journal's ``receipt_location`` events."""

    def locate(call: Call) -> Mapping[str, Any] | None:
        for event in journal.list_events(run_id=call.run_id, limit=100_000):
            payload = event.payload
            if (
                event.type == LOCATION_EVENT
                and isinstance(payload, dict)
                and payload.get("call_id") == call.id
                and isinstance(payload.get("ssh"), dict)
            ):
                return dict(payload["ssh"])
        return None

    return locate


def location_recorder(journal: Any) -> Callable[[str, Mapping[str, Any]], None]:
    """``ShellReceipts.on_remote``: record a call's SSH location in the journal (any worker
    can then read its receipt), committed before the command is sent."""

    def record(call_id: str, where: Mapping[str, Any]) -> None:
        ssh = where.get("ssh")
        if not isinstance(ssh, Mapping):
            return
        call = journal.get_call(call_id)
        run = journal.get_run(call.run_id)
        payload = {"call_id": call_id, "ssh": dict(ssh)}
        journal.append_event(run.context_id, LOCATION_EVENT, payload, run_id=run.id)

    return record


class ShellEvidence:
    """What proves an ``adapter:shell`` call's outcome, for this worker (``owner``: its
    receipts folder is the one the call's shell wrote into)."""

    def __init__(
        self,
        receipts: ShellReceipts,
        *,
        target_for: TargetFor | None = None,
        locate: Locate | None = None,
        owner: bool = True,
        context_of: ContextOf | None = None,
    ) -> None:
        self.context_of = context_of
        self.receipts = receipts
        self.target_for = target_for
        self.locate = locate
        self.owner = owner

    def output_path(self, call_id: str) -> Any:
        """The local output file of a call that ran here."""
        return self.receipts.output_path(call_id)

    def where(self, call: Call) -> Mapping[str, Any] | None:
        """The call's SSH location (host, port, user, folder), or None when it ran locally."""
        if self.owner:
            pointer = self.receipts.remote_pointer(call.id)
            if pointer is not None and isinstance(pointer.get("ssh"), dict):
                return dict(pointer["ssh"])
        if self.locate is not None:
            return self.locate(call)
        return None

    def explain(self, call: Call) -> dict[str, Any]:
        """``ShellReceipts.explain``'s shape, from wherever the receipt is (an ``input``
        call's: its delivery receipt, durability/adapters/pty.py)."""
        if call.policy == Policy.PTY:
            return self._explain_input(call)
        return self._explain_shell(call)

    def _explain_input(self, call: Call) -> dict[str, Any]:
        """Typed into a local terminal: its delivery receipt; typed into a terminal on an SSH
        host (a ``.remote`` pointer naming its inbox): that inbox's delivery receipt; run as
        a command (nothing was waiting for input) or typed into an SSH session's pipe (a host
        without python3): its shell receipt."""
        identity = call_identity(call)
        if isinstance(identity, dict):
            return identity
        call_id, args_digest = identity
        r = self.receipts
        shell_files = (r.start_path(call_id), r.exit_path(call_id), r.remote_path(call_id))
        if not self.owner or self.context_of is None or any(p.exists() for p in shell_files):
            return self._explain_shell(call)
        if self.where(call) is not None:  # typed on an SSH host (found in the journal)
            return self._explain_shell(call)
        number = session_number(call.args)
        inbox = TerminalInbox(terminal_dir(r.folder, self.context_of(call), number))
        return explain_delivery(inbox.inspect(call_id, args_digest, void=True), number)

    def _explain_shell(self, call: Call) -> dict[str, Any]:
        ssh = self.where(call)
        if ssh is not None:
            where = {k: ssh.get(k) for k in ("host", "port", "user", "folder")}
            target = self.target_for(ssh) if self.target_for is not None else None
            if target is None:
                reason = "ssh_not_configured"
                return {
                    "classification": f"{ReceiptOutcome.HOST_UNREACHABLE}:{reason}",
                    "reason": reason,
                    "detail": where,
                }
            inbox = ssh.get("inbox")
            if call.policy == Policy.PTY and isinstance(inbox, str) and inbox:
                where["inbox"] = inbox  # typed into a terminal on the host: its inbox
                found = SshReceipts(target).explain_delivery(call, inbox)
            else:
                found = SshReceipts(target).explain(call)
            found["detail"] = {**where, **(found.get("detail") or {})}
            return found
        if not self.owner:
            reason = Why.LOCAL_RECEIPT_ELSEWHERE
            return {"classification": f"rejected:{reason}", "reason": reason, "detail": {}}
        return self.receipts.explain(call)

    def classify(self, call: Call) -> AdapterVerdict:
        """The recovery adapter (``durability.recovery.Adapter``): the verdict with its detail."""
        found = self.explain(call)
        detail = dict(found.get("detail") or {})
        classified = classification_of(found)
        if isinstance(classified, tuple):
            return AdapterVerdict(ReceiptOutcome.COMPLETED, output=classified[1], detail=detail)
        outcome, _, reason = str(classified).partition(":")
        if outcome not in set(ReceiptOutcome):
            return AdapterVerdict(ReceiptOutcome.REJECTED, reason="malformed_verdict")
        return AdapterVerdict(ReceiptOutcome(outcome), reason=reason or None, detail=detail)


def forget_receipts(receipts: ShellReceipts, context_id: str, call: Call) -> None:
    """A call's result is committed: its receipt (whose output may show a secret in clear)
    and, for an ``input``, its delivery receipt are no longer evidence of anything. The
    receipt of a command that still runs (its result said "still running") stays until it
    ends: a server that adopts its terminal reads its output from it."""
    if receipts.start_path(call.id).exists() and not receipts.exit_path(call.id).exists():
        return
    receipts.discard(call.id)
    if call.policy == Policy.PTY:
        folder = terminal_dir(receipts.folder, context_id, session_number(call.args))
        TerminalInbox(folder).discard(call.id)
