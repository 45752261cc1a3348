"""The monologue against a real scripted OpenAI-compatible HTTP server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent import AgentConfig, AgentContext, UserMessage
from python.durable import decisions
from python.helpers import settings as settings_mod
from tests.support.model_server import ScriptedFailure, ScriptedModel
from tests.support.model_server import model_server as model_server

pytestmark = pytest.mark.unit

TIMEOUT = 30


def _settings(model: ScriptedModel, workdir: Path, **extra) -> dict:
    values = dict(settings_mod.DEFAULTS)
    for prefix in ("chat_model", "util_model"):
        values.update(
            {
                f"{prefix}_provider": "other",
                f"{prefix}_name": "scripted-model",
                f"{prefix}_api_base": model.url,
                f"{prefix}_kwargs": {},
                f"{prefix}_rl_requests": 0,
                f"{prefix}_rl_input": 0,
                f"{prefix}_rl_output": 0,
            }
        )
    values.update(
        {
            "chat_model_ctx_length": 100_000,
            "chat_model_ctx_history": 0.7,
            "agent_profile": "agent0",
            "chat_rename": False,  # exactly the scripted model calls (tests/support/ui_server.py)
            "workdir": str(workdir),
            "code_exec_first_output_timeout": 10,
            "code_exec_between_output_timeout": 10,
            "code_exec_max_timeout": 20,
        }
    )
    values.update(extra)
    return values


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path / "work"


@pytest.fixture
def make_context(model_server, workdir, chats):
    """A chat with its durable session over the test's journal (tests/conftest.py)."""

    def make(**extra) -> AgentContext:
        return chats.create(
            config=AgentConfig.from_settings(_settings(model_server, workdir, **extra))
        )

    return make


async def _run(ctx: AgentContext, text: str) -> str:
    return await asyncio.wait_for(ctx.communicate(UserMessage(text)), TIMEOUT)


def _prompt_text(request: dict) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


def _log_items(ctx: AgentContext, kind: str) -> list[dict]:
    return [item for item in ctx.log.output() if item.get("type") == kind]


async def _until(predicate, what: str, timeout: float = TIMEOUT) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_response_only_turn(model_server, make_context):
    model_server.tool("response", {"text": "Hello there"}, headline="Answering")
    ctx = make_context()
    assert await _run(ctx, "hi agent") == "Hello there"
    request = model_server.requests[0]
    system = request["messages"][0]
    assert system["role"] == "system"
    assert "Agent Zero" in system["content"]  # the agent0 profile's role
    assert "### code_execution_tool" in system["content"]  # tools assembled from files
    assert "hi agent" in request["messages"][-1]["content"]
    responses = _log_items(ctx, "response")
    assert [r["content"] for r in responses] == ["Hello there"]
    assert not ctx.is_running() and ctx.output()["running"] is False
    hist = ctx.agent0.history.output()
    assert hist[-1]["role"] == "assistant" and "Hello there" in hist[-1]["content"]


async def test_poll_row_shape(make_context):
    ctx = make_context()
    row = ctx.output()
    assert set(row) == {
        "id",
        "name",
        "created_at",
        "no",
        "log_guid",
        "log_version",
        "log_length",
        "paused",
        "last_message",
        "type",
        "running",
    }
    assert AgentContext.get(ctx.id) is ctx and ctx in AgentContext.all()


async def test_code_execution_then_response(model_server, make_context, workdir):
    model_server.tool(
        "code_execution_tool", {"runtime": "terminal", "code": "echo hello > out.txt"}
    )
    model_server.tool("response", {"text": "file written"})
    ctx = make_context()
    assert await _run(ctx, "write the file") == "file written"
    assert (workdir / "out.txt").read_text() == "hello\n"
    second = _prompt_text(model_server.requests[1])
    assert "[exit code 0]" in second and "code_execution_tool" in second
    assert _log_items(ctx, "tool"), "the tool call is logged"


async def test_python_runtime_and_exit_codes(model_server, make_context):
    model_server.tool("code_execution_tool", {"runtime": "python", "code": "print(6 * 7)"})
    model_server.tool(
        "code_execution_tool",
        {"runtime": "terminal", "code": "exit_code_test() { return 3; }; exit_code_test"},
    )
    model_server.tool("response", {"text": "ok"})
    ctx = make_context()
    assert await _run(ctx, "compute") == "ok"
    assert "42" in _prompt_text(model_server.requests[1])
    assert "[exit code 3]" in _prompt_text(model_server.requests[2])


async def test_call_subordinate(model_server, make_context):
    model_server.tool("call_subordinate", {"message": "what is 6*7?", "profile": "developer"})
    model_server.tool("response", {"text": "42"})  # the subordinate's answer
    model_server.tool("response", {"text": "The subordinate says 42"})
    ctx = make_context()
    assert await _run(ctx, "ask a helper") == "The subordinate says 42"
    sub = ctx.agent0.data["_subordinate"]
    assert sub.number == 1 and sub.data["_superior"] is ctx.agent0
    assert sub.config.profile == "developer"
    sub_request = model_server.requests[1]
    assert "software engineer agent" in sub_request["messages"][0]["content"]
    assert "what is 6*7?" in _prompt_text(sub_request)
    assert "42" in _prompt_text(model_server.requests[2])


async def test_misformat_warning_then_recovery(model_server, make_context):
    model_server.reply("I will just chat without any JSON.")
    model_server.tool("response", {"text": "recovered"})
    ctx = make_context()
    assert await _run(ctx, "go") == "recovered"
    assert "not a JSON object" in _prompt_text(model_server.requests[1])
    assert _log_items(ctx, "warning")


async def test_unknown_tool_lists_the_tools(model_server, make_context):
    model_server.tool("fly_to_moon", {"speed": "fast", "self": 1, "not an identifier": 2})
    model_server.tool("../../etc/passwd", {})
    model_server.tool("response", {"text": "fine"})
    ctx = make_context()
    assert await _run(ctx, "go") == "fine"
    second = _prompt_text(model_server.requests[1])
    assert 'no tool named "fly_to_moon"' in second
    assert "code_execution_tool" in second and "response" in second
    assert 'no tool named "../../etc/passwd"' in _prompt_text(model_server.requests[2])


async def test_a_provider_error_holds_the_run_until_a_retry_grant(
    model_server, make_context, chats
):
    model_server.respond_with(lambda body: ScriptedFailure(500, "provider exploded"))
    ctx = make_context()
    assert await _run(ctx, "go") == "", "a held run has no answer"
    run = chats.journal.list_runs(context_id=ctx.id)[0]
    assert (run.status, run.reason) == ("needs_attention", "model_failed")
    assert run.reason_detail["error"]["status"] == 500
    [warning] = _log_items(ctx, "warning")
    assert "model_failed" in warning["content"] and "Traceback" not in str(ctx.log.output())
    assert not ctx.is_running()
    # a retry grant lets the same run go on
    model_server.respond_with(lambda body: {"tool_name": "response", "tool_args": {"text": "back"}})
    await decisions.grant_retries(chats, run.id, 1, actor="test")
    assert await asyncio.wait_for(ctx.task, TIMEOUT) == "back"
    assert chats.journal.get_run(run.id).status == "completed"


async def test_repeat_detection_skips_the_tool(model_server, make_context):
    model_server.tool("notify_user", {"message": "step"})
    model_server.tool("notify_user", {"message": "step"})
    model_server.tool("response", {"text": "done"})
    ctx = make_context()
    assert await _run(ctx, "go") == "done"
    notes = [i for i in ctx.log.output() if (i.get("kvps") or {}).get("notification")]
    assert len(notes) == 1, "the repeated call did not run again"
    assert "identical to the one before" in _prompt_text(model_server.requests[2])


async def test_text_after_the_first_object_is_dropped(model_server, make_context):
    first = json.dumps({"tool_name": "response", "tool_args": {"text": "one"}})
    model_server.reply(first + ' {"tool_name": "response", "tool_args": {"text": "two"}}')
    ctx = make_context()
    assert await _run(ctx, "go") == "one"
    assert "two" not in ctx.agent0.history.output()[-1]["content"]


async def test_intervention_reaches_the_working_agent(model_server, make_context):
    model_server.tool("wait", {"seconds": 60})
    model_server.tool("response", {"text": "stopped waiting"})
    ctx = make_context()
    task = ctx.communicate(UserMessage("wait a minute"))
    await _until(
        lambda: any("wait" in str(i.get("heading")) for i in _log_items(ctx, "tool")), "wait"
    )
    same = ctx.communicate(UserMessage("never mind, answer now"))
    assert same is task
    assert await asyncio.wait_for(task, 10) == "stopped waiting"
    second = _prompt_text(model_server.requests[1])
    assert "never mind, answer now" in second and "interrupted" in second


async def test_pause_holds_the_loop_until_resumed(model_server, make_context):
    model_server.tool("notify_user", {"message": "first"})
    model_server.tool("response", {"text": "after pause"})
    ctx = make_context()
    task = ctx.communicate(UserMessage("go"))
    ctx.paused = True
    assert ctx.output()["paused"] is True
    await asyncio.sleep(0.3)  # a negative check: nothing may happen in this window
    assert model_server.calls == 0, "a paused chat makes no model call"
    assert ctx.is_running()
    ctx.paused = False
    assert await asyncio.wait_for(task, TIMEOUT) == "after pause"


async def test_kill_process_cancels_the_run(model_server, make_context):
    model_server.tool("wait", {"seconds": 60})
    ctx = make_context()
    task = ctx.communicate(UserMessage("wait"))
    await _until(lambda: bool(_log_items(ctx, "tool")), "the wait tool")
    ctx.kill_process()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert not ctx.is_running()


async def test_nudge_restarts_with_the_nudge_message(model_server, make_context):
    model_server.tool("wait", {"seconds": 60})
    model_server.tool("response", {"text": "nudged"})
    ctx = make_context()
    first = ctx.communicate(UserMessage("wait"))
    await _until(lambda: bool(_log_items(ctx, "tool")), "the wait tool")
    second = ctx.nudge()
    assert second is not first
    assert await asyncio.wait_for(second, TIMEOUT) == "nudged"
    assert first.cancelled()
    assert "stuck or the previous step was interrupted" in _prompt_text(model_server.requests[1])


async def test_history_compression_with_failing_utility_model(model_server, make_context):
    utility_calls: list[dict] = []

    def respond(body: dict):
        if "You condense" in str(body["messages"][0]["content"]):
            utility_calls.append(body)
            return ScriptedFailure(500, "utility down")
        return {"tool_name": "response", "tool_args": {"text": "still answering"}}

    model_server.respond_with(respond)
    ctx = make_context(chat_model_ctx_length=3000, chat_model_ctx_history=0.5)
    agent = ctx.agent0
    for i in range(8):
        agent.history.add(False, f"old question {i} " + "q" * 1500)
        agent.history.add(True, f"old answer {i} " + "a" * 1500)
        agent.history.new_topic()
    assert agent.history.over_limit()
    assert await _run(ctx, "newest question") == "still answering"
    assert utility_calls, "the utility model was asked to summarise"
    assert not agent.history.over_limit()
    chat = next(r for r in model_server.requests if r not in utility_calls)
    assert "newest question" in _prompt_text(chat)


async def test_stream_is_logged_with_headline_and_reasoning(model_server, make_context):
    reply = {"thoughts": ["t"], "headline": "Saying hi", "tool_name": "response", "tool_args": {}}
    model_server.reply(reply, reasoning="thinking hard")
    ctx = make_context()
    await _run(ctx, "hi")
    items = _log_items(ctx, "agent")
    assert len(items) == 1, "one agent item per iteration"
    assert items[0]["heading"] == "A0: Saying hi"
    assert items[0]["content"] == "thinking hard"


async def test_text_editor_write_patch_read(model_server, make_context, workdir):
    model_server.tool("text_editor:write", {"path": "notes/a.txt", "content": "one\ntwo\n"})
    edit = {"line_from": 2, "line_to": 2, "content": "TWO"}
    model_server.tool("text_editor:patch", {"path": "notes/a.txt", "edits": [edit]})
    model_server.tool("text_editor:read", {"path": "notes/a.txt"})
    model_server.tool("response", {"text": "edited"})
    ctx = make_context()
    assert await _run(ctx, "edit") == "edited"
    assert (workdir / "notes" / "a.txt").read_text() == "one\nTWO\n"
    assert "    2| TWO" in _prompt_text(model_server.requests[3])


async def test_input_answers_a_waiting_command(model_server, make_context):
    code = 'read -r answer; echo "got $answer"'
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": code})
    model_server.tool("input", {"keyboard": "yes please"})
    model_server.tool("response", {"text": "answered"})
    ctx = make_context(code_exec_first_output_timeout=0.3)
    assert await _run(ctx, "go") == "answered"
    assert "still running" in _prompt_text(model_server.requests[1])
    third = _prompt_text(model_server.requests[2])
    assert "got yes please" in third and "[exit code 0]" in third


async def test_repairable_error_from_a_profile_tool(model_server, make_context, _private_usr_dir):
    tools = _private_usr_dir / "agents" / "agent0" / "tools"
    tools.mkdir(parents=True)
    (tools / "fragile.py").write_text(
        "from agent import RepairableException\n"
        "from python.helpers.tool import Tool\n\n"
        "class Fragile(Tool):\n"
        "    async def execute(self, **kwargs):\n"
        "        raise RepairableException('fragile needs a name argument')\n"
    )
    model_server.tool("fragile", {})
    model_server.tool("response", {"text": "fixed"})
    ctx = make_context()
    assert await _run(ctx, "go") == "fixed"
    assert "fragile needs a name argument" in _prompt_text(model_server.requests[1])
    assert "fragile" in ctx.agent0.available_tools()


async def test_profile_extension_overrides(model_server, make_context, _private_usr_dir):
    folder = _private_usr_dir / "agents" / "agent0" / "extensions" / "system_prompt"
    folder.mkdir(parents=True)
    (folder / "_11_tools_prompt.py").write_text(
        "from python.helpers.extensions import Extension\n\n"
        "class NoTools(Extension):\n"
        "    async def execute(self, system_prompt=None, **kwargs):\n"
        "        system_prompt.append('TOOLS REPLACED')\n"
    )
    model_server.tool("response", {"text": "ok"})
    ctx = make_context()
    await _run(ctx, "go")
    system = model_server.requests[0]["messages"][0]["content"]
    assert "TOOLS REPLACED" in system and "### code_execution_tool" not in system


async def test_intervention_reaches_a_working_subordinate(model_server, make_context):
    model_server.tool("call_subordinate", {"message": "wait for a while"})
    model_server.tool("wait", {"seconds": 60})  # the subordinate waits
    model_server.tool("response", {"text": "sub interrupted"})
    model_server.tool("response", {"text": "all done"})
    ctx = make_context()
    task = ctx.communicate(UserMessage("delegate"))
    await _until(lambda: ctx.streaming_agent is not None and ctx.streaming_agent.number == 1, "sub")
    await _until(lambda: any(i.get("agentno") == 1 for i in _log_items(ctx, "tool")), "sub tool")
    ctx.communicate(UserMessage("hurry up"))
    assert await asyncio.wait_for(task, 10) == "all done"
    assert "hurry up" in _prompt_text(model_server.requests[2])
    assert "sub interrupted" in _prompt_text(model_server.requests[3])


async def test_reset_kills_shells_and_starts_over(model_server, make_context):
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": "sleep 60 &"})
    model_server.tool("response", {"text": "started"})
    ctx = make_context()
    assert await _run(ctx, "go") == "started"
    session = ctx.shells.sessions[0]
    old_agent, old_guid = ctx.agent0, ctx.log.guid
    ctx.reset()
    assert ctx.agent0 is not old_agent and ctx.agent0.history.is_empty()
    assert ctx.log.guid != old_guid and not ctx.shells.sessions
    await _until(lambda: session.proc is None, "the old shell to close")


def test_config_from_settings_reads_profile_models_and_budget(tmp_path):
    settings = {
        "agent_profile": "developer",
        "chat_model_provider": "other",
        "chat_model_name": "m1",
        "util_model_provider": "other",
        "util_model_name": "m2",
        "chat_model_ctx_length": 1000,
        "chat_model_ctx_history": 0.5,
        "workdir": str(tmp_path),
    }
    config = AgentConfig.from_settings(settings)
    assert config.profile == "developer"
    assert config.chat_model.name == "m1" and config.utility_model.name == "m2"
    assert config.history_token_limit() == 500
    assert config.prompts_dirs[-1].name == "prompts"
    assert any("developer" in str(d) for d in config.prompts_dirs)
    assert AgentConfig.from_settings(settings, profile="default").profile == "default"


def test_upstream_names_still_import_from_agent():
    """agent.py re-exports what moved below it (python/helpers), as the same objects."""
    import agent
    from python.helpers import agent_config, chat_context, errors

    moved = {
        "AgentConfig": agent_config,
        "AgentContextType": chat_context,
        "UserMessage": chat_context,
        "new_context_id": chat_context,
        "HandledException": errors,
        "InterventionException": errors,
        "RepairableException": errors,
    }
    for name, module in moved.items():
        assert name in agent.__all__ and getattr(agent, name) is getattr(module, name), name
    assert {"Agent", "AgentContext", "LoopData"} <= set(agent.__all__)
    assert issubclass(agent.AgentContext, chat_context.ChatContext)


async def test_remove_forgets_the_chat(make_context):
    ctx = make_context()
    assert AgentContext.remove(ctx.id) is ctx
    assert AgentContext.get(ctx.id) is None and ctx not in AgentContext.all()
    assert AgentContext.remove(ctx.id) is None


async def test_secrets_are_masked_in_the_log(model_server, make_context, _private_usr_dir):
    secret = "supersecretvalue123"
    (_private_usr_dir / "secrets.env").write_text(f"MY_TOKEN={secret}\n")
    tools = _private_usr_dir / "agents" / "agent0" / "tools"
    tools.mkdir(parents=True)
    (tools / "leaky.py").write_text(
        "from python.helpers.tool import Tool\n\n"
        "class Leaky(Tool):\n"
        "    async def execute(self, **kwargs):\n"
        f"        raise RuntimeError('login failed for {secret}')\n"
    )
    model_server.tool("notify_user", {"message": f"token is {secret}"})
    model_server.tool("leaky", {"password": secret})
    ctx = make_context()
    result = await _run(ctx, "go")
    assert secret not in result
    dumped = json.dumps(ctx.log.output(), ensure_ascii=False)
    assert secret not in dumped
    assert "§§secret(MY_TOKEN)" in dumped
    assert len(_log_items(ctx, "error")) == 1
