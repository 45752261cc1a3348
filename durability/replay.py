"""The safe-replay allowlist: tools whose interrupted call may simply run again.

A tool never labels itself safe. This table pins each allowed tool to the SHA-256 of its
source file (python/tools/<name>.py below the repository root). When the file changes, the
hash no longer matches, the tool loses safe status, and tests/durability/test_replay_pins.py
fails until someone reviews the change.

How to update a pin after review: read the diff of python/tools/<name>.py and confirm that
running an interrupted call again can do no harm (no external side effect, or one that is
idempotent by construction); then run
    .venv/bin/python -m durability.replay <name>
and paste the printed line into SAFE_REPLAY below, in the same commit as the review.

Only durable_plan, response, search_engine, document_query, vision_load, the browser
agent's reading actions (browser_read) and the call_subordinate and browser_agent
child-workflow records may ever be listed (INTENDED_SAFE_TOOLS). A tool whose file does
not exist yet is not pinned.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "python" / "tools"

#: The only tools that may ever be pinned here.
INTENDED_SAFE_TOOLS: tuple[str, ...] = (
    "durable_plan",
    "response",
    "call_subordinate",
    "search_engine",
    "document_query",
    "vision_load",
    "browser_agent",
    "browser_read",
)

#: Journaled calls that are no tool the model can name, with the file that carries them out
#: (a path below the repository root); every other name is python/tools/<name>.py.
CALL_SOURCES: dict[str, tuple[str, ...]] = {
    "browser_read": ("python", "helpers", "browser_reading.py"),
}

#: tool name -> SHA-256 (hex) of python/tools/<name>.py as reviewed.
SAFE_REPLAY: dict[str, str] = {
    # the final answer: logs and ends the monologue, no external effect (reviewed again for
    # #11: its log item is also marked with the journal call it shows; still no effect)
    "response": "f2fd680058f7a0052c668490a925b58ea4623efa3f3a9622b1fc23ae410fcea5",
    # the child workflow: the subordinate's own calls are journaled, so running the record
    # again resumes the child instead of repeating its effects (reviewed again for #18: its
    # yes/no argument parser is python/helpers/tool.py's truthy, which also takes "on")
    "call_subordinate": "567f0a370428240597c0ec8d5fa4d45809b962b78ed50db4c1e1014873092f6f",
    # durable_plan: reads or replaces the chat's plan document only; a replace sent again
    # with the same content is a no-op in the journal, so a replay gives the same answer;
    # a damaged stored plan raises corrupt_record (the run is held), nothing is written
    # (reviewed again for #18: its refusal text and JSON helpers moved to
    # python/helpers/tool.py, pure functions; still nothing but the plan document)
    "durable_plan": "5b5b99ca5e6af468bd26bd389e969d97893a689ea1979c940110d9ed9ad88d42",
    # search_engine: one GET of the SearXNG instance's search endpoint and formatting of the
    # answer; it changes nothing anywhere, so asking again after a crash is harmless (the
    # answer may differ, which is what asking again means)
    "search_engine": "17d67a167504c5aec36bd1ab0e8de38038fb367c0fc48705c5b95cf13c422ee4",
    # document_query (#20): reads a file in the work folder or uploads, or GETs a URL
    # (no cookies, no credentials, public addresses only unless the setting allows), then
    # asks models; each model and embedding request is its own journaled call, so a replay
    # reuses the committed ones. Nothing is written anywhere: running it again is harmless
    "document_query": "643b750004728b3a872ddc6864d89b250c2f1a875e765fc2ee40eb273b16ffdf",
    # vision_load (#20): reads local image files and stores each prepared JPEG as a journal
    # blob under its SHA-256 (the same bytes under the same name: writing it again changes
    # nothing); no other effect, so an interrupted call simply runs again
    "vision_load": "09f4f596e6f7d61e0760f3ff44d8f819dc4ede71bcb0914faba158f22181559b",
    # browser_agent: the child-workflow record of a browser task; every model reply and
    # browser action of the task is its own journaled call (python/helpers/browser_loop.py),
    # so running an interrupted call again resumes the recorded action log, repeating nothing
    # (reviewed again for #18: its yes/no argument parser is python/helpers/tool.py's truthy)
    "browser_agent": "d71cb7385896c643a48711c35ad2ed1896a36ca2ee997ff6a72ae1053b48a6af",
    # browser_read: the browser agent's reading actions (navigate by GET, scroll, extract,
    # screenshot, observe); they click, type and submit nothing, so one cut short by a crash
    # simply runs again (python/helpers/browser_reading.py)
    "browser_read": "164d9774218dcc73c4e8cf91926ebdc38c88d5b11944fcd26e2229986b006d6b",
}


def tool_source_path(tool_name: str, root: Path = REPO_ROOT) -> Path:
    if tool_name in CALL_SOURCES:
        return root.joinpath(*CALL_SOURCES[tool_name])
    return root / "python" / "tools" / f"{tool_name}.py"


def source_digest(source_path: Path) -> str | None:
    """SHA-256 of a source file's bytes, or None when it cannot be read."""
    try:
        return hashlib.sha256(Path(source_path).read_bytes()).hexdigest()
    except OSError:
        return None


def is_safe(tool_name: str, source_path: Path) -> bool:
    """True only when the tool is pinned and ``source_path`` hashes to its pin."""
    pinned = SAFE_REPLAY.get(tool_name)
    if pinned is None:
        return False
    return source_digest(source_path) == pinned


def _main(argv: list[str]) -> int:
    for name in argv or list(INTENDED_SAFE_TOOLS):
        digest = source_digest(tool_source_path(name))
        if digest is None:
            print(f"# {name}: python/tools/{name}.py does not exist", file=sys.stderr)
            continue
        print(f'    "{name}": "{digest}",')
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
