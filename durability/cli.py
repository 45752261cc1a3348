"""Operator commands for the SQLite journal: list, show, decide, verify, backup, restore,
retention, export. Errors print ``error: <code>: <message>`` and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from durability import integrity
from durability._cli_text import (
    dump,
    login,
    non_negative_float,
    non_negative_int,
    positive_int,
    table,
    when,
)
from durability.backup import JournalNotFound, create_backup, restore_backup
from durability.decision_fit import RETRY_MODEL_CALL
from durability.errors import DurabilityError
from durability.paths import journal_path
from durability.records import DECISIONS, RUN_STATUSES, DecisionRequest
from durability.retention import DEFAULT_RETENTION_DAYS, DEFAULT_RETENTION_RUNS, apply_retention
from durability.verify import verify_database

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def default_db_path(environ: Mapping[str, str] | None = None) -> Path:
    """$A0_USR_DIR/durability/journal.sqlite, else ./usr/durability/journal.sqlite."""
    env = os.environ if environ is None else environ
    usr = env.get("A0_USR_DIR")
    return journal_path(Path(usr) if usr else Path("usr"))


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db",
        type=Path,
        default=argparse.SUPPRESS,
        metavar="PATH",
        help="journal file (default: $A0_USR_DIR/durability/journal.sqlite)",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
    )
    parser = argparse.ArgumentParser(
        prog="python -m durability",
        parents=[common],
        description="Inspect and maintain the durable journal.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", parents=[common], help="list runs, newest first")
    p.add_argument(
        "--status",
        choices=RUN_STATUSES,
        action="append",
        help="only runs in this status (repeatable)",
    )
    p.add_argument("--context", metavar="CHAT_ID", help="only runs of this chat")
    p.add_argument("--limit", type=positive_int, default=100, help="at most N runs (100)")

    p = sub.add_parser("show", parents=[common], help="one run: calls, decisions, checkpoints")
    p.add_argument("run", metavar="RUN")

    p = sub.add_parser("decide", parents=[common], help="apply a decision to a held run")
    p.add_argument("run", metavar="RUN")
    choices = (*DECISIONS, RETRY_MODEL_CALL)
    p.add_argument(
        "decision", choices=choices, metavar="DECISION", help=f"one of: {', '.join(choices)}"
    )
    p.add_argument(
        "--expected-version",
        type=positive_int,
        required=True,
        metavar="V",
        help="the run version the decision was made on",
    )
    p.add_argument("--note", help="what was checked (required for confirmed_*)")
    p.add_argument("--actor", help="who decides (default: cli:<login name>)")
    p.add_argument("--call", metavar="CALL_ID", help="the uncertain call (default: the latest)")
    p.add_argument(
        "--attempts", type=positive_int, default=1, help="tries allowed (retry_model_call; 1)"
    )

    sub.add_parser(
        "verify",
        parents=[common],
        help="integrity check and every digest: checkpoints, blobs, calls, events, documents",
    )

    p = sub.add_parser("backup", parents=[common], help="private copy via SQLite's backup API")
    p.add_argument(
        "--dest", type=Path, metavar="DIR", help="backup folder (default: <journal folder>/backups)"
    )

    p = sub.add_parser("restore", parents=[common], help="replace the journal by a backup")
    p.add_argument("file", type=Path, metavar="FILE")

    p = sub.add_parser("retention", parents=[common], help="delete old finished runs")
    p.add_argument(
        "--runs",
        type=non_negative_int,
        default=DEFAULT_RETENTION_RUNS,
        metavar="N",
        help="keep the newest N finished runs (100)",
    )
    p.add_argument(
        "--days",
        type=non_negative_float,
        default=DEFAULT_RETENTION_DAYS,
        metavar="D",
        help="keep finished runs younger than D days (30)",
    )
    p.add_argument("--dry-run", action="store_true", help="only list what would go")

    p = sub.add_parser("export", parents=[common], help="a run as JSON lines")
    p.add_argument("run", metavar="RUN")
    return parser


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser().parse_args(argv)
    args.db = Path(getattr(args, "db", None) or default_db_path())
    args.json = bool(getattr(args, "json", False))
    try:
        return COMMANDS[args.command](args, out)
    except DurabilityError as exc:
        print(error_line(exc, args.db), file=err)
    except sqlite3.Error as exc:
        print(f"error: storage_error: {type(exc).__name__}: {exc}", file=err)
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        print(
            f"error: os_error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=err
        )
    except KeyboardInterrupt:
        print("error: interrupted: stopped by the operator", file=err)
    return EXIT_ERROR


# --- commands ------------------------------------------------------------------------


def _list(args: argparse.Namespace, out: TextIO) -> int:
    with _journal(args.db) as journal:
        runs = journal.list_runs(args.status, context_id=args.context, limit=args.limit)
    if args.json:
        dump(out, [r.to_dict() for r in runs])
        return EXIT_OK
    rows = [
        [r.id, r.status, str(r.version), when(r.updated_at), r.context_id, r.reason or ""]
        for r in runs
    ]
    table(out, ["RUN", "STATUS", "VERSION", "UPDATED (UTC)", "CHAT", "REASON"], rows)
    return EXIT_OK


def _show(args: argparse.Namespace, out: TextIO) -> int:
    with _journal(args.db) as journal:
        detail = journal.read_run(args.run)
        checkpoints = _checkpoints(journal, args.run)
    if args.json:
        dump(out, {**detail.to_dict(), "checkpoints": checkpoints})
        return EXIT_OK
    run = detail.run
    out.write(
        f"run      {run.id}\nchat     {run.context_id}\ninput    {run.input_id}\n"
        f"status   {run.status}" + (f" ({run.reason})" if run.reason else "") + "\n"
        f"version  {run.version}\ncreated  {when(run.created_at)}\n"
        f"updated  {when(run.updated_at)}\n"
    )
    if run.reason_detail is not None:
        out.write(f"detail   {json.dumps(run.reason_detail, sort_keys=True)}\n")
    out.write(f"\ncalls ({len(detail.calls)})\n")
    rows = [
        [
            str(c.agent_no),
            str(c.seq),
            str(c.attempt),
            c.kind,
            c.name,
            c.state,
            "yes" if c.has_result else "no",
            c.id,
        ]
        for c in detail.calls
    ]
    table(out, ["AGENT", "SEQ", "ATTEMPT", "KIND", "NAME", "STATE", "RESULT", "CALL"], rows)
    out.write(f"\ndecisions ({len(detail.decisions)})\n")
    rows = [
        [when(d.created_at), d.decision, str(d.version), d.actor, d.note or ""]
        for d in detail.decisions
    ]
    table(out, ["WHEN (UTC)", "DECISION", "ON VERSION", "ACTOR", "NOTE"], rows)
    out.write(f"\ncheckpoints ({len(checkpoints)})\n")
    rows = [
        [
            str(c["id"]),
            str(c["seq"]),
            when(c["created_at"]),
            str(c["body_bytes"]),
            c["digest"][:16],
        ]
        for c in checkpoints[-10:]
    ]
    table(out, ["ID", "SEQ", "WHEN (UTC)", "BYTES", "DIGEST"], rows)
    return EXIT_OK


def _decide(args: argparse.Namespace, out: TextIO) -> int:
    actor = args.actor or f"cli:{login()}"
    request = DecisionRequest(args.run, args.decision, version=args.expected_version, actor=actor)
    request = replace(request, note=args.note, call_id=args.call, attempts=args.attempts)
    with _journal(args.db, mask_secrets=True) as journal:
        outcome = journal.decide(request)
    if args.json:
        dump(out, outcome.to_dict())
    else:
        verb = "applied" if outcome.applied else "already applied"
        out.write(
            f"{verb}: {args.decision} on run {outcome.run.id}; "
            f"now {outcome.run.status}, version {outcome.run.version}\n"
        )
    return EXIT_OK


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    report = verify_database(args.db)
    if args.json:
        dump(out, report.to_dict())
    elif report.ok:
        counts = ", ".join(f"{n} {kind}" for kind, n in report.checked.items())
        out.write(f"ok: {args.db}: integrity check passed; verified {counts or 'nothing'}\n")
    else:
        out.write(f"FAILED: {args.db}: {len(report.problems)} problem(s)\n")
        for problem in report.problems:
            out.write(f"  {problem.describe()}\n")
    if not args.json:
        for note in report.notes:
            out.write(f"note: {note}\n")
    return EXIT_OK if report.ok else EXIT_ERROR


def _backup(args: argparse.Namespace, out: TextIO) -> int:
    path = create_backup(args.db, args.dest)
    if args.json:
        dump(out, {"backup": str(path), "bytes": path.stat().st_size})
    else:
        out.write(f"backup written: {path}\n")
    return EXIT_OK


def _restore(args: argparse.Namespace, out: TextIO) -> int:
    result = restore_backup(args.file, args.db)
    replaced = str(result.replaced) if result.replaced else None
    if args.json:
        dump(out, {"restored": str(result.restored), "replaced": replaced})
    else:
        out.write(f"restored {args.file} into {result.restored}\n")
        if replaced:
            out.write(f"the previous journal was kept as {replaced}\n")
    return EXIT_OK


def _retention(args: argparse.Namespace, out: TextIO) -> int:
    _require_file(args.db)
    report = apply_retention(
        args.db, keep_runs=args.runs, keep_days=args.days, dry_run=args.dry_run
    )
    if args.json:
        dump(out, report.to_dict())
    elif args.dry_run:
        out.write(
            f"would remove {len(report.run_ids)} finished run(s) (keeping the newest "
            f"{args.runs} or those younger than {args.days:g} days)\n"
        )
        for run_id in report.run_ids:
            out.write(f"  {run_id}\n")
    else:
        out.write(
            f"removed {report.runs_removed} finished run(s), "
            f"{report.blobs_removed} unused blob(s) and {report.chats_removed} chat(s) "
            "left without runs\n"
        )
    return EXIT_OK


def _export(args: argparse.Namespace, out: TextIO) -> int:
    with _journal(args.db) as journal:
        for record in export_records(journal, args.run):
            out.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO], int]] = {
    "list": _list,
    "show": _show,
    "decide": _decide,
    "verify": _verify,
    "backup": _backup,
    "restore": _restore,
    "retention": _retention,
    "export": _export,
}


def export_records(journal: Any, run_id: str) -> Iterator[dict[str, Any]]:
    """The run, then each call, checkpoint metadata, decision, retry grant and event.

    Every record carries ``type``; an event's own type is in ``event_type``. A damaged call
    or event is exported as stored, with ``damaged`` naming what failed its digest.
    """
    detail = journal.read_run(run_id)
    yield {"type": "run", **detail.run.to_dict()}
    for call in detail.calls:
        damaged = [d.to_dict() for d in integrity.call_damages(call)]
        yield {"type": "call", **call.to_dict(), **({"damaged": damaged} if damaged else {})}
    for checkpoint in _checkpoints(journal, run_id):
        yield {"type": "checkpoint", **checkpoint}
    for decision in detail.decisions:
        yield {"type": "decision", **decision.to_dict()}
    for grant in journal.list_retry_grants(run_id):
        yield {"type": "retry_grant", **grant.to_dict()}
    after = 0
    while True:
        events = journal.list_events(run_id=run_id, after_id=after, limit=1000, verify=False)
        for event in events:
            fields = event.to_dict()
            damage = integrity.event_damage(event)
            if damage is not None:
                fields["damaged"] = [damage.to_dict()]
            yield {**fields, "type": "event", "event_type": fields.pop("type")}
        if len(events) < 1000:
            return
        after = events[-1].id


# --- helpers -------------------------------------------------------------------------


def error_line(exc: DurabilityError, db: Path | None = None) -> str:
    """``error: <code>: <message> (field=value, ...)``: the error's facts, secrets masked."""
    from durability.masking import Masker, collect_secrets

    facts = []
    for key, value in sorted(exc.fields.items()):
        text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
        facts.append(f"{key}={text}")
    line = f"error: {exc.code}: {exc.message}" + (f" ({', '.join(facts)})" if facts else "")
    usr = db.parent.parent if db is not None else None
    env_files = [usr / ".env"] if usr is not None else []
    secret_files = [usr / "secrets.env"] if usr is not None else []
    try:
        return Masker(collect_secrets(os.environ, env_files, secret_files)).mask_text(line)
    except Exception:  # an unreadable .env must not hide the error
        return line


def _journal(db: Path, *, mask_secrets: bool = False) -> Any:
    from durability.journal import Journal
    from durability.masking import Masker, collect_secrets

    _require_file(db)
    masker = None
    if mask_secrets:
        usr = db.parent.parent
        masker = Masker(collect_secrets(os.environ, [usr / ".env"], [usr / "secrets.env"]))
    return Journal.open_sqlite(db, masker=masker)


def _checkpoints(journal: Any, run_id: str) -> list[dict[str, Any]]:
    from durability.store import sqlite_scans

    return journal.store.read_raw(lambda conn: sqlite_scans.checkpoint_metadata(conn, run_id))


def _require_file(db: Path) -> None:
    if not db.is_file():
        raise JournalNotFound(f"no journal at {db} (use --db PATH or set A0_USR_DIR)", path=str(db))
