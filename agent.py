"""The agent loop: a chat's agents (AgentContext) and the monologue (Agent).

Every chat has a durable session (``context.session``), made with the chat by the factory
it is given (python/durable builds them; agent.py never imports it). The session owns the
chat's life: its one task, admission, Stop, reset and remove. The loop reaches the
journal only through it: ``Agent.call_model`` (every model call) and
``Agent.execute_tool`` (every tool execution) each make one call into the session, and
every iteration ends with ``session.iteration_end`` (the checkpoint). Nothing else calls
a model or runs a tool.

What is not the loop lives one layer below and is re-exported here, so upstream's import
paths (``from agent import AgentConfig, UserMessage, ...``) keep working: the chat's state,
registry and controls (python/helpers/chat_context.py), the configuration
(python/helpers/agent_config.py) and the loop's exceptions (python/helpers/errors.py).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, NoReturn

from python.helpers import includes, mcp_client, model_preflight
from python.helpers import secrets as secret_store
from python.helpers.agent_config import AgentConfig
from python.helpers.chat_context import (
    AgentContextType,
    ChatContext,
    UserMessage,
    new_context_id,
)
from python.helpers.chat_session import ModelRequest, SessionFactory, StreamCallback
from python.helpers.errors import HandledException, InterventionException, RepairableException
from python.helpers.extensions import call_extensions, call_extensions_sync
from python.helpers.history import History, Message, content_text
from python.helpers.models import ChatModel, ModelNotConfigured, ModelResult
from python.helpers.reply_stream import ReplyStream
from python.helpers.tool import Response, Tool, find_tool_class, tool_names
from python.helpers.tool_request import parse_tool_request

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentContext",
    "AgentContextType",
    "HandledException",
    "InterventionException",
    "LoopData",
    "RepairableException",
    "UserMessage",
    "new_context_id",
]


@dataclass
class LoopData:
    iteration: int = -1
    system: list[str] = field(default_factory=list)
    user_message: Message | None = None
    history_output: list[dict] = field(default_factory=list)
    extras_temporary: dict[str, Any] = field(default_factory=dict)
    extras_persistent: dict[str, Any] = field(default_factory=dict)
    last_response: str = ""
    params_temporary: dict[str, Any] = field(default_factory=dict)
    params_persistent: dict[str, Any] = field(default_factory=dict)
    current_tool: Tool | None = None


class AgentContext(ChatContext):
    """One chat: its state (python/helpers/chat_context.py) and its agents."""

    def __init__(
        self,
        config: AgentConfig,
        id: str | None = None,
        name: str | None = None,
        type: AgentContextType = AgentContextType.USER,
        *,
        session: SessionFactory,
    ) -> None:
        super().__init__(config, id, name, type, session=session)
        self.streaming_agent: Agent | None = None
        self.agent0 = Agent(0, config, self)
        self._register()

    def get_agent(self) -> Agent:
        return self.streaming_agent or self.agent0

    def agents(self) -> list[Agent]:
        """Agent 0 and its subordinates, in order."""
        chain: list[Agent] = []
        agent: Agent | None = self.agent0
        while agent is not None and len(chain) < 100:
            chain.append(agent)
            agent = agent.data.get("_subordinate")
        return chain

    def clear(self) -> None:
        """A fresh log, agent 0 and shells (``reset`` through the session)."""
        self.close_shells()
        self.log = self.new_log()
        self.paused = False
        self.streaming_agent = None
        self.agent0 = Agent(0, self.config, self)

    async def chain(self, agent: Agent, *, resume: bool = False) -> str:
        """Run ``agent``'s monologue (its message is already in history), then hand the
        answer up to its superiors, each as its call_subordinate result. ``resume``:
        continue the restored loop state. No error handling: the session's driver has it."""
        response = await agent.monologue(resume=resume)
        while agent.intervention is not None:  # arrived after the last check
            pending, agent.intervention = agent.intervention, None
            agent.hist_add_user_message(pending)
            response = await agent.monologue()
        superior = agent.data.get("_superior")
        if superior is not None:
            superior.hist_add_tool_result("call_subordinate", response)
            response = await self.chain(superior)
        await call_extensions("process_chain_end", agent, data={"response": response})
        return response


class Agent:
    """One agent (number n) in a chat; subordinates have n + 1."""

    def __init__(self, number: int, config: AgentConfig, context: AgentContext) -> None:
        self.number = number
        self.agent_name = f"A{number}"
        self.config = config
        self.context = context
        self.history = History(max_tokens=config.history_token_limit())
        self.last_user_message: Message | None = None
        self.intervention: UserMessage | None = None
        self.data: dict[str, Any] = {}
        self.loop_data = LoopData()
        self._models: dict[str, ChatModel] = {}
        call_extensions_sync("agent_init", self)

    # -- the monologue --------------------------------------------------------
    async def monologue(self, resume: bool = False) -> str:
        """Think, call tools and repeat until a tool ends the loop with an answer.
        ``resume``: keep the restored loop data (a journaled run continuing after a crash)."""
        if not resume:
            self.loop_data = LoopData(user_message=self.last_user_message)
        await self.extensions("monologue_start")
        try:
            while True:
                self.context.streaming_agent = self
                self.loop_data.iteration += 1
                self.loop_data.params_temporary = {}
                await self.extensions("message_loop_start")
                result = None
                try:
                    result = await self._iteration()
                except InterventionException:
                    pass  # the message is in history; continue with a new iteration
                except RepairableException as e:
                    await self.hist_add_error_warning(e)
                except (HandledException, asyncio.CancelledError):
                    raise
                except Exception as e:
                    self.log_error(e)
                finally:
                    if not _current_task_cancelling():
                        await self.extensions("message_loop_end")
                await self.context.session.iteration_end(self, final=result is not None)
                if result is not None:
                    return result
        finally:
            self.context.streaming_agent = None
            if not _current_task_cancelling():
                await self.extensions("monologue_end")

    async def _iteration(self) -> str | None:
        await self.handle_intervention()
        messages = await self.prepare_prompt()
        await self.extensions("before_main_llm_call")
        reply = await self.call_chat_model(messages)
        await self.handle_intervention(reply)
        if reply == self.loop_data.last_response:
            self.hist_add_ai_response(reply)
            self.warn(self.read_prompt("fw.msg_repeat.md"))
            return None
        self.loop_data.last_response = reply
        self.hist_add_ai_response(reply)
        return await self.process_tools(reply)

    async def prepare_prompt(self) -> list[dict[str, str]]:
        ld = self.loop_data
        await self.extensions("message_loop_prompts_before")
        await self.compress_history()
        ld.system = []
        await self.extensions("system_prompt", system_prompt=ld.system)
        ld.history_output = self.history.output()
        await self.extensions("message_loop_prompts_after")
        messages = [{"role": "system", "content": "\n\n".join(ld.system)}, *ld.history_output]
        extras = {**ld.extras_persistent, **ld.extras_temporary}
        ld.extras_temporary = {}
        if extras:
            text = self.read_prompt("agent.context.extras.md", extras=_json(extras))
            last = messages[-1]["content"]
            if messages[-1]["role"] == "user" and isinstance(last, str):
                messages[-1] = {"role": "user", "content": last + "\n\n" + text}
            elif messages[-1]["role"] == "user":  # a message with images: one more text part
                messages[-1] = {"role": "user", "content": [*last, {"type": "text", "text": text}]}
            else:
                messages.append({"role": "user", "content": text})
        full = "\n\n".join(content_text(m["content"]) for m in messages)
        self.data["ctx_window"] = {"text": full, "tokens": len(full) // 4}
        return messages

    async def call_chat_model(self, messages: list[dict[str, str]]) -> str:
        """Stream the main model's reply through the stream extension points."""
        stream = ReplyStream(self)
        result = await self.call_model(
            messages, kind="chat", on_reasoning=stream.on_reasoning, on_response=stream.on_response
        )
        await stream.finish(result)
        await self.extensions("reasoning_stream_end")
        await self.extensions("response_stream_end")
        return stream.reply(result.response)

    async def call_model(
        self,
        messages: list[dict[str, str]],
        *,
        kind: str = "chat",
        on_reasoning: StreamCallback | None = None,
        on_response: StreamCallback | None = None,
    ) -> ModelResult:
        """SEAM 1: every model call of the agent passes through here, into the session
        (which reuses a journaled reply instead of calling the model)."""
        if kind == "utility":
            await self.extensions("util_model_call_before", messages=messages)
        model = self._model(kind)
        # Secrets are masked where they enter: the model sees `§§secret(NAME)`, never a value
        # (history is masked already; this also covers system prompts and extras) ...
        sent = self.mask_value(messages)

        async def effect() -> ModelResult:
            return await model.call(
                sent, on_reasoning=on_reasoning, on_response=on_response, read_blob=self.read_blob
            )

        async def preflight() -> None:  # what is knowable before anything is sent
            await model_preflight.check(model, kind)

        request = ModelRequest(sent, kind, effect, on_reasoning, on_response, preflight)
        result = await self.context.session.model_call(self, request)
        # ... and a value in its reply is masked before the loop, the log or history see it
        return ModelResult(self.mask(result.response), self.mask(result.reasoning))

    def _model(self, kind: str) -> ChatModel:
        if kind not in self._models:
            from python.helpers import settings as settings_mod

            config = self.config.model_config(kind)
            key = settings_mod.get_api_key(config.provider)
            self._models[kind] = ChatModel(config, key)
        return self._models[kind]

    def forget_models(self) -> None:
        """Drop the cached model clients (new settings reach the next call)."""
        self._models.clear()

    async def store_blob(self, data: bytes) -> str:
        """Keep bytes (a prepared image) in the chat's journal once; returns their SHA-256."""
        return str(await self.context.session.journal.aio.put_blob(data))

    async def read_blob(self, blob: str) -> bytes:
        """Bytes the chat's journal keeps under ``blob`` (an image part's blob)."""
        return bytes(await self.context.session.journal.aio.get_blob(blob))

    async def call_utility_model(self, system: str, message: str) -> str:
        """One utility-model call; a ``message`` longer than the utility model's input share
        (``util_model_ctx_input``) keeps its end, where the newest text is."""
        message = _fit_input(message, self.config.utility_input_limit(), len(system) // 4)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": message}]
        return (await self.call_model(messages, kind="utility")).response

    # -- tools ----------------------------------------------------------------
    async def process_tools(self, reply: str) -> str | None:
        request = parse_tool_request(reply)
        if request is None:
            self.warn(self.read_prompt("fw.msg_misformat.md"))
            return None
        tool = self.get_tool(request.name, request.method, request.args, reply)
        self.loop_data.current_tool = tool
        try:
            response = await self.execute_tool(tool)
        finally:
            self.loop_data.current_tool = None
        return response.message if response.break_loop else None

    async def execute_tool(self, tool: Tool) -> Response:
        """SEAM 2: every tool execution passes through here; its ``execute`` runs inside the
        session (which reuses a journaled result instead of running the tool)."""
        # Tools get real values: a `§§secret(NAME)` in the arguments (the model's own, or a
        # masked reply reused after a crash) becomes the secret again.
        tool.args = secret_store.unmask(tool.args)
        kwargs = {k: v for k, v in tool.args.items() if k.isidentifier() and k != "self"}
        await self.handle_intervention()
        await tool.before_execution(**kwargs)
        await self.handle_intervention()
        await self.extensions("tool_execute_before", tool_args=tool.args, tool_name=tool.name)

        async def effect() -> Response:
            # `§§include(<file>)` becomes the file's text now, after the journal recorded the
            # arguments as the model wrote them (python/helpers/includes.py)
            expanded = includes.expand(tool.args)
            if expanded != tool.args:
                tool.args = secret_store.unmask(expanded)
                kwargs.update({k: v for k, v in tool.args.items() if k in kwargs})
            return await tool.execute(**kwargs)

        response = await self.context.session.tool_call(self, tool, effect)
        # the tool saw real values; its result is masked before history, log or answer
        response = _masked_response(self, response)
        await self.extensions("tool_execute_after", response=response, tool_name=tool.name)
        await tool.after_execution(response)
        await self.handle_intervention()
        return response

    def get_tool(
        self, name: str, method: str | None, args: dict, message: str, **kwargs: Any
    ) -> Tool:
        """Profile tools first, then python/tools, then `<server>.<tool>` of a configured MCP
        server; anything else is the unknown tool."""
        cls = find_tool_class(name, self.config.tool_dirs())
        if cls is None and mcp_client.is_tool(name):
            from python.tools._mcp import McpToolCall

            cls = McpToolCall
        if cls is None:
            from python.tools.unknown import Unknown

            cls = Unknown
        return cls(self, name, method, args, message, self.loop_data, **kwargs)

    def available_tools(self) -> list[str]:
        return tool_names(self.config.tool_dirs())

    # -- interventions --------------------------------------------------------
    async def handle_intervention(self, progress: str = "") -> None:
        """Wait while paused; turn a pending user message into an InterventionException."""
        while self.context.paused:
            await self.context.wait_if_paused()
        if self.intervention is None:
            return
        msg, self.intervention = self.intervention, None
        if progress.strip():
            self.hist_add_ai_response(progress)
        tool = self.loop_data.current_tool
        if tool is not None and tool.progress.strip():
            self.hist_add_tool_result(tool.name, tool.progress)
        self.hist_add_user_message(msg, intervention=True)
        raise InterventionException(msg.message)

    # -- history --------------------------------------------------------------
    def hist_add_message(self, ai: bool, content: str | dict | list) -> Message:
        data: dict[str, Any] = {"content": content, "ai": ai}
        call_extensions_sync("hist_add_before", self, content_data=data)
        return self.history.add(ai, self.mask_value(data["content"]))  # memory holds no secret

    def hist_add_user_message(self, msg: UserMessage, intervention: bool = False) -> Message:
        self.history.new_topic()
        name = "fw.intervention.md" if intervention else "fw.user_message.md"
        content = self.read_prompt(
            name,
            message=msg.message,
            attachments=", ".join(msg.attachments),
            system_message="\n".join(msg.system_message),
        )
        if msg.images:  # attachments prepared for a vision model: text, then the images
            parts = [{"type": "text", "text": content}, *(dict(p) for p in msg.images)]
            self.last_user_message = self.hist_add_message(False, parts)
            return self.last_user_message
        self.last_user_message = self.hist_add_message(False, content)
        return self.last_user_message

    def hist_add_ai_response(self, text: str) -> Message:
        return self.hist_add_message(True, self.read_prompt("fw.ai_response.md", message=text))

    def hist_add_tool_result(self, tool_name: str, text: str, **kwargs: Any) -> Message:
        data = {"tool_name": tool_name, "tool_result": text, **kwargs}
        call_extensions_sync("hist_add_tool_result", self, data=data)
        content = self.read_prompt(
            "fw.tool_result.md",
            tool_name=tool_name,
            tool_result=data["tool_result"],
            file=str(data.get("file") or ""),  # a long result's file (python/helpers/includes.py)
        )
        return self.hist_add_message(False, content)

    def hist_add_warning(self, message: str) -> Message:
        return self.hist_add_message(False, self.read_prompt("fw.warning.md", message=message))

    def warn(self, message: str) -> None:
        """A warning for the model (history) and the user (log)."""
        self.hist_add_warning(message)
        self.context.log.log(type="warning", content=self.mask(message), agentno=self.number)

    async def hist_add_error_warning(self, error: Exception) -> None:
        msg = {"message": str(error)}
        await self.extensions("error_format", msg=msg)
        self.warn(msg["message"])

    async def compress_history(self) -> bool:
        """Shrink history to the budget; the utility model summarises, else truncation."""
        if not self.history.over_limit():
            return False

        async def summarize(text: str) -> str:
            system = self.read_prompt("fw.topic_summary.sys.md")
            summary = await self.call_utility_model(
                system, self.read_prompt("fw.topic_summary.msg.md", content=text)
            )
            if not summary.strip():
                raise ValueError("empty summary")
            return self.read_prompt("fw.msg_summary.md", summary=summary)

        return await self.history.compress(summarize)

    # -- helpers --------------------------------------------------------------
    def read_prompt(self, name: str, **variables: Any) -> str:
        from python.helpers import prompts

        return prompts.render(name, self.config.prompts_dirs, **variables)

    async def extensions(self, point: str, **kwargs: Any) -> None:
        await call_extensions(point, self, loop_data=self.loop_data, **kwargs)

    def mask(self, text: str) -> str:
        return str(self.context.mask(text))

    def mask_value(self, value: Any) -> Any:
        """Strings, lists and dicts with every known secret masked (the chat's masker)."""
        return self.context.mask(value)

    def log_error(self, error: BaseException) -> NoReturn:
        """Log a clear, masked error item (no stack trace) and raise HandledException."""
        code = getattr(error, "code", None) or "agent_error"
        status = getattr(error, "status", None)
        text = self.mask(f"{type(error).__name__}: {error}")
        kvps = {"code": code, **({"status": status} if status is not None else {})}
        if isinstance(error, ModelNotConfigured):  # the chat offers a way to the setting
            kvps.update(reason=error.reason, setting=error.setting, model=error.kind)
        self.context.log.log(
            type="error", heading="Error", content=text, kvps=kvps, agentno=self.number
        )
        raise HandledException(text) from error


def _masked_response(agent: Agent, response: Response) -> Response:
    if not isinstance(response, Response):
        return response
    message = response.message
    if isinstance(message, str):
        message = agent.mask(message)
    additional = response.additional
    if additional:
        additional = agent.mask_value(additional)
    return Response(message, response.break_loop, additional)


UTILITY_CUT_MARK = "[... earlier text left out ...]\n"


def _fit_input(message: str, limit_tokens: int, used_tokens: int) -> str:
    """``message`` cut from the start to what is left of ``limit_tokens`` (about four
    characters a token, as the history budget counts)."""
    if limit_tokens <= 0:
        return message
    room = max(limit_tokens - used_tokens, 1) * 4
    if len(message) <= room:
        return message
    keep = max(room - len(UTILITY_CUT_MARK), 0)
    return UTILITY_CUT_MARK + (message[-keep:] if keep else "")


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)
