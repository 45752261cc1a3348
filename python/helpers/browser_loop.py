"""The browser agent's loop: the browser model picks one action, the browser carries it out.

Every step is two journaled child calls of the ``browser_agent`` call, made through the
chat's session like any call of the loop: the browser model's reply (``call_model`` with
kind ``browser``) and the action (``browser_read`` for reading actions, which replay;
``browser_act`` for actions that may change something outside, which are held when a
crash leaves them open). They are journaled under an agent number of their own, derived
from the browser_agent call's id, so a finished browser task is reused as a whole and a
resumed one finds its steps at the same positions.

The prompt of each model call is built from the journal's results alone (the task, the
steps so far and the page state the last action returned), so on a resume the recorded
replies and actions are reused, not repeated, and the browser agent goes on from the
recorded action log. The live browser is started only when an action must really run,
and is first brought back to the last page the log shows.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

from python.helpers import dirty_json
from python.helpers import secrets as secret_store
from python.helpers.browser_actions import EFFECT_ACTIONS, BrowserAct
from python.helpers.browser_reading import READ_ACTIONS, BrowserRead, restore
from python.helpers.browser_session import BrowserFailure, BrowserSession, screens_dir
from python.helpers.errors import InterventionException
from python.helpers.tool import Response, Tool

READ_TOOL = "browser_read"
ACT_TOOL = "browser_act"
#: Inner agent numbers start here (the chain's own agents are numbered 0, 1, 2, ...).
INNER_AGENT_BASE = 1_000_000
URL_IN_TEXT = re.compile(r"https?://[^\s<>\"')\]]+")
HISTORY_STEPS = 20


def inner_agent_number(call_id: str) -> int:
    """The agent number the browser task's calls are journaled under (from its call id)."""
    return INNER_AGENT_BASE + int(hashlib.sha256(call_id.encode()).hexdigest()[:10], 16)


def first_url(message: str) -> str | None:
    """The first URL named in the task (opened before the browser model is asked)."""
    found = URL_IN_TEXT.search(message)
    return found.group(0).rstrip(".,;:") if found else None


def parse_action(text: str) -> dict[str, Any] | None:
    value = dirty_json.json_parse_dirty(text)
    if not isinstance(value, dict) or not isinstance(value.get("action"), str):
        return None
    return value


class BrowserRun:
    """The chat's browser for one task: started only when an action must really run."""

    def __init__(self, context_id: str, settings: dict[str, Any], workdir: Path) -> None:
        self.context_id = context_id
        self.settings = settings
        self.workdir = workdir
        self.session: BrowserSession | None = None
        self.last_url: str | None = None  # the page the recorded log was on last

    def screens_dir(self) -> Path:
        return screens_dir(self.context_id)

    async def live(self) -> BrowserSession:
        if self.session is not None and self.session.crashed:
            raise BrowserFailure("browser_crashed", "the browser crashed; it was closed")
        if self.session is None:
            self.session = BrowserSession(self.context_id, self.settings, self.workdir)
            await self.session.start()
            await restore(self.session, self.last_url)
        return self.session

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None


def _page_text(page: dict[str, Any] | None) -> str:
    if not page:
        return "No page is open yet (about:blank)."
    lines = [f"URL: {page.get('url')}", f"Title: {page.get('title')}", "Elements:"]
    for item in page.get("elements") or []:
        attrs = " ".join(
            f'{k}="{item[k]}"' for k in ("type", "name", "placeholder", "href") if item.get(k)
        )
        lines.append(f"[{item.get('index')}] <{item.get('tag')} {attrs}> {item.get('text', '')}")
    if page.get("screenshot"):
        lines.append(f"Screenshot: sha256 {page['screenshot']}")
    return "\n".join(lines)


class BrowserTask:
    """One browser_agent task: the steps, each journaled, until ``done`` or a limit."""

    def __init__(self, tool: Tool, message: str) -> None:
        from agent import Agent  # the loop's agent class (agent.py imports this module's user)

        parent = tool.agent
        self.tool = tool
        self.message = message
        self.settings = parent.config.settings
        call_id = tool.call_identity[0] if tool.call_identity else "unjournaled"
        self.inner = Agent(inner_agent_number(call_id), parent.config, parent.context)
        self.inner.agent_name = f"{parent.agent_name}-browser"
        self.browser = BrowserRun(parent.context.id, self.settings, parent.config.workdir_path())
        self.steps: list[tuple[dict[str, Any], str]] = []
        self.page: dict[str, Any] | None = None
        self.max_steps = int(self.settings.get("browser_max_steps") or 50)
        self.deadline = time.monotonic() + float(self.settings.get("browser_task_timeout") or 300)

    # the two kinds of journaled call -----------------------------------------------------
    async def act(self, action: dict[str, Any]) -> Response:
        """One action as a journaled child call; its page state becomes the current page."""
        name = str(action.get("action"))
        # the model sees secrets as §§secret(NAME) and may type one: the browser gets the
        # value, the journal and the log the placeholder (masked again where they are written)
        args = secret_store.unmask({k: v for k, v in action.items() if k != "action"})
        cls: type[BrowserRead] | type[BrowserAct]
        cls, tool_name = (
            (BrowserRead, READ_TOOL) if name in READ_ACTIONS else (BrowserAct, ACT_TOOL)
        )
        tool = cls(self.inner, tool_name, name, args, "")
        tool.browser = self.browser
        if isinstance(tool, BrowserAct):
            tool.workdir = self.browser.workdir
        context = self.inner.context
        response = await context.session.tool_call(self.inner, tool, lambda: tool.execute())
        extra = response.additional or {}
        page = extra.get("page") if isinstance(extra, dict) else None
        self.page = page if isinstance(page, dict) else None
        if self.page is not None:
            self.browser.last_url = str(self.page.get("url") or "") or self.browser.last_url
        self._log_step(name, args, response)
        return response

    def _messages(self) -> list[dict[str, Any]]:
        history = "\n".join(
            f"{i + 1}. {json.dumps(a, sort_keys=True)} -> {r}"
            for i, (a, r) in enumerate(self.steps[-HISTORY_STEPS:])
        )
        user = (
            f"Task:\n{self.message}\n\nSteps so far:\n{history or '(none)'}\n\n"
            f"Current page:\n{_page_text(self.page)}\n\nThe next action, as one JSON object:"
        )
        system = self.inner.read_prompt("browser_agent.system.md")
        content: Any = user
        image = self._screenshot_part()
        if image is not None:
            content = [{"type": "text", "text": user}, image]
        return [{"role": "system", "content": system}, {"role": "user", "content": content}]

    def _screenshot_part(self) -> dict[str, Any] | None:
        """The current screenshot for a vision-capable browser model (browser_model_vision)."""
        if not self.settings.get("browser_model_vision", True) or not self.page:
            return None
        shot = self.browser.screens_dir() / f"{self.page.get('screenshot')}.jpg"
        if not shot.is_file():
            return None
        data = base64.b64encode(shot.read_bytes()).decode()
        return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}}

    async def next_action(self) -> dict[str, Any] | str:
        reply = await self.inner.call_model(self._messages(), kind="browser")
        action = parse_action(reply.response)
        return action if action is not None else reply.response

    # the task --------------------------------------------------------------------------------
    async def run(self) -> str:
        try:
            return await self._steps()
        except InterventionException:
            raise
        except Exception as exc:  # a failed step (live, or recorded and raised again)
            return f"browser_agent failed: {exc}"
        finally:
            await self.browser.close()

    async def _steps(self) -> str:
        url = first_url(self.message)
        if url:
            await self.act({"action": "navigate", "url": url})
        for _ in range(self.max_steps):
            # between steps: wait while the chat is paused; a user's message ends the task
            # here (the steps so far are kept as the tool's progress)
            self.tool.set_progress(self._progress())
            await self.tool.agent.handle_intervention()
            if time.monotonic() > self.deadline:
                return self._stopped("the task ran past browser_task_timeout")
            if self.page is None and self.steps:
                await self.act({"action": "observe"})  # a decision left no page state
            action = await self.next_action()
            if isinstance(action, str):
                self.steps.append(({"action": "?"}, "not one JSON action; answer again"))
                continue
            if action["action"] == "done":
                return self._answer(str(action.get("response") or ""))
            if action["action"] not in READ_ACTIONS + EFFECT_ACTIONS:
                self.steps.append((action, "unknown action"))
                continue
            response = await self.act(action)
            self.steps.append((action, response.message))
        return self._stopped(f"the step limit ({self.max_steps}) was reached")

    def _progress(self) -> str:
        done = [f"{json.dumps(a, sort_keys=True)} -> {r}" for a, r in self.steps]
        last = self.browser.last_url or "about:blank"
        return "Browser steps so far:\n" + "\n".join(done or ["(none)"]) + f"\nLast page: {last}"

    def _answer(self, text: str) -> str:
        url = (self.page or {}).get("url") or self.browser.last_url
        shot = (self.page or {}).get("screenshot")
        lines = [text.strip() or "(no answer)"]
        if url:
            lines.append(f"Last page: {url}")
        if shot:
            lines.append(f"Screenshot: sha256 {shot}")
        return "\n".join(lines)

    def _stopped(self, why: str) -> str:
        last = self.browser.last_url or "about:blank"
        return f"browser_agent stopped: {why}; the last page was {last}."

    # the chat log ------------------------------------------------------------------------------
    def _log_step(self, name: str, args: dict[str, Any], response: Response) -> None:
        page = self.page or {}
        kvps = {"action": name, **self.inner.mask_value(args)}
        if page.get("url"):
            kvps["url"] = page["url"]
        if page.get("screenshot"):
            kvps["screenshot"] = page["screenshot"]
        self.inner.context.log.log(
            type="browser",
            heading=f"Browser: {name}",
            content=self.inner.mask(response.message),
            kvps=kvps,
            agentno=self.tool.agent.number,
        )
