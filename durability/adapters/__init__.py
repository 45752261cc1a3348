"""Receipt adapters: they prove what a tool call did, from evidence written outside the agent.

Each adapter offers ``classify(call) -> dict`` for the recovery scan's registry, keyed by the
call's replay policy (the shell's is ``adapter:shell``).
"""

from durability.adapters.shell import (
    SHELL_POLICY,
    ReceiptError,
    ReceiptVerdict,
    ShellReceipts,
    call_args_digest,
)

__all__ = ["SHELL_POLICY", "ReceiptError", "ReceiptVerdict", "ShellReceipts", "call_args_digest"]
