"""The receipt wrapper: one line of bash that writes a call's start and exit markers.

Local sessions (``ShellReceipts.wrap``) and SSH sessions (python/helpers/ssh_shell.py) run
the same line; ``durability.adapters.shell`` reads the markers it leaves.
"""

from __future__ import annotations

import re
import shlex

from durability.canonical import is_digest
from durability.errors import DurabilityError

CALL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

_START_FORMAT = '{"call_id":"%s","args_digest":"%s","started_at":%s,"shell_pid":%d}\\n'
_EXIT_FORMAT = (
    '{"call_id":"%s","args_digest":"%s","exit_code":%d,"output_sha256":"%s",'
    '"output_bytes":%d,"output_file":"%s","finished_at":%s}\\n'
)
_START_FAILED = "[receipt: the start marker could not be written; the command was not run]"
_EXIT_FAILED = "[receipt: the exit marker could not be written]"


class ReceiptError(DurabilityError):
    """A receipt cannot be written for this call (bad identity, or evidence already exists)."""

    code = "invalid_receipt"


class ReceiptExists(ReceiptError):
    code = "receipt_exists"


def wrap_command(folder: str, call_id: str, args_digest: str, script_path: str) -> str:
    """The receipt wrapper as one line of bash, for a receipts folder on whichever host
    runs it (local sessions and SSH sessions use the same line)."""
    check_identity(call_id, args_digest)
    q = shlex.quote
    base = folder.rstrip("/") + "/" + call_id
    out = q(f"{base}.out")
    start, start_tmp = q(f"{base}.start"), q(f"{base}.start.tmp")
    done, done_tmp = q(f"{base}.exit"), q(f"{base}.exit.tmp")
    ids = f"{q(call_id)} {q(args_digest)}"
    now = '"$(command -p date +%s.%N)"'
    guard = "set +eu +o pipefail; umask 077"
    write_start = (
        f"( {guard}; : > {out}"
        f' && command -p printf {q(_START_FORMAT)} {ids} {now} "$$" > {start_tmp}'
        f" && command -p sync {start_tmp} && command -p mv -f {start_tmp} {start}"
        f" && command -p sync {q(folder)} )"
    )
    write_exit = (
        f'( rc=$?; {guard}; n=$(command -p stat -c %s {out} 2>/dev/null); n="${{n:-0}}"'
        f'; h=$(command -p head -c "$n" {out} 2>/dev/null | command -p sha256sum)'
        f'; h="${{h%% *}}"'
        f' ; {{ command -p printf {q(_EXIT_FORMAT)} {ids} "$rc" "$h" "$n"'
        f" {q(call_id + '.out')} {now} > {done_tmp}"
        f" && command -p sync {done_tmp} && command -p mv -f {done_tmp} {done}"
        f" && command -p sync {q(folder)}; }} || command -p printf '%s\\n' {q(_EXIT_FAILED)}"
        f'; exit "$rc" )'
    )
    return (
        f"if {write_start}; then . {q(script_path)} > {out} 2>&1; {write_exit}; "
        f"else command -p printf '%s\\n' {q(_START_FAILED)}; (exit 125); fi"
    )


def check_identity(call_id: str, args_digest: str) -> None:
    if not isinstance(call_id, str) or not CALL_ID.match(call_id):
        raise ReceiptError("call id must be 1-128 letters, digits, '_', '.' or '-'")
    if not is_digest(args_digest):
        raise ReceiptError("args digest must be a lowercase hex SHA-256")
