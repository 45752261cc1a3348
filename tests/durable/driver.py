"""A tiny journaled agent process for crash tests (run with A0_USR_DIR set).

    python -m tests.durable.driver run <model_url> <context_id> <message>
    python -m tests.durable.driver recover <model_url>

``run`` sends one message to a journaled chat and prints its answer; ``recover`` rebuilds
the chats from the journal, recovers, waits for resumed runs and prints every run as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys

from agent import AgentConfig, UserMessage
from durability import Journal
from python.durable import DurableChats
from python.durable.rebuild import restore_contexts
from python.durable.resume import recover
from python.helpers import files
from tests.durable.conftest import install_side_effect_tool, make_settings


def _chats(model_url: str) -> DurableChats:
    journal = Journal.open_sqlite(files.usr_dir() / "durability" / "journal.sqlite")

    def config() -> AgentConfig:
        return AgentConfig.from_settings(make_settings(model_url, files.usr_dir() / "work"))

    return DurableChats(journal, config=config)


async def _run(model_url: str, context_id: str, message: str) -> dict:
    chats = _chats(model_url)
    ctx = chats.create(context_id)
    answer = await asyncio.wait_for(ctx.communicate(UserMessage(message)), 60)
    await chats.close()
    return {"answer": answer}


async def _recover(model_url: str) -> dict:
    chats = _chats(model_url)
    contexts = restore_contexts(chats)
    plans = await recover(chats)
    tasks = [c.task for c in contexts if c.task is not None]
    if tasks:
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
    runs = [r.to_dict() for r in chats.journal.list_runs()]
    await chats.close()
    return {"plans": [p.action for p in plans], "runs": runs}


def main(argv: list[str]) -> int:
    install_side_effect_tool(files.usr_dir())
    if argv[0] == "run":
        result = asyncio.run(_run(argv[1], argv[2], argv[3]))
    else:
        result = asyncio.run(_recover(argv[1]))
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
