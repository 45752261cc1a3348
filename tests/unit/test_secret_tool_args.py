"""A `§§secret(NAME)` in tool arguments reaches the tool as the real value; logs stay masked."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent import AgentConfig, UserMessage
from python.helpers import secrets
from tests.support.model_server import model_server as model_server
from tests.unit.test_agent_loop import _settings

pytestmark = pytest.mark.unit


async def test_placeholder_in_tool_args_is_the_secret_for_the_tool(
    model_server, tmp_path: Path, _private_usr_dir: Path, chats
):
    secret = "sk-planted-0123456789abcdef"
    (_private_usr_dir / ".env").write_text(f"API_KEY_PLANTED={secret}\n")
    chats.journal.set_masker(secrets.masker_for(_private_usr_dir))  # as a settings change does
    out = tmp_path / "out.txt"
    model_server.tool(
        "code_execution_tool",
        {"runtime": "terminal", "code": f"echo §§secret(API_KEY_PLANTED) > {out}"},
    )
    model_server.tool("response", {"text": "done"})
    config = AgentConfig.from_settings(_settings(model_server, tmp_path / "work"))
    ctx = chats.create(config=config)
    answer = await asyncio.wait_for(ctx.communicate(UserMessage("go")), 30)
    assert answer == "done"
    assert out.read_text().strip() == secret
    assert secret not in str(ctx.log.output(0))
    run = chats.journal.list_runs(context_id=ctx.id)[0]
    tool_call = next(c for c in chats.journal.list_calls(run.id) if c.kind == "tool")
    args = json.dumps(tool_call.args, ensure_ascii=False)
    assert secret not in args and "§§secret(API_KEY_PLANTED)" in args  # journaled masked
