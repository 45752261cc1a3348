"""Tool base class, its Response, and where tool classes are found.

One Tool subclass per module in python/tools/; a profile's tools (agents/<profile>/tools,
usr/agents/<profile>/tools) come first and are loaded from their file.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from python.helpers import files

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, LoopData


class ToolArgsError(ValueError):
    """Arguments a tool cannot use; ``code`` is stable (the tool turns it into a refusal)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def refusal_text(tool: str, code: str, message: str) -> str:
    """The text every refusal of ``tool`` starts with, so the agent can tell it from a
    result."""
    return f"{tool} error ({code}): {message}"


def truthy(value: Any) -> bool:
    """A yes/no tool argument: True for true, 1 and the strings "true", "1", "yes", "on"
    (models send either)."""
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")


def dumps(value: Any) -> str:
    """A value shown to the model: indented JSON, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, indent=1)


@dataclass
class Response:
    """What a tool returns: text for the model and whether the monologue ends."""

    message: str
    break_loop: bool
    additional: dict[str, Any] | None = None


class Tool:
    """Lifecycle: before_execution -> execute -> after_execution (see Agent.execute_tool)."""

    #: (journal call id, args digest) set by the durable session before execute. Tools with
    #: a receipt adapter (code_execution_tool) name their receipts by it.
    call_identity: tuple[str, str] | None = None
    #: LogItem.mark arguments for the tool's log item (call_id, restored), set by the
    #: durable session once the call is journaled; a tool that logs its own item uses them.
    log_marks: dict[str, str] | None = None
    #: The tool changes state that moves with a run to another worker (the browser's
    #: profile): with shared workers it is stored after each of its calls, not only at the
    #: end of the agent's iteration.
    shares_state: bool = False
    #: Writes to the journal's own database (transaction functions) that a tool of the
    #: ``journal_atomic`` class (the memory tools) hands back instead of running them: the
    #: durable session commits them in the same transaction as the tool's result.
    journal_writes: tuple[Any, ...] | list[Any] = ()

    def __init__(
        self,
        agent: Agent,
        name: str,
        method: str | None,
        args: dict[str, Any],
        message: str,
        loop_data: LoopData | None = None,
        **kwargs: Any,
    ) -> None:
        self.agent = agent
        self.name = name
        self.method = method
        self.args = args if isinstance(args, dict) else {}
        self.message = message
        self.loop_data = loop_data
        self.log: Any = None
        self.progress = ""

    async def execute(self, **kwargs: Any) -> Response:
        raise NotImplementedError

    async def evidence(self) -> tuple[dict[str, Any], bytes | None] | None:
        """What the world looks like just before the effect (fields and an optional image),
        journaled next to the call for a person who must decide on it after a crash; None
        (the default): nothing to show. Called only when the effect really runs."""
        return None

    async def before_execution(self, **kwargs: Any) -> None:
        """Open the tool's log item (the UI shows its arguments)."""
        self.log = self.get_log_object()

    async def after_execution(self, response: Response, **kwargs: Any) -> None:
        """Store the result in history and show it in the log item."""
        text = response.message.strip() if isinstance(response.message, str) else ""
        self.agent.hist_add_tool_result(self.name, text, **(response.additional or {}))
        if self.log is not None:
            self.log.update(content=self.agent.mask(text))

    def get_log_object(self) -> Any:
        heading = f"{self.agent.agent_name}: Using tool '{self.full_name}'"
        return self.agent.context.log.log(
            type="tool",
            heading=heading,
            content="",
            kvps=self.agent.mask_value(self.args),
            agentno=self.agent.number,
        )

    def set_progress(self, text: str) -> None:
        """Partial output kept for an intervention to save as the tool result."""
        self.progress = text

    @property
    def full_name(self) -> str:
        return f"{self.name}:{self.method}" if self.method else self.name


TOOL_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def find_tool_class(name: str, folders: list[Path]) -> type[Tool] | None:
    """The class of tool ``name`` from the first folder that has ``<name>.py``; None for a
    name that is no tool (hidden ``_`` modules and ``unknown`` included)."""
    if not TOOL_NAME.match(name) or name.startswith("_") or name == "unknown":
        return None
    for folder in folders:
        path = folder / f"{name}.py"
        if path.is_file():
            return _tool_class(path)
    return None


def tool_names(folders: list[Path]) -> list[str]:
    """Every tool name the folders offer, sorted."""
    names: set[str] = set()
    for folder in folders:
        if folder.is_dir():
            names.update(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    names.discard("unknown")
    return sorted(names)


def _tool_class(path: Path) -> type[Tool] | None:
    """The Tool subclass defined in the module at ``path``."""
    package = files.BASE_DIR / "python" / "tools"
    if path.parent.resolve() == package.resolve():
        module = importlib.import_module(f"python.tools.{path.stem}")
    else:  # a profile's tool (agents/<p>/tools, usr/agents/<p>/tools): load by path
        spec = importlib.util.spec_from_file_location(f"_a0_tool_{path.stem}", path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, Tool)
            and value is not Tool
            and value.__module__ == module.__name__
        ):
            return value
    return None
