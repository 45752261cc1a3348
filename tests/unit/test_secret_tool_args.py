"""A `§§secret(NAME)` in tool arguments reaches the tool as the real value; logs stay masked."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent import AgentConfig, AgentContext, UserMessage
from tests.support.model_server import model_server as model_server
from tests.unit.test_agent_loop import _settings

pytestmark = pytest.mark.unit


async def test_placeholder_in_tool_args_is_the_secret_for_the_tool(
    model_server, tmp_path: Path, _private_usr_dir: Path
):
    secret = "sk-planted-0123456789abcdef"
    (_private_usr_dir / ".env").write_text(f"API_KEY_PLANTED={secret}\n")
    out = tmp_path / "out.txt"
    model_server.tool(
        "code_execution_tool",
        {"runtime": "terminal", "code": f"echo §§secret(API_KEY_PLANTED) > {out}"},
    )
    model_server.tool("response", {"text": "done"})
    ctx = AgentContext(AgentConfig.from_settings(_settings(model_server, tmp_path / "work")))
    try:
        answer = await asyncio.wait_for(ctx.communicate(UserMessage("go")), 30)
        assert answer == "done"
        assert out.read_text().strip() == secret
        assert secret not in str(ctx.log.output(0))
    finally:
        shells = ctx.shells
        AgentContext.remove(ctx.id)
        await shells.close_all()
