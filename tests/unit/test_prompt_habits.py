"""Agent Zero's prompt habits, each seen in the requests a real turn sends to the scripted
model (#23): the current time in the extras, long tool results saved and passed on with
``§§include(...)``, the secrets prompt (names, never values), a profile's
``agent.system.main.specifics.md``, and ``util_model_ctx_input`` bounding utility input."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agent import AgentConfig, AgentContext, UserMessage
from python.helpers import includes, prompts
from python.helpers import settings as settings_mod
from tests.support.model_server import ScriptedModel
from tests.support.model_server import model_server as model_server

pytestmark = pytest.mark.unit

TIMEOUT = 30
TIME_LINE = re.compile(r"The user's current local date and time: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def _settings(model: ScriptedModel, workdir: Path, **extra) -> dict:
    values = dict(settings_mod.DEFAULTS)
    values["chat_rename"] = False  # exactly the scripted model calls (tests/support/ui_server.py)
    for prefix in ("chat_model", "util_model"):
        values.update(
            {
                f"{prefix}_provider": "other",
                f"{prefix}_name": "scripted-model",
                f"{prefix}_api_base": model.url,
            }
        )
    values.update({"workdir": str(workdir), "code_exec_max_timeout": 20, **extra})
    return values


@pytest.fixture
def make_context(model_server, tmp_path, chats):
    def make(profile: str = "agent0", **extra) -> AgentContext:
        config = AgentConfig.from_settings(_settings(model_server, tmp_path / "work", **extra))
        config.profile = profile
        return chats.create(config=config)

    return make


async def _run(ctx: AgentContext, text: str) -> str:
    return await asyncio.wait_for(ctx.communicate(UserMessage(text)), TIMEOUT)


def _text(request: dict) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


async def test_the_current_time_is_in_every_iterations_extras(model_server, make_context):
    model_server.tool("wait", {"seconds": 0})
    model_server.tool("response", {"text": "done"})
    before = datetime.now() - timedelta(seconds=2)
    assert await _run(make_context(), "what time is it?") == "done"
    after = datetime.now() + timedelta(seconds=2)
    for request in model_server.requests:
        system = request["messages"][0]["content"]
        assert not TIME_LINE.search(system), "the system prompt stays the same every second"
        last = request["messages"][-1]
        assert last["role"] == "user"
        found = TIME_LINE.search(last["content"])
        assert found, last["content"][-300:]
        shown = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")
        assert before.replace(microsecond=0) <= shown <= after


async def test_the_time_shown_follows_default_user_timezone(tmp_path, monkeypatch):
    from python.helpers import localtime

    moment = datetime.fromisoformat("2026-03-01T12:00:00+00:00")
    monkeypatch.setenv("DEFAULT_USER_TIMEZONE", "Asia/Tokyo")
    assert localtime.now_text(moment) == "2026-03-01 21:00:00"
    monkeypatch.setenv("DEFAULT_USER_TIMEZONE", "Not/A_Zone")  # unknown: the server's zone
    assert localtime.now_text(moment) == moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def test_the_clock_is_left_out_of_the_journals_digest():
    first = [{"role": "user", "content": "hi\n[EXTRAS] time: 2026-01-01 10:00:00"}]
    later = [{"role": "user", "content": "hi\n[EXTRAS] time: 2026-01-01 10:05:09"}]
    assert prompts.stable_view(first, ["2026-01-01 10:00:00"]) == prompts.stable_view(
        later, ["2026-01-01 10:05:09"]
    )
    assert prompts.stable_view(first, []) == first


async def test_a_long_result_is_saved_and_included_into_the_next_tool(model_server, make_context):
    code = "for i in $(seq 1 300); do echo line-$i; done"
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": code})
    seen: dict[str, str] = {}

    def respond(body: dict):
        found = re.search(r"write §§include\((/[^)]+)\)", _text(body))
        assert found, "the history names the saved file"
        seen["path"] = found.group(1)
        return {"tool_name": "response", "tool_args": {"text": f"§§include({seen['path']})"}}

    model_server.respond_with(respond)
    ctx = make_context()
    answer = await _run(ctx, "count to 300")
    path = Path(seen["path"])
    assert path.parent == includes.chat_folder(ctx.id) / "messages"
    saved = path.read_text(encoding="utf-8")
    assert "line-1\n" in saved and "line-300" in saved
    assert answer == saved, "the include was replaced by the file's text before the tool ran"
    # the journal recorded the argument as the model wrote it, not the file's text
    history = ctx.agent0.history.output()
    assert any(f"§§include({path})" in m["content"] for m in history)


async def test_a_short_result_names_no_file(model_server, make_context):
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": "echo short"})
    model_server.tool("response", {"text": "§§include(relative/path.txt) stays"})
    ctx = make_context()
    assert await _run(ctx, "echo") == "§§include(relative/path.txt) stays"
    assert "§§include(" not in _text(model_server.requests[1])
    assert not (includes.chat_folder(ctx.id) / "messages").exists()


async def test_the_secrets_prompt_names_secrets_but_never_values(
    model_server, make_context, _private_usr_dir
):
    (_private_usr_dir / "secrets.env").write_text(
        "# the deploy token for the staging cluster\nDEPLOY_TOKEN=tok-9f8e7d6c5b4a\n\n"
        "export DB_PASSWORD='pw-0123456789'\n",
        encoding="utf-8",
    )
    model_server.tool("response", {"text": "ok"})
    await _run(make_context(), "which secrets do you have?")
    system = model_server.requests[0]["messages"][0]["content"]
    assert "## Secrets" in system
    assert "# the deploy token for the staging cluster\n§§secret(DEPLOY_TOKEN)" in system
    assert "§§secret(DB_PASSWORD)" in system
    assert "tok-9f8e7d6c5b4a" not in _text(model_server.requests[0])
    assert "pw-0123456789" not in _text(model_server.requests[0])


async def test_without_secrets_the_prompt_says_so(model_server, make_context):
    model_server.tool("response", {"text": "ok"})
    await _run(make_context(), "hi")
    system = model_server.requests[0]["messages"][0]["content"]
    assert "No secrets are configured." in system


async def test_a_profiles_specifics_follow_the_role(model_server, make_context, _private_usr_dir):
    prompts_dir = _private_usr_dir / "agents" / "tester" / "prompts"
    prompts_dir.mkdir(parents=True)
    (prompts_dir / "agent.system.main.specifics.md").write_text(
        "## Specifics\nYou test software: TESTER-SPECIFICS.\n", encoding="utf-8"
    )
    (_private_usr_dir / "agents" / "tester" / "_context.md").write_text(
        "Use for testing work.\n", encoding="utf-8"
    )
    model_server.tool("response", {"text": "ok"})
    await _run(make_context(profile="tester"), "hi")
    system = model_server.requests[0]["messages"][0]["content"]
    role, specifics = system.index("## Your role"), system.index("TESTER-SPECIFICS")
    assert role < specifics < system.index("## Secrets")
    assert "- tester When to use: Use for testing work." in system  # _context.md


async def test_utility_input_is_cut_to_util_model_ctx_input(model_server, make_context):
    utility: list[dict] = []

    def respond(body: dict):
        if "You condense" in str(body["messages"][0]["content"]):
            utility.append(body)
            return "a short summary"
        return {"tool_name": "response", "tool_args": {"text": "answered"}}

    model_server.respond_with(respond)
    ctx = make_context(
        chat_model_ctx_length=3000,
        chat_model_ctx_history=0.5,
        util_model_ctx_length=1000,
        util_model_ctx_input=0.5,
    )
    for i in range(8):
        ctx.agent0.history.add(False, f"old question {i} " + "q" * 1500)
        ctx.agent0.history.add(True, f"old answer {i} " + "a" * 1500)
        ctx.agent0.history.new_topic()
    assert await _run(ctx, "newest") == "answered"
    assert utility, "the utility model summarised"
    limit_chars = 1000 * 0.5 * 4
    for body in utility:
        system, message = (m["content"] for m in body["messages"])
        assert len(system) + len(message) <= limit_chars + 8
    cut = [b["messages"][1]["content"] for b in utility]
    assert any(text.startswith("[... earlier text left out ...]") for text in cut)
